#!/bin/bash
# dptrain status, the run's events and the job's comment on the real test
# cluster (doc/checkpoint-format.md, "Events"; doc/protocol.md, "Status
# requests"): a running job answers from its coordinator, as text and as
# JSON, to its owner and not to another user; its Comment follows the
# commits; a finished job and a run URI answer from the events; a missing
# one is a clear error; and a worker killed with -9 during a save leaves
# no commit line for a step that is not committed.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_prog runuser python3
walltime_setup status
plan 13
dptrain=$top_builddir/dptrain
export DPTRAIN_STATUS_DIR=$work/status

# submit NAME SRUN_OPTIONS LOOP_OPTIONS: the job's id.
submit() {
	cat >"$work/$1.sh" <<EOF
#!/bin/bash
#SBATCH -N 2 -n 4 --ntasks-per-node=2 --time=30 -o $work/$1.out -J $1
srun --dp-train=$1 --dp-ckpt=file://$work/ckpt --dp-keep=1000 $2 $train $3
echo "srun exit \$?"
EOF
	sbatch_t --parsable "$work/$1.sh" | cut -d';' -f1
}
comment() { scontrol_t show job "$1" | sed -n 's/^ *Comment=//p'; }
committed_of() { sed -n 's/.*committed=\([0-9]*\).*/\1/p' <<<"$1"; }

# 1-5. A running job: 4 ranks commit every 10 steps of 100 ms.
id=$(submit live "--dp-ckpt-every=1h" "--steps 100000 --step-ms 100 --every 10")
for ((i = 0; i < 60; i++)); do
	[ -e "$work/status/$id.live" ] && [[ "$(comment "$id")" == *committed=* ]] && break
	sleep 1
done
out=$(timed "$dptrain" status "$id" 2>&1)
ok $? "dptrain status $id of a running job answers" || diag "$out"
grep -q "running" <<<"$out" && grep -q "4 of 4 ranks on 2 node(s), generation 1" <<<"$out" &&
	grep -q "^  stops  " <<<"$out" && grep -q "^  next save  in " <<<"$out"
ok $? "it is running on 4 ranks and 2 nodes, generation 1, and says when it stops and saves next" ||
	diag "$out"
js=$(timed "$dptrain" status --json "$id" 2>&1)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["source"]=="coordinator" and d["world"]==4 and d["committed"] is not None and d["time_left"]>0, d
assert d["generation"]==1 and d["stop_at"]==d["end_time"]-600, d
import time; assert 0 < d["next_save"]-time.time() <= 3600, d' "$js"
ok $? "--json parses: world 4, generation 1, a committed step, time left, the stop 10m before the end, the next save within 1h" || diag "$js"
out=$(timed runuser -u nobody -- env DPTRAIN_STATUS_DIR="$work/status" "$dptrain" status "$id" 2>&1)
rc=$?
[ "$rc" = 1 ] && grep -q "permission denied" <<<"$out"
ok $? "another user is refused (exit $rc)" || diag "$out"
c1=$(comment "$id")
sleep 8
c2=$(comment "$id")
[[ "$c1" =~ ^dptrain:\ run=live\ step=[0-9]+\ committed=[0-9]+\ restarts=0\ *$ ]] &&
	[ "$(committed_of "$c2")" -gt "$(committed_of "$c1")" ]
ok $? "the job's comment follows the commits ('$c1', then '$c2')"
timed scancel "$id"
wait_job "$id" 60

# 6-8. A finished job: from its events.
id=$(submit done "" "--steps 30 --step-ms 10 --every 10")
wait_job "$id" 60
out=$(timed "$dptrain" status --json "$id" 2>&1)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["source"]=="events" and d["committed"]==30 and d["state"]=="ended" and d["world"]==4, d' "$out"
ok $? "a finished job: from its events, step 30 committed, ended" || diag "$out"
out=$(timed "$dptrain" status "file://$work/ckpt/done" 2>&1)
ok $? "the run's URI answers the same" || diag "$out"
grep -q "committed  step 30" <<<"$out"
ok $? "and says step 30 is committed" || diag "$out"

# 9-10. Missing ones.
out=$(timed "$dptrain" status 999999 2>&1)
[ $? = 1 ] && grep -q "no job 999999" <<<"$out"
ok $? "a job unknown: exit 1, says so" || diag "$out"
out=$(timed "$dptrain" status "file://$work/ckpt/none" 2>&1)
[ $? = 1 ] && grep -q "no events" <<<"$out"
ok $? "a run without events: exit 1, says so" || diag "$out"

# 11-13. kill -9 of a worker in the middle of a save: rank 1 starts the
# save of step 60 and sleeps instead of waiting for the commit; killed, it
# leaves step 60 uncommitted. No commit line may name it.
id=$(submit crash "" "--steps 100000 --step-ms 20 --every 20 --hang-save 60")
run=$work/ckpt/crash
killed=
for ((i = 0; i < 600; i++)); do
	if grep -q '^saving step=60 rank=1$' "$work/crash.out" 2>/dev/null; then
		# Rank 1 of this test's job: another test bed may run the
		# same program.
		pid=$(cluster_pgrep "train_loop --steps 100000 --step-ms 20 --every 20 --hang-save 60" \
			SLURM_PROCID=1 | head -n 1)
		[ -n "$pid" ] && kill -9 "$pid" && killed=yes && break
	fi
	sleep 0.1
done
[ -n "$killed" ]
ok $? "rank 1 was killed in the middle of the save of step 60" || diag "$(cat "$work/crash.out")"
# The coordinator hears of the death from slurmstepd and writes the
# eviction; scancel before that would stop it first.
evicted() { grep -q '"event":"evict"' "$run/events.jsonl" 2>/dev/null; }
wait_for 30 evicted
timed scancel "$id"
wait_job "$id" 60
commits=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d=json.loads(l)
    if d["event"]=="commit": print(d["step"])' "$run/events.jsonl" | tr '\n' ' ')
bad=
for s in $commits; do
	[ -e "$run/$(printf 'step-%010d' "$s")/manifest.json" ] || bad="$bad $s"
done
[ "$commits" = "20 40 " ] && [ -z "$bad" ] && [ ! -e "$run/step-0000000060/manifest.json" ]
ok $? "commit lines for steps 20 and 40 only, each committed; step 60 is not (commits: $commits; without a manifest:$bad)" ||
	diag "$(cat "$run/events.jsonl")"
grep -q '"event":"evict"' "$run/events.jsonl"
ok $? "the loss is an evict line" || diag "$(cat "$run/events.jsonl")"

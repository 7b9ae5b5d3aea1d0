#!/bin/bash
# No flapping (doc/shapes.md, "What the user states": min_shape_interval),
# on the real test cluster (2 nodes of 2 fake GPUs) under a load that
# takes node n2 and frees it every 20 s: an admin's maintenance
# reservation said to last 5 minutes, deleted after 20 s. A job of
# --dp-shapes=1-2x2 starts on 2 nodes; its one-minute walltime stops it
# every 20 s, and its grow check runs every 10 s. At its first stop n2 is
# taken: it is requeued as 1 node. From then on Slurm's answers flip
# faster than min_shape_interval (90 s here): every stop and grow check
# within 90 s of the last change keeps the size and says why; after 90 s
# the size changes again (a grow, when n2 is free at a check). The
# changes are at least 90 s apart, every restart resumes the checkpoint
# exactly and the run finishes.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_root
require_built train tests/ckpt/train_loop
require_python
conf_cluster_up $'grow_check=10s\nmin_shape_interval=90s\ngrow_margin=1\n' \
	NODES=2 CPUS=4 GPUS=2
work_dir churn
plan 8
steps=900

shape_job churn 40s 1-2x2 "--steps $steps --global-ms 400 --total $steps" \
	-N 2 --gres=gpu:2 --time=1 --requeue
wait_output "$work/churn.out" '^run start restart=0 nodes=2 gpus=2 ' 60
ok $? "a job of 1 to 2 nodes x 2 GPUs (job $id) starts on 2 nodes" ||
	bail_out "$(job_state "$id")" "$(cat "$work/churn.out")"

# The load, from 10 s on: n2 taken for 20 s, free for 20 s, again.
churn() {
	sleep 10
	while :; do
		scontrol_t create reservation reservationname=churn starttime=now duration=5 \
			nodes=n2 users=root flags=maint,ignore_jobs >/dev/null
		sleep 20
		scontrol_t delete reservationname=churn >/dev/null
		sleep 20
	done
}
churn &
churn_pid=$!
stop_churn() { kill "$churn_pid" 2>/dev/null; wait "$churn_pid" 2>/dev/null; true; }
dpt_exit_hooks+=(stop_churn)

job_ended "$id" "$work/churn.out"
stop_churn
grep -q "job $id requeued as 1 node x 2 GPUs: starts now" <<<"$out"
ok $? "at its first stop, n2 taken, it is requeued as 1 node x 2 GPUs" || diag "$out"
[[ "$(job_state "$id")" =~ JobState=COMPLETED ]] &&
	[ "$(grep -c "^finished step=$steps rank=[0-3] committed$" <<<"$out")" -ge 2 ]
ok $? "the run finished at step $steps" || diag "$(job_state "$id")" "$out"
# Each start after the first resumed on each of its ranks, exactly.
resumes=$(awk '
	/^run start restart=/ { split($3, r, "="); split($4, n, "=");
		if (r[2] > 0) { want[r[2]] = n[2] * 2 } }
	/^resumed step=[0-9]* rank=[0-9]* world=[0-9]* restart=[0-9]* exact$/ {
		split($5, r, "="); got[r[2]]++ }
	END { bad = 0; runs = 0
		for (k in want) { runs++; if (got[k] != want[k]) bad++ }
		print runs, bad }' <<<"$out")
[[ "$resumes" =~ ^[1-9][0-9]*\ 0$ ]]
ok $? "every restart (runs, mismatches: $resumes) resumed the checkpoint exactly on each rank" ||
	diag "$out"
grep -q "the last size change was [0-9ms]* ago (min_shape_interval 1m30s)" <<<"$out"
ok $? "within 90 s of a change, a stop or a grow check kept the size and said why" ||
	diag "$out"
events=$(cat "$work"/ckpt/churn/events* 2>/dev/null)
# The shape lines: each change at least 90 s after the one before, and
# every stop that kept the size for the interval said so.
verdict=$($py -c '
import json, sys
last, bad, kept, changes = None, 0, 0, 0
for line in sys.stdin:
    d = json.loads(line)
    if d["event"] != "shape":
        continue
    if d["reason"] in ("changed", "grow"):
        if last is not None and d["time"] - last < 90:
            bad += 1
        last = d["time"]
        changes += 1
    elif last is not None and d["time"] - last < 90:
        kept += "min_shape_interval" in (d["why"] or "")
print(bad, kept, changes)' <<<"$events")
read -r close kept changes <<<"$verdict"
[ "$close" = 0 ] && [ "$kept" -ge 1 ] && [ "$changes" -ge 2 ]
ok $? "$changes size changes, none less than 90 s after the one before ($close), $kept stop(s) kept the size for the interval" ||
	diag "$events"
[ "$(grep -c '"event":"shape"' <<<"$events")" -ge 2 ]
ok $? "each requeue wrote its shape line" || diag "$events"

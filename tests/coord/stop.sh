#!/bin/bash
# The walltime stop on loopback (doc/walltime.md), without Slurm: a real
# coordinator given a fixed end time (--end-time, --grace) and real
# training loops (tests/ckpt/train_loop) that ask dpt_should_stop after
# every step. They stop at the same step once the end is within the grace,
# commit a checkpoint, and a later run (here with another world size)
# resumes from it with every byte of its state exact.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/coord/lib.sh"

train=$top_builddir/tests/ckpt/train_loop
[ -x "$train" ] || skip_all "build the training loop first (make check builds $train)"
export DPTRAIN_CKPT_URI=file://$coord_dir/ckpt DPTRAIN_RUN=stop
plan 17

# train_start NAME TASK ARG...: one training loop with the task
# environment the SPANK plugin would give it (one node).
train_start() {
	local name=$1 task=$2
	shift 2
	SLURM_NODEID=0 SLURM_LOCALID=$task SLURM_PROCID=$task \
		DPTRAIN_BACKEND=cpu DPTRAIN_DATA_HOST=127.0.0.1 \
		"$train" "$@" >"$coord_dir/$name.out" 2>"$coord_dir/$name.log" &
	worker_pid[$name]=$!
}
# train_all PREFIX N ARG...: N loops PREFIX0.. and their exit statuses.
train_all() {
	local prefix=$1 n=$2 i rc=0
	shift 2
	for ((i = 0; i < n; i++)); do
		train_start "$prefix$i" "$i" "$@"
	done
	for ((i = 0; i < n; i++)); do
		worker_wait "$prefix$i" 60 || rc=$?
	done
	return "$rc"
}
outs() { cat "$coord_dir/$1"[0-9].out; }

# 1-2. Bad options: a clear message, exit status 2.
out=$("$coord_bin" --world-size 2 --requeue auto 2>&1)
is "$?:$out" "2:dptrain-coordinator: --requeue auto needs the job to requeue (--job-id)" \
	"--requeue auto without --job-id is refused"
out=$("$coord_bin" --world-size 2 --end-time 100 --grace 'soon' 2>&1)
is "$?:$(grep -c "'soon' is not a duration" <<<"$out")" "2:1" "a bad --grace is refused, named" ||
	diag "$out"

# 3-8. End in 9 s, grace 6 s: three ranks are told to stop about 3 s from
# now, at the same step, commit it and exit 0; so does the coordinator.
end=$(($(date +%s) + 9))
coord_start 3 --end-time "$end" --grace 6s
rc=0
train_all a 3 --steps 100000 --step-ms 20 || rc=$?
stopped_at=$(date +%s)
is "$rc" 0 "three training loops exit 0 after the stop" || diag "$(outs a)"
stops=$(outs a | grep -o '^stopped step=[0-9]*' | sort | uniq -c | awk '{ print $1 " " $3 }')
step=${stops#3 step=}
[[ "$stops" =~ ^3\ step=[0-9]+$ ]]
ok $? "every rank stopped at the same step ($stops)" || diag "$(outs a)"
[ "$step" -gt 20 ] 2>/dev/null
ok $? "not before the grace: $step steps of 20 ms ran first" || diag "$(outs a)"
[ "$stopped_at" -lt "$end" ]
ok $? "before the end time (stopped $((end - stopped_at)) s before it)"
coord_wait 10
is "$?" 0 "the coordinator exits 0"
grep -q "the step ends at .* (grace 6 s): the workers are told to stop" "$coord_log"
ok $? "the coordinator logs the stop and why" || diag "$(cat "$coord_log")"

# 9-12. The next run, on two ranks: resumes from the stop's checkpoint with
# an exact state (resharded from three ranks), finishes.
coord_start 2
rc=0
train_all b 2 --steps $((step + 15)) --step-ms 1 || rc=$?
is "$rc" 0 "two training loops resume and finish" || diag "$(outs b)"
is "$(outs b | grep -c "^resumed step=$step rank=[01] world=2 restart=0 exact$")" 2 \
	"both resumed at step $step with the exact state" || diag "$(outs b)"
is "$(outs b | grep -c "^finished step=$((step + 15)) rank=[01] committed$")" 2 \
	"both finished at step $((step + 15))" || diag "$(outs b)"
coord_wait 10
is "$?" 0 "the coordinator exits 0 (no stop, no end time)"

# 13-15. An end time already within the grace: the first question stops,
# after one step, at the same step everywhere; a checkpoint every 3 steps
# does not change that.
coord_start 2 --end-time $(($(date +%s) + 5)) --grace 1h
rc=0
train_all c 2 --steps $((step + 1000)) --step-ms 1 --every 3 || rc=$?
is "$rc" 0 "an end already within the grace: both exit 0" || diag "$(outs c)"
is "$(outs c | grep -c "^stopped step=$((step + 16)) rank=[01] committed$")" 2 \
	"both stopped after their first step" || diag "$(outs c)"
coord_wait 10
is "$?" 0 "the coordinator exits 0"

# 16-17. No end time: a program that asks every step never stops.
coord_start 2
rc=0
train_all d 2 --steps $((step + 40)) --step-ms 1 || rc=$?
is "$rc:$(outs d | grep -c '^finished')" "0:2" "without an end time the loops run to their last step" ||
	diag "$(outs d)"
coord_wait 10
is "$?" 0 "the coordinator exits 0"

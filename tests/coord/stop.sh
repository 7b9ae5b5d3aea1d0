#!/bin/bash
# The walltime stop and periodic checkpoints on loopback (doc/walltime.md),
# without Slurm: a real
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
plan 37

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

# 18-20. dpt_ckpt_step with DPTRAIN_CKPT_EVERY=4steps (what srun
# --dp-ckpt-every=4steps exports): saves at steps 4, 8 and 12 on both
# ranks, and the last step at the end; all committed.
coord_start 2
rc=0
DPTRAIN_RUN=every DPTRAIN_CKPT_EVERY=4steps DPTRAIN_KEEP=100 \
	train_all e 2 --steps 14 --step-ms 1 --auto || rc=$?
is "$rc:$(outs e | grep -o '^saved step=[0-9]*' | sort | uniq -c | tr -s ' ' | tr '\n' '|')" \
	"0: 2 saved step=12| 2 saved step=4| 2 saved step=8|" \
	"every 4 steps: both ranks saved steps 4, 8 and 12" || diag "$(outs e)"
ls=$("$top_builddir/dptrain" ckpt ls "$DPTRAIN_CKPT_URI/every" 2>&1)
is "$(awk '$3 == "committed" { print $2 }' <<<"$ls" | tr '\n' ' ')" "4 8 12 14 " \
	"steps 4, 8, 12 and the final 14 are committed" || diag "$ls"
coord_wait 10
is "$?" 0 "the coordinator exits 0"

# 21-22. A coordinator that says a checkpoint is due every second
# (--ckpt-every 1s, as srun --dp-ckpt-every=1s starts it): over about 3 s
# of steps, the ranks save the same steps, more than once.
coord_start 2 --ckpt-every 1s
rc=0
DPTRAIN_RUN=timed DPTRAIN_KEEP=100 train_all t 2 --steps 120 --step-ms 25 --auto || rc=$?
t0=$(grep -o '^saved step=[0-9]*' "$coord_dir/t0.out" | tr '\n' ' ')
t1=$(grep -o '^saved step=[0-9]*' "$coord_dir/t1.out" | tr '\n' ' ')
[ "$rc" = 0 ] && [ "$t0" = "$t1" ] && [ "$(wc -w <<<"$t0")" -ge 4 ] # "saved step=N" is 2 words: 2 saves or more
ok $? "every second: both ranks saved the same steps (${t0% })" || diag "$(outs t)"
coord_wait 10
is "$?" 0 "the coordinator exits 0"

# 23. With the stop, dpt_ckpt_step saves and commits the last step.
coord_start 2 --end-time $(($(date +%s) + 5)) --grace 1h --ckpt-every 1h
rc=0
DPTRAIN_RUN=autostop train_all s 2 --steps 1000 --step-ms 1 --auto || rc=$?
is "$rc:$(outs s | grep -c '^stopped step=1 rank=[01] committed$')" "0:2" \
	"dpt_ckpt_step at the stop: step 1 saved and committed on both ranks" || diag "$(outs s)"
coord_wait 10

# 24. A periodic save is committed once its writes are done, not at the
# next save: with a save every 4 steps of 200 ms, the commit of step 4
# (the library's log, in the same stream) comes before step 8 ends (where
# the next save would have committed it); here, during step 6 unless
# its few kilobytes took longer than a step to write.
coord_start 1
DPTRAIN_RUN=prompt DPTRAIN_CKPT_EVERY=4steps SLURM_NODEID=0 SLURM_LOCALID=0 SLURM_PROCID=0 \
	DPTRAIN_BACKEND=cpu DPTRAIN_DATA_HOST=127.0.0.1 \
	"$train" --steps 10 --step-ms 200 --auto --trace >"$coord_dir/p.out" 2>&1
order=$(grep -o '^step [4-8]$\|committed step 4 ' "$coord_dir/p.out" | tr '\n' ' ')
[[ "$order" =~ ^step\ 4\ step\ 5\ (step\ 6\ )?(step\ 7\ )?committed\ step\ 4\ .*step\ 8 ]]
ok $? "step 4 is committed once written, before step 8 (${order% })" || diag "$(cat "$coord_dir/p.out")"
coord_wait 10

# 25-26. Bad intervals are named.
out=$("$coord_bin" --world-size 2 --ckpt-every often 2>&1)
is "$?:$out" "2:dptrain-coordinator: --ckpt-every: 'often' is not auto, a duration or Nsteps" \
	"a bad --ckpt-every is refused"
coord_start 1
rc=0
DPTRAIN_CKPT_EVERY=3stepz train_all x 1 --steps 3 --auto || rc=$?
[ "$rc" != 0 ] && grep -q "DPTRAIN_CKPT_EVERY='3stepz': expected auto, a duration or Nsteps" "$coord_dir/x0.log"
ok $? "a bad DPTRAIN_CKPT_EVERY fails the checkpoint object, named" || diag "$(cat "$coord_dir/x0.log")"

# 27-31. A stop asked by one rank (doc/walltime.md, "A stop asked by a
# rank"): no end time at all; rank 1's SIGUSR1 handler calls
# dpt_request_stop, and all three ranks stop at the same step and commit
# it there, as at the walltime.
coord_start 3
for i in 0 1 2; do
	DPTRAIN_RUN=asked train_start "u$i" "$i" --steps 100000 --step-ms 20 --trace --stop-signals
done
wait_for 30 grep -q '^step 10$' "$coord_dir/u1.out" || diag "rank 1 did not reach step 10"
kill -USR1 "${worker_pid[u1]}"
rc=0
for i in 0 1 2; do worker_wait "u$i" 60 || rc=$?; done
is "$rc" 0 "SIGUSR1 to rank 1: the three loops exit 0" || diag "$(outs u)"
stops=$(outs u | grep -o '^stopped step=[0-9]* rank=[0-2] committed$' | cut -d' ' -f2 | sort | uniq -c | awk '{ print $1 " " $2 }')
[[ "$stops" =~ ^3\ step=[0-9]+$ ]]
ok $? "every rank stopped at the same step and committed it ($stops)" || diag "$(outs u)"
ustep=${stops#3 step=}
[ "$ustep" -ge 10 ] 2>/dev/null && [ "$ustep" -le 40 ]
ok $? "at the step after the signal ($ustep), not at the end" || diag "$(outs u)"
grep -q "stop requested by rank 1 (task 1, .*): the workers are told to stop at this vote" "$coord_log"
ok $? "the coordinator logs which rank asked" || diag "$(cat "$coord_log")"
coord_wait 10
is "$?" 0 "the coordinator exits 0"

# 32-34. The same with dpt_ckpt_step (--auto) and Slurm's preemption
# signal, SIGTERM, to rank 2: dpt_ckpt_step saves and commits the stop's
# step on every rank, and the next run resumes from it, exact.
coord_start 3 --ckpt-every 1h
for i in 0 1 2; do
	DPTRAIN_RUN=preempt train_start "v$i" "$i" --steps 100000 --step-ms 20 --trace --auto --stop-signals
done
wait_for 30 grep -q '^step 5$' "$coord_dir/v2.out" || diag "rank 2 did not reach step 5"
kill -TERM "${worker_pid[v2]}"
rc=0
for i in 0 1 2; do worker_wait "v$i" 60 || rc=$?; done
stops=$(outs v | grep -o '^stopped step=[0-9]* rank=[0-2] committed$' | cut -d' ' -f2 | sort | uniq -c | awk '{ print $1 " " $2 }')
vstep=${stops#3 step=}
ls=$("$top_builddir/dptrain" ckpt ls "$DPTRAIN_CKPT_URI/preempt" 2>&1)
[ "$rc" = 0 ] && [[ "$stops" =~ ^3\ step=[0-9]+$ ]] &&
	[ "$(awk '$3 == "committed" { print $2 }' <<<"$ls")" = "$vstep" ]
ok $? "SIGTERM to rank 2: dpt_ckpt_step saved and committed step $vstep on every rank" ||
	diag "$(outs v)" "$ls"
grep -q "stop requested by rank 2 (task 2, " "$coord_log" && coord_wait 10
ok $? "the coordinator logs rank 2's request and exits 0" || diag "$(cat "$coord_log")"
coord_start 2
rc=0
DPTRAIN_RUN=preempt train_all w 2 --steps $((vstep + 5)) --step-ms 1 || rc=$?
is "$rc:$(outs w | grep -c "^resumed step=$vstep rank=[01] world=2 restart=0 exact$")" "0:2" \
	"the next run resumes from step $vstep with the exact state" || diag "$(outs w)"
coord_wait 10

# 35-37. SIGUSR1 to the coordinator itself (scancel --signal=USR1 with
# --full or -b reaches the batch step, where it runs): the same stop.
coord_start 2
for i in 0 1; do
	DPTRAIN_RUN=coordsig train_start "g$i" "$i" --steps 100000 --step-ms 20 --trace
done
wait_for 30 grep -q '^step 10$' "$coord_dir/g0.out" || diag "rank 0 did not reach step 10"
kill -USR1 "$coord_pid"
rc=0
for i in 0 1; do worker_wait "g$i" 60 || rc=$?; done
stops=$(outs g | grep -o '^stopped step=[0-9]* rank=[01] committed$' | cut -d' ' -f2 | sort | uniq -c | awk '{ print $1 " " $2 }')
[ "$rc" = 0 ] && [[ "$stops" =~ ^2\ step=[0-9]+$ ]] && [ "${stops#2 step=}" -le 40 ]
ok $? "SIGUSR1 to the coordinator: both ranks stopped at the same step, committed ($stops)" ||
	diag "$(outs g)"
grep -q "the coordinator got SIGUSR1: the workers are told to stop at their next vote" "$coord_log"
ok $? "the coordinator logs why" || diag "$(cat "$coord_log")"
coord_wait 10
is "$?" 0 "the coordinator exits 0"

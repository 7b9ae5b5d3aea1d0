#!/bin/bash
# A batch job that outlives its walltime (doc/walltime.md), on the real
# test cluster: `sbatch --time=1` runs `srun --dp-train --dp-grace=50s`
# with a training loop (tests/ckpt/train_loop) that needs longer than the
# 10 s the grace leaves it. The coordinator reads the job's end time from
# slurmctld and stops the step; every rank commits a checkpoint at the same
# step; the coordinator requeues the job; Slurm runs it again, and the
# loop resumes from that checkpoint with its state exact and finishes.
# With --dp-requeue=off the step stops in time and the job just ends.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

walltime_setup walltime
plan 22

# submit NAME REQUEUE STEPS [SRUN_OPTIONS [LOOP_OPTIONS]]: a one-minute job
# of 4 tasks on 2 nodes.
submit() {
	cat >"$work/$1.sh" <<EOF
#!/bin/bash
#SBATCH -N 2 -n 4 --ntasks-per-node=2 --time=1 --requeue --open-mode=append
#SBATCH -o $work/$1.out -J $1
echo "run start restart=\${SLURM_RESTART_COUNT:-0} at \$(date +%s)"
srun --dp-train=$1 --dp-ckpt=file://$work/ckpt --dp-grace=50s --dp-requeue=$2 ${4:-} \\
	$train --steps $3 --step-ms 100 --linger-ms 1500 ${5:-}
echo "srun exit \$?"
EOF
	sbatch_t --parsable "$work/$1.sh" | cut -d';' -f1
}

# 1-10. Requeue: stops ~10 s after the start, requeued, resumes, finishes.
id=$(submit wt auto 150 --dp-verbose)
[ -n "$id" ]
ok $? "sbatch --time=1 of srun --dp-train --dp-grace=50s: job $id" || bail_out "sbatch failed"
wait_job "$id" 300
ok $? "the job ends within 5 minutes" || diag "$(job_state "$id")" "$(cat "$work/wt.out")"
out=$(cat "$work/wt.out")
state=$(job_state "$id")
[[ "$state" =~ JobState=COMPLETED.*Restarts=([1-9]) ]]
ok $? "it completed after a requeue ($state)" || diag "$out"
stop=$(grep -o '^stopped step=[0-9]*' <<<"$out" | head -n 4 | sort | uniq -c | awk '{ print $1 " " $3 }')
[[ "$stop" =~ ^4\ step=[0-9]+$ ]]
ok $? "the first run's 4 ranks stopped at the same step ($stop)" || diag "$out"
step=${stop#4 step=}
[ "$step" -lt 150 ] 2>/dev/null && [ "$step" -gt 20 ]
ok $? "stopped in time: step $step of 150, well after the start" || diag "$out"
grep -q "job $id ends at .* (grace 50 s): the workers are told to stop" <<<"$out"
ok $? "the coordinator said why it stopped the step" || diag "$out"
grep -q "requeueing job $id after step [0-9]* (committed)" <<<"$out"
ok $? "the coordinator requeued the job" || diag "$out"
is "$(sed -n "/^stopped/,/requeueing job/p" <<<"$out" | grep -c '^bye rank=')" 4 \
	"after every task had wound down (1.5 s after it left)" || diag "$out"
# The coordinator learnt that from slurmstepd's reports (TASK_EXIT), not
# from srun stopping it at the end of the step: it says so before the
# requeue.
sed -n "/^stopped/,/requeueing job/p" <<<"$out" | grep -q "every task of the step has exited"
ok $? "the coordinator counted the tasks' exits before it requeued" || diag "$out"
is "$(grep -c "^resumed step=$step rank=[0-3] world=4 restart=1 exact$" <<<"$out")" 4 \
	"the second run's 4 ranks resumed at step $step with the exact state" || diag "$out"
is "$(grep -c '^finished step=150 rank=[0-3] committed$' <<<"$out")" 4 \
	"and finished at step 150" || diag "$out"

# 11-14. --dp-requeue=off: stopped in time and committed, not requeued;
# with --dp-ckpt-every=3s the loop's dpt_ckpt_step also saved every 3 s.
id=$(submit off off 150 "--dp-ckpt-every=3s --dp-keep=50" --auto)
wait_job "$id" 120
out=$(cat "$work/off.out")
state=$(job_state "$id")
[[ "$state" =~ JobState=COMPLETED.*Restarts=0 ]]
ok $? "--dp-requeue=off: the job completed without a requeue ($state)" || diag "$out"
is "$(grep -c '^stopped step=[0-9]* rank=[0-3] committed$' <<<"$out")" 4 \
	"its 4 ranks stopped in time and committed" || diag "$out"
dptrain=$top_builddir/dptrain
step=$(grep -o '^stopped step=[0-9]*' <<<"$out" | head -n 1 | cut -d= -f2)
"$dptrain" ckpt verify "file://$work/ckpt/off" >/dev/null 2>&1 &&
	"$dptrain" ckpt ls "file://$work/ckpt/off" 2>&1 | grep -qw "$step"
ok $? "the checkpoint of step $step verifies" || diag "$("$dptrain" ckpt ls "file://$work/ckpt/off" 2>&1)"
periodic=$(grep -o '^saved step=[0-9]*' <<<"$out" | cut -d= -f2 | sort -n | uniq -c |
	awk -v s="$step" '$1 == 4 && $2 != s { print $2 }' | tr '\n' ' ')
committed=$("$dptrain" ckpt ls "file://$work/ckpt/off" 2>&1 | awk '$3 == "committed" { print $2 }' | tr '\n' ' ')
[ "$(wc -w <<<"$periodic")" -ge 2 ] && [ "$committed" = "$periodic$step " ]
ok $? "--dp-ckpt-every=3s: all 4 ranks saved steps $periodic before the stop; all committed" ||
	diag "$out" "committed: $committed"

# 15-16. An interactive srun (its own job, not a batch job): stopped in
# time and committed; Slurm refuses the requeue and the user is told why
# and what to do.
out=$(DPT_TIMEOUT=120 srun_t -N 1 -n 2 --time=1 --dp-train=inter --dp-ckpt="file://$work/ckpt" \
	--dp-grace=55s "$train" --steps 100000 --step-ms 50 2>&1)
is "$?:$(grep -c '^stopped step=[0-9]* rank=[01] committed$' <<<"$out")" "0:2" \
	"srun --time=1 --dp-grace=55s: both ranks stopped in time and committed, srun exits 0" || diag "$out"
grep -q "cannot requeue job [0-9]*: .*batch.*; its checkpoint is committed: submit the job again to resume from it" <<<"$out"
ok $? "the refused requeue is explained" || diag "$out"

# 18-22. Preemption's path (doc/walltime.md, "A stop asked by a rank"):
# `scancel --signal=USR1` of a running job reaches its 4 tasks, whose
# handler calls dpt_request_stop. Its walltime is far (grace 30 s of 1
# minute): the ranks stop at the same step because a rank asked, commit,
# the job is requeued and the next run resumes there and finishes.
cat >"$work/sig.sh" <<EOF2
#!/bin/bash
#SBATCH -N 2 -n 4 --ntasks-per-node=2 --time=1 --requeue --open-mode=append
#SBATCH -o $work/sig.out -J sig
echo "run start restart=\${SLURM_RESTART_COUNT:-0}"
srun --dp-train=sig --dp-ckpt=file://$work/ckpt --dp-grace=30s --dp-requeue=auto \\
	$train --steps 200 --step-ms 100 --trace --stop-signals
echo "srun exit \$?"
EOF2
id=$(sbatch_t --parsable "$work/sig.sh" | cut -d';' -f1)
for ((i = 0; i < 600; i++)); do
	grep -q '^step 20$' "$work/sig.out" 2>/dev/null && break
	sleep 0.1
done
scancel --signal=USR1 "$id"
ok $? "scancel --signal=USR1 of job $id at step 20 or so" || diag "$(cat "$work/sig.out" 2>&1)"
wait_job "$id" 180
out=$(cat "$work/sig.out")
state=$(job_state "$id")
stop=$(grep -o '^stopped step=[0-9]* rank=[0-3] committed$' <<<"$out" | head -n 4 |
	cut -d' ' -f2 | sort | uniq -c | awk '{ print $1 " " $2 }')
[[ "$stop" =~ ^4\ step=[0-9]+$ ]] && [ "${stop#4 step=}" -lt 100 ]
ok $? "its 4 ranks stopped at the same step soon after, committed ($stop)" || diag "$out"
step=${stop#4 step=}
grep -q "stop requested by rank [0-3] (task [0-3], " <<<"$out"
ok $? "the coordinator said which rank asked" || diag "$out"
[[ "$state" =~ JobState=COMPLETED.*Restarts=1 ]] && grep -q "requeueing job $id after step [0-9]* (committed)" <<<"$out"
ok $? "the job was requeued and completed ($state)" || diag "$out"
is "$(grep -c "^resumed step=$step rank=[0-3] world=4 restart=1 exact$" <<<"$out"):$(grep -c '^finished step=200 rank=[0-3] committed$' <<<"$out")" \
	"4:4" "the next run resumed at step $step, exact, and finished" || diag "$out"

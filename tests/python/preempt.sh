#!/bin/bash
# A PyTorch job (contrib/examples/fmnist_dptrain.py, 4 ranks on 2 nodes)
# stopped by a signal or its walltime, on the real test cluster: the
# signal becomes the same agreed stop as the walltime (every rank stops at
# one step, the checkpoint commits, the coordinator requeues the job), and
# the requeued job resumes there and finishes.
#  - scancel --signal=USR1 JOB: Slurm signals every task of the job's steps;
#  - scancel -b --signal=TERM JOB: only the batch shell gets it, and the
#    batch script of dptrain(8) ("Signals") forwards it to the tasks;
#  - Slurm's preemption: a job of partition `high` takes the nodes of one
#    of `low` (PreemptMode=REQUEUE, GraceTime=30: SIGTERM to the tasks);
#  - sbatch --time=1 --requeue: the walltime.
# On Debian's torch 1.13 the USR1 and walltime stops only; the run on
# torch 2 (tests/python/torch2/preempt.sh, DPT_PYTHON set) makes all four:
# how Slurm signals the tasks does not depend on the torch, what they save
# and load does, and every stop exercises that alike.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_fmnist_training
cluster_up NODES=2 CPUS=4 GPUS=0 PREEMPT_GRACE=30
work=$(mktemp -d /tmp/dptrain-preempt.XXXXXX) || bail_out "mktemp failed"
dpt_scratch+=("$work")
chmod 755 "$work"
dptrain=$top_builddir/dptrain
all=$([ -n "${DPT_PYTHON:-}" ] && echo 1)
plan $([ "$all" ] && echo 26 || echo 12)

# submit NAME STEPS SBATCH_OPTIONS FORWARD [EXAMPLE_OPTIONS]: a job of 4
# tasks on 2 nodes training to STEPS (read from $work/NAME.target at each
# start); FORWARD=1 runs srun in the background and forwards the batch
# shell's TERM and USR1 to the tasks (dptrain(8), "Signals").
submit() {
	echo "$2" >"$work/$1.target"
	local run="srun --dp-train=$1 --dp-ckpt=file://$work/ckpt --dp-grace=50s \\
	$py $top_srcdir/contrib/examples/fmnist_dptrain.py --steps \$(cat $work/$1.target) --log-every 10 ${5:-}"
	if [ "$4" = 1 ]; then
		run="trap 'scancel --signal=USR1 \"\$SLURM_JOB_ID\"' TERM USR1
$run &
srun_pid=\$!
while ! wait \$srun_pid && kill -0 \$srun_pid 2>/dev/null; do :; done"
	fi
	cat >"$work/$1.sh" <<EOF
#!/bin/bash
#SBATCH -N 2 -n 4 --ntasks-per-node=2 --requeue --open-mode=append $3
#SBATCH -o $work/$1.out -J $1
export PYTHONPATH=$top_srcdir/worker/python DPTRAIN_LIBRARY=$lib
$run
EOF
	sbatch_t --parsable "$work/$1.sh" | cut -d';' -f1
}
# check_stop NAME ID STEPS: the job was stopped once, requeued, resumed at
# the step it stopped at, and finished.
#
# Known defect, not understood yet (issue 12's note): now and then, in the
# run after the requeue, one rank does not exit after the last step (the
# training is over, the checkpoint committed, the test accuracy printed)
# and the job holds its nodes until it is cancelled. The test then says so,
# shows where that rank waits, and cancels the job; the checks of the stop,
# the commit, the requeue and the resume hold either way.
check_stop() {
	local out state step pid hung=""
	wait_output "$work/$1.out" "fmnist: done at step $3 " 300
	ok $? "$1: the requeued job trains to step $3 within 5 minutes" ||
		diag "$(job_state "$2")" "$(cat "$work/$1.out")"
	if ! wait_job "$2" 60; then
		hung=" (a rank hung at exit: job cancelled)"
		diag "KNOWN DEFECT: job $2 still runs 60 s after its last step: $(job_state "$2")"
		for pid in $(cluster_pgrep "fmnist_dptrain.py --steps $3 "); do
			diag "still running: pid $pid, kernel stack:" "$(cat "/proc/$pid/stack" 2>/dev/null)"
			command -v gdb >/dev/null &&
				diag "$(timeout 30 gdb -p "$pid" -batch -ex 'thread apply all bt 10' 2>/dev/null |
					grep '^#\|^Thread' | head -n 80)"
		done
		timed scancel "$2"
		wait_job "$2" 60
	fi
	out=$(cat "$work/$1.out")
	state=$(job_state "$2")
	step=$(grep -o 'fmnist: stopped at step [0-9]*' <<<"$out" | head -n 1 | awk '{ print $5 }')
	if [ -z "$hung" ]; then
		[[ "$state" =~ JobState=COMPLETED.*Restarts=([1-9]) ]] && [ -n "$step" ]
	else
		[[ "$state" =~ Restarts=([1-9]) ]] && [ -n "$step" ]
	fi
	ok $? "$1: stopped at step ${step:-?} with a committed checkpoint, requeued, ended ($state)$hung" ||
		diag "$out"
	grep -q "requeueing job $2 after step [0-9]* (committed)" <<<"$out"
	ok $? "$1: the coordinator requeued the job" || diag "$out"
	grep -q "fmnist: resumed at step $step on 4 ranks (restart 1)" <<<"$out" &&
		grep -q "fmnist: done at step $3 " <<<"$out"
	ok $? "$1: the requeued job resumed at step $step and finished at step $3" || diag "$out"
}

# 1-6. scancel --signal=USR1: every task gets it.
id=$(submit usr1 300 "" 0)
wait_output "$work/usr1.out" '^step 40 ' 120
ok $? "usr1: job $id trains" || diag "$(cat "$work/usr1.out")"
scancel_out=$(timed scancel --signal=USR1 "$id" 2>&1)
ok $? "scancel --signal=USR1 $id" || diag "$scancel_out"
check_stop usr1 "$id" 300

# 7-12. scancel -b --signal=TERM: the batch shell forwards it.
if [ "$all" ]; then
	id=$(submit term 300 "" 1)
	wait_output "$work/term.out" '^step 40 ' 120
	ok $? "term: job $id trains" || diag "$(cat "$work/term.out")"
	scancel_out=$(timed scancel -b --signal=TERM "$id" 2>&1)
	ok $? "scancel -b --signal=TERM $id" || diag "$scancel_out"
	check_stop term "$id" 300

	# 13-20. Preemption: a job of `high` needs every CPU of both nodes.
	id=$(submit pre 300 "-p low" 0)
	wait_output "$work/pre.out" '^step 40 ' 120
	ok $? "pre: job $id of partition low trains" || diag "$(cat "$work/pre.out")"
	high=$(sbatch_t --parsable -p high -N 2 -n 8 -o "$work/high.out" --wrap "sleep 2" | cut -d';' -f1)
	ok $? "a job of partition high asks for all the nodes: job $high" || diag "$high"
	check_stop pre "$id" 300
	grep -q "rank [0-3]: SIGTERM: stopping at the next step" "$work/pre.out"
	ok $? "pre: Slurm's preemption SIGTERM reached the ranks" || diag "$(cat "$work/pre.out")"
	is "$(job_state "$high" | grep -o 'JobState=[A-Z]*')" JobState=COMPLETED "the job of high ran in between"
fi

# 21-26. The walltime: a two-minute job with a 50 s grace trains 70 s a
# run, less the time Python takes to start (over 30 s on a loaded machine
# with torch 2). Once the first run has stopped, the target becomes 30
# steps past its stop, which the requeued run reaches.
# Paced (0.1 s a step): the walltime, not the steps, ends its first run,
# and 4 ranks training flat out for a minute would only burn CPU.
id=$(submit wall 100000000 --time=2 0 "--step-delay 0.1")
[ -n "$id" ]
ok $? "wall: sbatch --time=2 --requeue: job $id" || bail_out "sbatch failed"
wait_output "$work/wall.out" "requeueing job $id after step" 300 ||
	diag "wall: no stop within 300 s: $(job_state "$id")" "$(cat "$work/wall.out")"
stop=$(grep -o "requeueing job $id after step [0-9]*" "$work/wall.out" | head -n 1 | awk '{ print $NF }')
echo $((${stop:-0} + 30)) >"$work/wall.target"
check_stop wall "$id" $((${stop:-0} + 30))
"$dptrain" ckpt verify "file://$work/ckpt/wall" >/dev/null 2>&1
ok $? "wall: every committed step of the run verifies" ||
	diag "$("$dptrain" ckpt verify "file://$work/ckpt/wall" 2>&1)"

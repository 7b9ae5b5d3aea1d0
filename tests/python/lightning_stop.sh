#!/bin/bash
# A Lightning job (contrib/examples/fmnist_lightning.py, 2 ranks on 2
# nodes, torch 2 and Lightning 2.6) stopped on the real test cluster by its
# walltime, by scancel --signal=TERM and by scancel --signal=USR1: each is
# one agreed stop beside Lightning's own SIGTERM handling (every rank stops
# at one step, the checkpoint commits, the coordinator requeues the job),
# and the requeued job resumes there and finishes, every step trained once;
# the USR1 job's Trainer has min_steps at its end, which the stop overrides.
# The three jobs run side by side.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_fmnist_training lightning
cluster_up NODES=2 CPUS=6 GPUS=0
work=$(mktemp -d /tmp/dptrain-lstop.XXXXXX) || bail_out "mktemp failed"
dpt_scratch+=("$work")
chmod 755 "$work"
plan 17

# submit NAME STEPS SBATCH_OPTIONS [EXAMPLE_OPTIONS]: a job of 2 tasks on 2
# nodes training to STEPS at about 10 steps a second. A rank a node still
# makes Lightning's num_nodes 2; 4 ranks a job cost the suite, short of
# CPU, 12 more Lightning starts of about 5 CPU seconds each.
submit() {
	cat >"$work/$1.sh" <<EOS
#!/bin/bash
#SBATCH -N 2 -n 2 --ntasks-per-node=1 --requeue --open-mode=append $3
#SBATCH -o $work/$1.out -J $1
export PYTHONPATH=$top_srcdir/worker/python DPTRAIN_LIBRARY=$lib
srun --dp-train=$1 --dp-ckpt=file://$work/ckpt --dp-grace=40s \\
	$py $top_srcdir/contrib/examples/fmnist_lightning.py --steps $2 --train-size 960 \\
	--workers 1 --step-delay 0.1 --trace $work/$1.trace ${4:-}
EOS
	sbatch_t --parsable "$work/$1.sh" | cut -d';' -f1
}
# check_stop NAME ID STEPS: stopped, requeued, resumed where it stopped,
# finished, every step trained once by every rank.
check_stop() {
	local out state step
	wait_output "$work/$1.out" "fmnist: done at step $3 " 400
	ok $? "$1: the requeued job trains to step $3" || diag "$(job_state "$2")" "$(cat "$work/$1.out")"
	wait_job "$2" 60 || { diag "job $2 still runs: $(job_state "$2")"; timed scancel "$2"; }
	out=$(cat "$work/$1.out")
	state=$(job_state "$2")
	step=$(grep -o 'fmnist: stopped at step [0-9]*' <<<"$out" | tail -n 1 | awk '{ print $5 }')
	[[ "$state" =~ JobState=COMPLETED.*Restarts=([1-9]) ]] && [ -n "$step" ] &&
		grep -q "requeueing job $2 after step $step (committed)" <<<"$out"
	ok $? "$1: stopped at step ${step:-?} with a committed checkpoint, requeued by the coordinator ($state)" ||
		diag "$out"
	grep -q "fmnist: done at step $3 (from $step) on 2 ranks" <<<"$out"
	ok $? "$1: the requeued job resumed at step $step and finished" || diag "$out"
	res=$("$py" "$check" samples "$work/$1.trace" "$work/$1.trace" 2>&1)
	ok $? "$1: every step 1..$3 trained once by each rank: $res" || diag "$res"
}

# The walltime, not the steps, ends wall's first run: at 4 steps a second
# at most, its 80 s reach 320 steps. term and usr1 are signalled at step
# 30, and the requeued job trains on to 150. (Each step costs the 2 ranks
# about 0.1 s of CPU: no more steps than the checks need.)
wall=$(submit wall 400 --time=2 "--step-delay 0.25")
term=$(submit term 150 --time=10)
usr1=$(submit usr1 150 --time=10 "--min-steps 150") # the stop also stops it
[ -n "$wall" ] && [ -n "$term" ] && [ -n "$usr1" ]
ok $? "three jobs: wall ($wall, sbatch --time=2 --requeue), term ($term), usr1 ($usr1)" ||
	bail_out "sbatch failed"

for sig in term usr1; do
	id=${!sig}
	wait_output "$work/$sig.trace" '"step": 30,' 300
	ok $? "$sig: job $id trains" || diag "$(job_state "$id")" "$(cat "$work/$sig.out")"
	out=$(timed scancel --signal="${sig^^}" "$id" 2>&1)
	ok $? "scancel --signal=${sig^^} $id" || diag "$out"
done
check_stop term "$term" 150
check_stop usr1 "$usr1" 150
check_stop wall "$wall" 400

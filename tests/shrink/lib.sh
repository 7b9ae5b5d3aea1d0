# Shared by the live-shrink tests (doc/shrink.md), after tests/lib.sh and
# tests/spank/lib.sh: a training job of 4 ranks on 2 nodes loses a rank or a
# node, and its output is compared with an uninterrupted run at the world
# size it shrank to (tests/shrink/check.py).

shrink=$top_builddir/contrib/examples/shrink
fmnist=$top_srcdir/contrib/examples/fmnist_shrink.py
py=/usr/bin/python3

# shrink_setup NAME [cluster settings...]: the test cluster and $work.
shrink_setup() {
	local name=$1
	shift
	require_root
	[ -x "$shrink" ] || bail_out "$shrink is not built (make check builds it)"
	[ -x "$py" ] || skip_all "/usr/bin/python3 not found (it checks the runs)"
	cluster_up NODES=2 CPUS=4 GPUS=0 "$@"
	work_dir "shrink-$name"
}

# live_start NAME SRUN_OPTIONS... -- PROGRAM...: srun in the background,
# 4 ranks on 2 nodes, run NAME checkpointing into $work/ckpt; its output
# in $work/NAME.out and .err, its pid in $live_pid.
live_start() {
	local name=$1
	shift
	timeout -k 5 240 srun -N 2 -n 4 --ntasks-per-node=2 --dp-train="$name" \
		--dp-ckpt="file://$work/ckpt" "$@" >"$work/$name.out" 2>"$work/$name.err" &
	live_pid=$!
}

# live_wait: srun's exit status.
live_wait() {
	wait "$live_pid"
}

# kill_task_after RUN STEP PROCID PROGRAM_REGEX: once the run has started
# saving STEP, SIGKILL of task PROCID; then srun's end. Sets $rc (srun's
# status) and $out and $err (the run's output files).
kill_task_after() {
	local victim
	wait_for 120 saved "$1" "$2"
	victim=$(task_pid "$3" "$4")
	[ -n "$victim" ] || bail_out "task $3's process not found"
	kill -9 "$victim"
	live_wait
	rc=$?
	out=$work/$1.out err=$work/$1.err
}

# survivors_finished WORLD STEPS: the first check of a killed task's run.
survivors_finished() {
	is "$rc/$(finals "$out" 2 "$1")" "137/$1" \
		"srun exits with the killed task's status; the $1 survivors finished step $2 in generation 2 of $1 ranks" ||
		diag "$(grep -v '^trained' "$out")" "$(grep -v 'committed\|retention' "$err")"
}

# from_memory: nothing was loaded from storage.
from_memory() {
	is "$(grep -c '^fresh step=0 ' "$out")/$(grep -c '^resumed ' "$out")" "4/0" \
		"nothing was loaded from storage: the survivors went on from memory" ||
		diag "$(grep -v '^trained' "$out")"
}

# saved RUN STEP: the run has a directory of STEP (a save started).
saved() {
	[ -e "$work/ckpt/$1/$(printf 'step-%010d' "$2")" ]
}

# task_pid PROCID PROGRAM_REGEX: the pid of the job's task PROCID.
task_pid() {
	local p
	p=$(cluster_pgrep "$2" "SLURM_PROCID=$1" | head -n 1)
	[ -n "$p" ] && echo "$p"
}

# reference_against RTOL SRUN_OPTIONS... -- PROGRAM...: the uninterrupted
# run (run "reference", its output in $work/reference.out), then the four
# checks of compare between it and the live run's $out.
reference_against() {
	local rtol=$1 opts=()
	shift
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	DPT_TIMEOUT=240 srun_t "${opts[@]}" --dp-train=reference --dp-ckpt="file://$work/ckpt" \
		"$@" >"$work/reference.out" 2>"$work/reference.err" ||
		bail_out "the reference run failed: $(cat "$work/reference.err")"
	compare "$out" "$work/reference.out" "$rtol"
}

# verifies RUN: every committed step of the run verifies.
verifies() {
	local out_v
	out_v=$(dptrain ckpt verify "file://$work/ckpt/$1" 2>&1)
	ok $? "every committed step verifies" || diag "$out_v"
}

# compare LIVE REFERENCE RTOL: the four checks of tests/shrink/check.py.
compare() {
	local check out
	for check in history loss batch final; do
		out=$($py "$top_srcdir/tests/shrink/check.py" "$check" "$1" "$2" --rtol "$3" 2>&1)
		case $check in
		history) ok $? "no step trained twice or skipped: $(head -n 1 <<<"$out")" ;;
		loss) ok $? "every kept step's global loss is the uninterrupted run's (rtol $3)" ;;
		batch) ok $? "after the shrink each step trained its global batch across the new ranks: $(head -n 1 <<<"$out")" ;;
		final) ok $? "the final parameters are the uninterrupted run's: $(head -n 1 <<<"$out")" ;;
		esac || diag "$out"
	done
}

# finals FILE GEN WORLD: how many ranks printed their final line in
# generation GEN of WORLD ranks.
finals() {
	grep -c "^final step=[0-9]* gen=$2 rank=[0-9]* world=$3 " "$1"
}

# final_params FILE: rank 0's final parameters (and digest).
final_params() {
	sed -n 's/^final step=[0-9]* gen=[0-9]* rank=0 world=[0-9]* //p' "$1" | tail -n 1
}

# newest_world RUN: the world size that wrote the run's newest step.
newest_world() {
	dptrain ckpt show "file://$work/ckpt/$1" 2>/dev/null |
		sed -n 's/^world size: *\([0-9]*\) .*/\1/p'
}

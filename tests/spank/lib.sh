# Shared by the walltime tests of tests/spank (walltime.sh,
# walltime-change.sh, requeue-guard.sh), after tests/lib.sh.

# walltime_setup NAME: as root, the training loop of tests/ckpt in $train,
# a 2-node test cluster of 4 CPUs per node, and a work directory $work
# (/tmp/dptrain-NAME.*, readable by the job's tasks, removed at the end).
walltime_setup() {
	require_root
	train=$top_builddir/tests/ckpt/train_loop
	[ -x "$train" ] || bail_out "$train is not built (make check builds it)"
	cluster_up NODES=2 CPUS=4 GPUS=0
	work=$(mktemp -d "/tmp/dptrain-$1.XXXXXX") || bail_out "mktemp failed"
	dpt_scratch+=("$work")
	chmod 755 "$work"
}

# Shared by the tests of tests/spank, after tests/lib.sh.

# work_dir NAME: a work directory $work (/tmp/dptrain-NAME.*, readable by
# the job's tasks, removed at the end).
work_dir() {
	work=$(mktemp -d "/tmp/dptrain-$1.XXXXXX") || bail_out "mktemp failed"
	dpt_scratch+=("$work")
	chmod 755 "$work"
}

# conf_cluster_up TEXT [NAME=VALUE...]: a site configuration $conf
# (dptrain.conf(5)) holding TEXT, and a test cluster (tests/cluster/up
# with those settings) whose plugin reads it. The plugin reads $conf at
# each step: a test may rewrite it between steps.
conf_cluster_up() {
	conf=$(mktemp /tmp/dptrain-conf.XXXXXX) || bail_out "mktemp failed"
	dpt_scratch+=("$conf")
	printf '%s' "$1" >"$conf"
	chmod 644 "$conf"
	shift
	cluster_up "$@" \
		DPTRAIN_SPANK_ARGS="coordinator=$top_builddir/coordinator/dptrain-coordinator config=$conf"
}

# walltime_setup NAME: as root, the training loop of tests/ckpt in $train,
# a 2-node test cluster of 4 CPUs per node, and a work directory $work
# (/tmp/dptrain-NAME.*, readable by the job's tasks, removed at the end).
walltime_setup() {
	require_root
	require_built train tests/ckpt/train_loop
	cluster_up NODES=2 CPUS=4 GPUS=0
	work_dir "$1"
}

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

# job_ended ID FILE: a check that job ID ends within 4 minutes; its
# output FILE in $out.
job_ended() {
	wait_job "$1" 240
	ok $? "job $1 ends within 4 minutes" || diag "$(job_state "$1")" "$(cat "$2")"
	out=$(cat "$2")
}

# shape_job NAME GRACE SHAPES TRAIN_ARGS SBATCH_ARG...: a batch job of
# SBATCH_ARG... (a CPU a GPU, output appended to $work/NAME.out), its id
# in $id, that says "run start restart=R nodes=N gpus=G node=FIRST" at
# each start and runs tests/ckpt/train_loop TRAIN_ARGS (logging every 5
# steps) under srun --dp-train=NAME --dp-grace=GRACE --dp-shapes=SHAPES, a
# task a GPU, as dptrain(8) says.
shape_job() {
	local name=$1 grace=$2 shapes=$3 args=$4
	shift 4
	cat >"$work/$name.sh" <<EOF
#!/bin/bash
echo "run start restart=\${SLURM_RESTART_COUNT:-0} nodes=\$SLURM_NNODES gpus=\$SLURM_GPUS_ON_NODE node=\$SLURMD_NODENAME"
srun --ntasks-per-node=\$SLURM_GPUS_ON_NODE --dp-train=$name --dp-ckpt=file://$work/ckpt \\
	--dp-grace=$grace --dp-shapes=$shapes --dp-verbose $train $args --log 5 --linger-ms 1500
echo "srun exit \$?"
EOF
	id=$(sbatch_t --parsable --cpus-per-gpu=1 --open-mode=append -J "$name" \
		-o "$work/$name.out" "$@" "$work/$name.sh" | cut -d';' -f1)
}

# check_resumed_as ID OUT NODES WORLD STEPS: two checks of job ID (OUT its
# output, of a shape_job on 2 GPUs a node): requeued once,
# it ran again on NODES nodes, whose WORLD ranks resumed the checkpoint
# exactly, and finished at step STEPS.
check_resumed_as() {
	local id=$1 out=$2 nodes=$3 world=$4 steps=$5 ranks="[0-$(($4 - 1))]"
	[[ "$(job_state "$id")" =~ JobState=COMPLETED.*Restarts=1 ]] &&
		grep -q "^run start restart=1 nodes=$nodes gpus=2 " <<<"$out" &&
		[ "$(grep -c "^resumed step=[0-9]* rank=$ranks world=$world restart=1 exact$" <<<"$out")" = "$world" ]
	ok $? "it ran again on $nodes node(s), whose $world ranks resumed the checkpoint exactly" ||
		diag "$(job_state "$id")" "$out"
	[ "$(grep -c "^finished step=$steps rank=$ranks committed$" <<<"$out")" = "$world" ]
	ok $? "and finished at step $steps" || diag "$out"
}

# as_nobody COMMAND...: COMMAND as another user (nobody), from /tmp.
as_nobody() {
	(cd /tmp && timed setpriv --reuid=nobody --regid=nogroup --clear-groups "$@")
}

# other_job WHAT SBATCH_ARG...: another user's (nobody's) job of those
# sbatch arguments, its id in $other, and a check that it runs and holds
# WHAT.
other_job() {
	local what=$1
	shift
	other=$(as_nobody sbatch --parsable -o /dev/null "$@" | cut -d';' -f1)
	wait_for 30 eval '[[ "$(job_state "$other")" =~ JobState=RUNNING ]]'
	ok $? "another user's job $other holds $what" || bail_out "$(job_state "$other")"
}

# grow_on_one_node NAME HOLD STEPS: another user's job holding node n2
# for HOLD seconds, a shape_job NAME of 1 to 2 nodes x 2 GPUs (10-minute
# limit, grace 40 s) of STEPS steps of 100 ms, and a check that it starts
# at once on the free node (the job's end if not).
grow_on_one_node() {
	other_job "node n2 for $2 s" -w n2 -N 1 --gres=gpu:2 --wrap "sleep $2"
	shape_job "$1" 40s 1-2x2 "--steps $3 --step-ms 100 --total 100000" \
		-N 1-2 --gres=gpu:2 --time=10
	wait_output "$work/$1.out" '^run start restart=0 nodes=1 gpus=2 ' 60
	ok $? "a job of 1 to 2 nodes x 2 GPUs (job $id) starts at once on the free node" ||
		bail_out "$(job_state "$id")" "$(cat "$work/$1.out")"
}

# grow_setup NAME GPUS: as walltime_setup, for a job that grows: a
# 2-node test cluster of GPUS fake GPUs a node whose grow check runs every
# 10 s, with no minimum interval and a margin of 1 (dptrain.conf(5)), and
# setpriv, to submit as another user.
grow_setup() {
	require_root
	require_prog setpriv
	require_built train tests/ckpt/train_loop
	conf_cluster_up $'grow_check=10s\nmin_shape_interval=0\ngrow_margin=1\n' \
		NODES=2 CPUS=4 GPUS="$2"
	work_dir "$1"
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

#!/bin/bash
# A task of the step lost before the start (doc/python.md, "A task lost
# before the start"): task 1 of 2 exits with status 3 before it joins,
# either before rank 0 asks for the rendezvous or while rank 0 waits for
# the first generation. Rank 0 runs contrib/examples/fmnist_lightning.py
# (Trainer(strategy="ddp") with DptrainEnvironment), or
# contrib/examples/fmnist_dptrain.py (plain PyTorch DDP through
# dptrain.torch.init_process_group), on torch 2 and Lightning 2.6 (the
# venv of contrib/setup/install-deps.sh). Each joins the coordinator
# before torch's rendezvous, sees 1 of 2 tasks, and raises: the step ends
# with both errors, well before the coordinator's join timeout (5
# minutes) that it used to wait for, with no step committed and no
# requeue.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_fmnist_training lightning
script=$top_srcdir/contrib/examples/fmnist_lightning.py

cluster_up NODES=2 CPUS=4 GPUS=0
dpt_scratch_dir dir lost_task
plan 15

# lose WHEN [SCRIPT]: task 1 exits 3 after WHEN seconds, task 0 trains
# to step 40 with SCRIPT (default: the Lightning one, on 960 images); the
# output in $out, srun's status in $rc.
lose() {
	cat >"$dir/task.sh" <<EOS
#!/bin/bash
if [ "\$SLURM_PROCID" = 1 ]; then
	sleep $1
	echo "task 1 fails before it joins"
	exit 3
fi
exec "$py" ${2:-"$script" --train-size 960} --steps 40
EOS
	chmod 755 "$dir/task.sh"
	# Well below the coordinator's join timeout of 300 s: a step that
	# waits for it fails here, on srun's timeout.
	out=$(DPT_TIMEOUT=150 srun_t -N 2 -n 2 --dp-train="lost$1${2:+plain}" \
		--dp-ckpt="file://$dir/ckpt" "$dir/task.sh" 2>&1)
	rc=$?
}

check() { # WHEN DESCRIPTION
	[ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ]
	ok $? "$2: the step fails, before srun's timeout of 150 s (status $rc)" || diag "$out"
	grep -q "task 1 exited (exit code 3) before it joined" <<<"$out"
	ok $? "$2: the coordinator names task 1 and its exit code" || diag "$out"
	grep -q "RuntimeError: dptrain: 1 of the step's 2 tasks joined: the others exited before they joined" <<<"$out"
	ok $? "$2: rank 0 raises before torch's rendezvous, saying why" || diag "$out"
	! grep -q "workers joined within\|requeueing job\|Initializing distributed" <<<"$out"
	ok $? "$2: no join timeout, no requeue, no torch rendezvous begun" || diag "$out"
	[ -z "$(find "$dir/ckpt" -name manifest.json 2>/dev/null)" ]
	ok $? "$2: no step committed" || diag "$(find "$dir/ckpt")"
}

lose 0
check 0 "task 1 lost before rank 0 joins"
# Rank 0 imports Lightning and loads Fashion-MNIST first (about 5 s here):
# it waits in the join when task 1 exits.
lose 20
check 20 "task 1 lost while rank 0 waits for the first generation"
lose 0 "$top_srcdir/contrib/examples/fmnist_dptrain.py"
check 0 "plain PyTorch, dptrain.torch.init_process_group"

#!/bin/bash
# PyTorch on a real GPU through dptrain (tests/gpu/torch_cuda.py has the
# cases): CUDA tensors through the binding, a model and Adam's state on the
# GPU saved and loaded through the binding and through
# dptrain.torch.Checkpoint, torch DDP with nccl under the environment
# `srun --dp-train` sets, and tests/python/lightning_fit.py's tiny
# Lightning Trainer with dptrain.lightning.DptrainCallback on the GPU
# where Lightning imports. One task (world size 1) with a coordinator started by
# hand, as tests/coord does; the Python is $DPT_GPU_PYTHON (default: the
# python3 on PATH: on the GPU machine, the one with torch and its CUDA
# wheels).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

coordinator=$top_builddir/coordinator/dptrain-coordinator
lib=${DPTRAIN_LIBRARY:-$top_builddir/lib/libdptrain.so.0}
script=$top_srcdir/tests/gpu/torch_cuda.py
py=${DPT_GPU_PYTHON:-python3}
[ -x "$coordinator" ] || bail_out "$coordinator is not built"
[ -f "$lib" ] || bail_out "$lib not found (set DPTRAIN_LIBRARY)"
require_prog timeout od

cases="binding checkpoint torch streams ddp lightning"
descs=(
	"CUDA tensors of every dtype through the binding (NCCL backend)"
	"model and Adam state on the GPU saved and loaded byte-exact (binding)"
	"model and Adam on the GPU through dptrain.torch.Checkpoint, loaded into fresh ones"
	"collectives, saves and loads wait for the training's stream (default and side)"
	"torch DDP with nccl under the --dp-train environment, beside dptrain"
	"Lightning Trainer on the GPU with dptrain.lightning.DptrainCallback"
)
plan 6

why=
if ! command -v "$py" >/dev/null 2>&1; then
	why="'$py' not found"
elif ! out=$("$py" -c 'import torch; print(torch.__version__)' 2>&1); then
	why="$py cannot import torch: $(tail -n 1 <<<"$out")"
elif ! out=$("$py" -c 'import torch, sys; print(torch.cuda.is_available() or "no CUDA device (%s)" % torch.__version__)' 2>&1) ||
	[ "$out" != True ]; then
	why="torch sees no GPU: $(tail -n 1 <<<"$out")"
fi
if [ -n "$why" ]; then
	for d in "${descs[@]}"; do skip "$d" "$why"; done
	exit 0
fi
diag "$("$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' 2>&1)"

dpt_scratch_dir dir torch
coord_pid=
trap '[ -z "$coord_pid" ] || kill -KILL $coord_pid 2>/dev/null; dpt_teardown' EXIT

i=0
for c in $cases; do
	desc=${descs[$i]}
	i=$((i + 1))
	secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
	(umask 077 && echo "$secret" >"$dir/secret")
	rm -f "$dir/endpoint"
	"$coordinator" --world-size 1 --bind 'tcp://127.0.0.1:*' --advertise 127.0.0.1 \
		--secret-file "$dir/secret" --endpoint-file "$dir/endpoint" \
		--timeout-ms 5000 --join-timeout-ms 60000 --parent-pid $$ \
		--log-level warn >"$dir/coord.$c.log" 2>&1 &
	coord_pid=$!
	for _ in $(seq 100); do
		[ -s "$dir/endpoint" ] && break
		sleep 0.1
	done
	ep=$(cat "$dir/endpoint" 2>/dev/null) || bail_out "the coordinator did not start: $(cat "$dir/coord.$c.log")"
	port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	# What the plugin exports to a task of a one-task step.
	rc=0
	out=$(env DPTRAIN_COORDINATOR="$ep" DPTRAIN_SECRET="$secret" DPTRAIN_BACKEND=nccl \
		DPTRAIN_RUN="gpu-$c" DPTRAIN_CKPT_URI="file://$dir/ckpt" DPTRAIN_KEEP=3 \
		DPTRAIN_RESTART_COUNT=0 DPTRAIN_LIBRARY="$lib" \
		PYTHONPATH="$top_srcdir/worker/python${PYTHONPATH:+:$PYTHONPATH}" \
		RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 NODE_RANK=0 NUM_NODES=1 \
		MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
		SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODEID=0 SLURM_NTASKS=1 \
		timeout -k 5 "${DPT_TIMEOUT:-150}" "$py" "$script" "$c" 2>&1) || rc=$?
	case $rc in
	0) ok 0 "$desc"; diag "$(tail -n 1 <<<"$out")" ;;
	77) skip "$desc" "$(tail -n 1 <<<"$out")" ;;
	*) ok 1 "$desc"; diag "exit status $rc" "$(tail -n 40 <<<"$out")" "$(tail -n 20 "$dir/coord.$c.log")" ;;
	esac
	kill "$coord_pid" 2>/dev/null || true
	wait "$coord_pid" 2>/dev/null || true
	coord_pid=
done

#!/bin/bash
# An unchanged PyTorch DDP script (gloo, init_method="env://") runs under
# srun -N 2 -n 4 --dp-train with Debian's python3-torch.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
# Debian's torch, not the python3 first on PATH.
py=/usr/bin/python3
require_python_module $py torch
cluster_up NODES=2 CPUS=4 GPUS=0
plan 3

out=$(DPT_TIMEOUT=120 srun_t -N 2 -n 4 --ntasks-per-node=2 --dp-train=ddp $py "$top_srcdir/tests/spank/ddp.py" 2>&1)
ok $? "srun -N 2 -n 4 --dp-train python3 ddp.py exits 0" || diag "$out"
# all_reduce of rank+1 over 4 ranks: 1+2+3+4.
is "$(grep -o 'rank=[0-9]* world=4 .* sum=10 grad_ok=True' <<<"$out" | cut -d' ' -f1 | sort | tr '\n' ' ')" \
	"rank=0 rank=1 rank=2 rank=3 " "every rank joined a world of 4 and all_reduce gave 10" || diag "$out"
is "$(grep -c 'local=[01] ' <<<"$out")" "4" "two local ranks on each of the two nodes" || diag "$out"

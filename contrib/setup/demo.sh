#!/bin/bash
# The README's first command: install what is needed, build, bring up a
# throw-away local Slurm cluster (4 nodes, 4 fake GPUs each) with the
# plugin built here, run the demo job on it, and tear the cluster down.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
export DPTRAIN_CLUSTER_DIR=${DPTRAIN_CLUSTER_DIR:-/tmp/dptrain-demo}

bash "$top/contrib/setup/install-deps.sh"
bash "$top/contrib/setup/build.sh"

"$top/tests/cluster/down" >/dev/null 2>&1 || true
trap '"$top/tests/cluster/down"' EXIT
"$top/tests/cluster/up"
# shellcheck disable=SC1091
. "$DPTRAIN_CLUSTER_DIR/env.sh"

echo
echo "== srun -N 2 -n 4 --dp-train=demo: one line per task (node, rank, local rank, rendezvous)"
timeout 120 srun -N 2 -n 4 --dp-train=demo \
	sh -c 'echo "$SLURMD_NODENAME rank=$RANK local_rank=$LOCAL_RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT"' |
	sort -t= -k2 -n
echo
echo "== srun -N 2 -n 4 --dp-train=demo python3 contrib/examples/train_ddp.py (PyTorch DDP, unchanged)"
timeout 300 srun -N 2 -n 4 --dp-train=demo /usr/bin/python3 "$top/contrib/examples/train_ddp.py" 100
echo "== demo finished"

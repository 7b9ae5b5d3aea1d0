#!/bin/bash
# The README's first command: install what is needed, build, bring up a
# throw-away local Slurm cluster (2 nodes of 4 CPUs) with the plugin built
# here, run the demo on it (contrib/demo/elastic.sh: a PyTorch job trained
# past its walltime on 4, 2 and 4 ranks, checked and plotted), and tear
# the cluster down.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
export DPTRAIN_CLUSTER_DIR=${DPTRAIN_CLUSTER_DIR:-/tmp/dptrain-demo}

bash "$top/contrib/setup/install-deps.sh"
bash "$top/contrib/setup/build.sh"

"$top/tests/cluster/down" >/dev/null 2>&1 || true
trap '"$top/tests/cluster/down"' EXIT
NODES=2 CPUS=4 GPUS=0 "$top/tests/cluster/up"
# shellcheck disable=SC1091
. "$DPTRAIN_CLUSTER_DIR/env.sh"

echo
echo "== srun -N 2 -n 4 --dp-train=demo: one line per task (node, rank, local rank, rendezvous)"
timeout 120 srun -N 2 -n 4 --dp-train=demo \
	sh -c 'echo "$SLURMD_NODENAME rank=$RANK local_rank=$LOCAL_RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT"' |
	sort -t= -k2 -n
echo
echo "== The demo: Fashion-MNIST with PyTorch DDP past its walltime, on 4, 2, then 4 ranks (contrib/demo/elastic.sh)"
bash "$top/contrib/demo/elastic.sh" # its files, the plot among them, stay in the /tmp/dptrain-demo.* it names

#!/bin/bash
# Time from a walltime stop to the resumed run's first trained step, split
# into dptrain's, Slurm's and the program's parts (doc/PERFORMANCE.md,
# "Restart"): runs the demo (contrib/demo/elastic.sh: Fashion-MNIST with
# PyTorch DDP, two requeues, 4, 2 and 4 ranks) on a throw-away 2-node
# cluster of this build tree, then bench/restart_split.py on its files.
#
#   bench/restart.sh [--runs N]     (as root; N demos, default 1)
#
# The last line: "restart dptrain_s=D slurm_s=S program_s=P total_s=T
# dptrain_share=X", medians over the requeues of the last demo.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
runs=1
[ "${1:-}" = --runs ] && runs=$2
export DPTRAIN_CLUSTER_DIR=$(mktemp -d /tmp/dptrain-bench-restart.XXXXXX)
trap '"$top/tests/cluster/down" >/dev/null 2>&1; rm -rf "$DPTRAIN_CLUSTER_DIR"' EXIT
NODES=2 CPUS=4 GPUS=0 INSTALL=0 "$top/tests/cluster/up" >/dev/null
# shellcheck disable=SC1091
. "$DPTRAIN_CLUSTER_DIR/env.sh"
for ((i = 1; i <= runs; i++)); do
	dir=$DPTRAIN_CLUSTER_DIR/demo-$i
	rm -rf "$dir" # the demo makes it anew
	bash "$top/contrib/demo/elastic.sh" --dir "$dir" --last-steps 60 | tail -n 1
	/usr/bin/python3 "$top/bench/restart_split.py" "$dir"
done

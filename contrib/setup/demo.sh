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
echo
echo "== sbatch --time=1: a job that needs longer than its one-minute limit (contrib/examples/train_walltime.py)"
echo "   checkpointed every 5 s (--dp-ckpt-every=5s), stopped 45 s before the end (--dp-grace=45s),"
echo "   requeued, resumed, until it finishes"
out=$DPTRAIN_CLUSTER_DIR/walltime.out
# The binding and the library from this build tree (make install puts them
# where Python and the loader look by themselves).
export PYTHONPATH=$top/worker/python DPTRAIN_LIBRARY=$top/worker/.libs/libdptrain.so
rm -rf "$DPTRAIN_CLUSTER_DIR/ckpt" "$out"
job=$(sbatch --parsable -N 2 -n 4 --time=1 --requeue --open-mode=append -o "$out" -J walltime --wrap \
	"srun --dp-train=fit --dp-ckpt=file://$DPTRAIN_CLUSTER_DIR/ckpt --dp-grace=45s --dp-ckpt-every=5s /usr/bin/python3 $top/contrib/examples/train_walltime.py 200")
for _ in $(seq 1 300); do
	case $(scontrol show job "$job" | grep -o 'JobState=[A-Z]*') in
	JobState=COMPLETED | JobState=FAILED | JobState=CANCELLED | JobState=TIMEOUT | JobState=NODE_FAIL) break ;;
	esac
	sleep 1
done
grep -v '^slurmstepd' "$out"
scontrol show job "$job" | grep -o 'JobState=[A-Z]* \|Restarts=[0-9]*' | tr -d '\n'
echo
scontrol show job "$job" | grep -q 'JobState=COMPLETED' || { echo "demo: the walltime job did not complete" >&2; exit 1; }
echo "== demo finished"

#!/bin/bash
# --dp-train across a real network boundary: every node in its own network
# namespace with its own address (tests/cluster/up MODE=netns), srun in the
# host's. The coordinator must be reachable from every node, MASTER_ADDR
# must be rank 0's node as the others reach it, and the CPU backend's ring
# and PyTorch's gloo must run between the namespaces.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
require_prog ip nsenter unshare
unshare --net --uts true 2>/dev/null || skip_all "cannot create network namespaces here (unshare --net --uts fails)"
require_built worker tests/coord/coord_worker
cluster_up MODE=netns NODES=2 CPUS=4 GPUS=0
plan 5

node_addr() { scontrol_t show node "$1" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2; }
n1=$(node_addr n1)

# 1-2. Ranks and the rank-0 address as the tasks see them.
out=$(srun_t -N 2 -n 4 --ntasks-per-node=2 --dp-train \
	sh -c 'echo "$RANK $SLURMD_NODENAME $MASTER_ADDR:$MASTER_PORT"' 2>&1)
ok $? "srun -N 2 -n 4 --dp-train across namespaces runs" || diag "$out"
masters=$(awk '{ print $3 }' <<<"$out" | sort -u)
is "$masters" "$(awk '$1 == 0 { print $3 }' <<<"$out" | grep "^$n1:[0-9][0-9]*$")" \
	"one MASTER_ADDR:MASTER_PORT everywhere, and it is n1's address $n1" || diag "$out"

# 3-4. libdptrain workers rendezvous through srun's coordinator and run
# every collective over the ring between the namespaces.
out=$(srun_t -N 2 -n 4 --ntasks-per-node=2 --dp-train "$worker" run 2>&1)
ok $? "srun -N 2 -n 4 --dp-train coord_worker run across namespaces exits 0" || diag "$out"
is "$(grep -o '^ok rank=[0-9]*' <<<"$out" | sort | tr '\n' ' ')" \
	"ok rank=0 ok rank=1 ok rank=2 ok rank=3 " \
	"ranks 0..3 each checked every collective" || diag "$out"

# 5. PyTorch DDP (gloo, env://) between the namespaces. The node names of
# the test bed are not in /etc/hosts, so gloo cannot find its own address
# from the host name and is told the interface, as on a cluster where the
# host name resolves to another network than the one to use.
py=/usr/bin/python3
if python_has $py torch; then
	out=$(GLOO_SOCKET_IFNAME=eth0 DPT_TIMEOUT=120 srun_t -N 2 -n 4 --ntasks-per-node=2 --dp-train=ddp \
		$py "$top_srcdir/tests/spank/ddp.py" 2>&1)
	is "$(grep -c 'world=4 .* sum=10 grad_ok=True' <<<"$out")" 4 \
		"PyTorch DDP with gloo across namespaces: every rank got 10" || diag "$out"
else
	skip 1 "$python_missing"
fi

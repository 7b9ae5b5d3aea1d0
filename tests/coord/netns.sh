#!/bin/bash
# Rendezvous and collectives across the network-namespace test bed: a
# coordinator on this machine's side of the cluster's bridge, 4 workers
# started by srun on 2 nodes (each a network and UTS namespace with its own
# address). Ranks follow SLURM_NODEID then SLURM_LOCALID, each worker's data
# plane uses its node's own address, and every collective is exact across
# the nodes (TCP) and within them (shared memory).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
require_prog ip nsenter unshare
unshare --net --uts true 2>/dev/null || skip_all "cannot create network namespaces here (unshare --net --uts fails)"
. "$top_srcdir/tests/coord/lib.sh"
cluster_up MODE=netns NODES=2 GPUS=0 DPTRAIN_SPANK_PLUGIN=none
plan 5

host=$(ip -4 -o addr show dev "$DPTRAIN_CLUSTER_BRIDGE" | awk '{ split($4, a, "/"); print a[1]; exit }')
[ -n "$host" ] || bail_out "bridge $DPTRAIN_CLUSTER_BRIDGE has no IPv4 address"
coord_start 4 --bind "tcp://$host:*"
# shellcheck disable=SC2016 # expanded by the task's shell
out=$(DPTRAIN_BACKEND=cpu srun_t -N 2 -n 4 --ntasks-per-node 2 \
	sh -c 'echo "node=$SLURM_NODEID local=$SLURM_LOCALID host=$(hostname) $("$0" run | tr "\n" " ")"' \
	"$coord_worker" 2>&1)
rc=$?
is "$rc" 0 "srun -N 2 -n 4: every worker joined, ran every collective exactly, and left" || diag "$out"
got=$(grep -o 'node=[0-9]* local=[0-9]* host=[^ ]* joined rank=[0-9]* world=[0-9]*' <<<"$out" |
	awk '{ print $1, $2, $3, $5, $6 }' | sort -t= -k5n)
want=$(printf 'node=0 local=0 host=n1 rank=0 world=4\nnode=0 local=1 host=n1 rank=1 world=4\nnode=1 local=0 host=n2 rank=2 world=4\nnode=1 local=1 host=n2 rank=3 world=4')
is "$got" "$want" "ranks follow the node index, then the local rank" || diag "$out"
is "$(grep -c '^.*ok rank=' <<<"$out")" 4 "the 4 workers report their checks passed"
coord_exits 0 "the coordinator exits 0 when they leave"
# The coordinator saw each node's own name and address (the data plane
# address, not this machine's): two nodes, two addresses on the bridge's
# subnet.
seen=$(grep 'joins generation 1' "$coord_log" | grep -o ' n[12] [0-9.]* pid' | awk '{ print $1, $2 }' | sort -u)
subnet=${host%.*}
is "$(awk -v s="$subnet." 'index($2, s) == 1 { print $1 }' <<<"$seen" | sort -u | tr '\n' ' ')/$(awk '{ print $2 }' <<<"$seen" | sort -u | wc -l)" \
	"n1 n2 /2" "the coordinator logs each worker with its node's name and own address" || diag "$(cat "$coord_log")"

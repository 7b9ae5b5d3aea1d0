#!/bin/bash
# MODE=netns: every node is a slurmd in a network and UTS namespace of its
# own, so nodes have their own hostnames and addresses as on a real cluster,
# on a bridge of their own that down removes again.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
require_prog ip nsenter unshare
unshare --net --uts true 2>/dev/null || skip_all "cannot create network namespaces here (unshare --net --uts fails)"
ipcmd=$(command -v ip)
# The plugin is basic.sh's subject; here it would only mask a netns fault.
cluster_up MODE=netns NODES=4 GPUS=0 DPTRAIN_SPANK_PLUGIN=none
dir=$DPTRAIN_CLUSTER_DIR
prefix=$DPTRAIN_CLUSTER_NETNS_PREFIX
bridge=$DPTRAIN_CLUSTER_BRIDGE
plan 6

# 1. hostname is the node's own name, not this machine's.
# -Q: a job that waits for the previous one's nodes to be released says
# so on stderr ("queued and waiting for resources"), which is not output.
is "$(srun_t -Q -N 4 -n 4 hostname 2>&1 | sort | tr '\n' ' ')" "n1 n2 n3 n4 " \
	"srun -N 4 -n 4 hostname prints n1..n4"

# 2-3. Each task sees one address on its eth0, a different one on every
# node, and it is the NodeAddr that slurmctld has for that node.
seen=$(srun_t -Q -N 4 -n 4 sh -c "echo \$SLURMD_NODENAME \$('$ipcmd' -4 -o addr show dev eth0 | awk '{ print \$4 }')" 2>&1 | sort)
is "$(awk '{ print $2 }' <<<"$seen" | sort -u | wc -l)" 4 "the four nodes have four distinct addresses" ||
	diag "$seen"
want=
for i in 1 2 3 4; do
	addr=$(scontrol_t show node "n$i" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
	want="${want}n$i $addr/24"$'\n'
done
is "$seen" "${want%$'\n'}" "each node's address is its NodeAddr in slurmctld"

# 4. The bridge holds the four veths of this cluster and nothing else: no
# uplink, so node traffic goes nowhere but to the namespaces.
members=$("$ipcmd" -o link show master "$bridge" 2>&1 | awk -F': ' '{ sub(/@.*/, "", $2); print $2 }' | sort | tr '\n' ' ')
is "$members" "${prefix}v1 ${prefix}v2 ${prefix}v3 ${prefix}v4 " "bridge $bridge holds only the cluster's veths"

# 5-6. down removes the namespaces and the bridge, and stops everything.
cluster_down
left=$("$ipcmd" netns list | grep "^${prefix}n" | tr '\n' ' ')
"$ipcmd" link show "$bridge" >/dev/null 2>&1 && left="$left $bridge"
is "$left" "" "down removes the namespaces and the bridge"
left="$(pgrep -af -- "$dir/" | tr '\n' ' ')$(grep -lzxF "DPTRAIN_CLUSTER_DAEMON=$dir" /proc/[0-9]*/environ 2>/dev/null | tr '\n' ' ')"
is "$left" "" "no process of the cluster is left"

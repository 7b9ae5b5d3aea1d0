#!/bin/bash
# What a connection flood costs in CPU (doc/PERFORMANCE.md, "Under a
# connection flood"): a coordinator with no job, bench/flooder holding
# CONNS connections with CHURN handshaking clients, and the CPU of both
# (utime + stime of every thread, /proc/PID/stat) over 10 s, after 3 s
# for the flood to build up. From a build tree:
#
#   bench/flood_cpu.sh [CHURN [CONNS]]      (default 20 and 3000)
#
# Prints "flood_cpu churn=C conns=N coordinator_ms_per_s=X
# flooder_ms_per_s=Y".
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
churn=${1:-20} conns=${2:-3000}
dir=$(mktemp -d /tmp/dptrain-flood-cpu.XXXXXX)
coord= flood=
trap 'kill $coord $flood 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$dir/secret"
"$top/coordinator/dptrain-coordinator" --world-size 2 --bind 'tcp://127.0.0.1:*' \
	--secret-file "$dir/secret" --endpoint-file "$dir/endpoint" --log-level warn \
	>/dev/null 2>"$dir/coordinator.log" &
coord=$!
for _ in $(seq 100); do [ -s "$dir/endpoint" ] && break; sleep 0.1; done
[ -s "$dir/endpoint" ] || { cat "$dir/coordinator.log" >&2; exit 1; }
port=$(sed 's/.*://' "$dir/endpoint")
"$top/bench/flooder" 127.0.0.1 "$port" "$conns" 14 "$churn" >"$dir/flooder.out" &
flood=$!
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
sleep 3
c0=$(cpu $coord) f0=$(cpu $flood)
sleep 10
c1=$(cpu $coord) f1=$(cpu $flood)
tck=$(getconf CLK_TCK)
echo "flood_cpu churn=$churn conns=$conns coordinator_ms_per_s=$(((c1 - c0) * 100 / tck)) flooder_ms_per_s=$(((f1 - f0) * 100 / tck))"

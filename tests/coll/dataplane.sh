#!/bin/bash
# The CPU data plane of real workers (tests/coord/coord_worker through
# libdptrain) and a real coordinator, seen from a neighbour on the node:
# the listener a worker opens before it joins is bound to its data
# address (DPTRAIN_DATA_HOST, 127.0.0.1 here), not to every interface;
# junk sent to it and a connection that never speaks are refused and
# logged, and the pair of workers forms its first generation all the same (shared memory, the node's segment under a random
# name) and checks every collective.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/coord/lib.sh"

plan 6

# listeners PID: "ADDRESS:PORT" (hex, as /proc/net/tcp writes them) of
# each listening TCP socket of process PID.
listeners() {
	local pid=$1 inodes f
	inodes=$(for f in /proc/"$pid"/fd/*; do readlink "$f"; done 2>/dev/null |
		sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p')
	[ -n "$inodes" ] || return 0
	# Columns: sl local_address rem_address st ... inode (10th).
	cat /proc/"$pid"/net/tcp /proc/"$pid"/net/tcp6 2>/dev/null |
		awk -v want="$(echo $inodes)" '
			BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) ok[w[i]] = 1 }
			$4 == "0A" && ($10 in ok) { print $2 }'
}

coord_start 2 --log-level info
# The first worker waits for its peer with its listener open.
worker_start w0 0 0 0 run
listening() { [ -n "$(listeners "${worker_pid[w0]}")" ]; }
wait_for 20 listening
addrs=$(listeners "${worker_pid[w0]}")
[ "$(wc -l <<<"$addrs")" = 1 ] && [ "${addrs%:*}" = 0100007F ]
ok $? "the worker listens on its data address 127.0.0.1 only" ||
	diag "listening: ${addrs:-nothing}"

port=$((16#${addrs#*:}))
# A neighbour's junk, and a connection that never speaks, both open
# while the generation forms.
exec 7<>/dev/tcp/127.0.0.1/"$port" && printf 'GET / HTTP/1.0%54s' '' >&7
exec 8<>/dev/tcp/127.0.0.1/"$port"
worker_start w1 0 1 1 run
rc=0
worker_wait w0 60 || rc=$?
ok "$rc" "worker 0 checks every collective" || diag "$(worker_out w0)" "$(cat "$coord_dir/w0.log")"
rc=0
worker_wait w1 60 || rc=$?
ok "$rc" "worker 1 checks every collective" || diag "$(worker_out w1)" "$(cat "$coord_dir/w1.log")"
exec 7>&- 8>&-
grep -q "refused a data-plane connection from 127.0.0.1 port [0-9]*: not a dptrain hello" "$coord_dir/w0.log"
ok $? "the junk is refused and logged" || diag "$(cat "$coord_dir/w0.log")"
n=$(grep -c "refused a data-plane connection" "$coord_dir/w0.log")
[ "$n" = 2 ]
ok $? "each of the neighbour's 2 connections is logged once ($n lines)" || diag "$(cat "$coord_dir/w0.log")"
! grep -q "generation 1 ended" "$coord_log"
ok $? "the first generation forms: the silent connection delays nobody" || diag "$(cat "$coord_log")"

#!/bin/bash
# Security on loopback: a worker with another step's secret is refused and
# the refusal logged; raw garbage, truncated and lying ZMTP greetings,
# oversized frames, a wrong protocol version and hostile protocol messages
# from a client holding the secret leave the coordinator running, and a
# normal rendezvous (with every collective) still succeeds while and after
# they arrive.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/coord/lib.sh"

plan 16

coord_start 2 --log-level info
good_secret=$DPTRAIN_SECRET

# 1. Wrong secret: the worker fails fast with DPT_EAUTH, nothing joins.
t0=$(now_ns)
DPTRAIN_SECRET=$(new_secret) DPTRAIN_CONNECT_TIMEOUT_MS=10000 worker_start intruder 0 0 0 run
rc=0
worker_wait intruder 30 || rc=$?
t1=$(now_ns)
out=$(worker_out intruder)
[ "$rc" != 0 ] && grep -q "FAIL init: DPT_EAUTH" <<<"$out"
ok $? "a worker with another step's secret fails with DPT_EAUTH" || diag "exit $rc: $out" "$(cat "$coord_dir/intruder.log")"
ms=$(((t1 - t0) / 1000000))
[ "$ms" -lt 10000 ]
ok $? "it learns it before its connect timeout (${ms} ms < 10000 ms)"
grep -q "secret is not the secret of its job step\|DPTRAIN_SECRET is not the secret" "$coord_dir/intruder.log"
ok $? "the worker's log names the secret as the cause" || diag "$(cat "$coord_dir/intruder.log")"
wait_for 5 grep -q "wrong secret" "$coord_log"
ok $? "the coordinator logs the refused connection" || diag "$(cat "$coord_log")"
! grep -q "joins generation" "$coord_log"
ok $? "the intruder never joined"

# 2. One real worker waits in the gathering while the hostile clients
# run; then its peer arrives and the pair must work.
worker_start w0 0 0 0 run
"$coord_worker" garbage 127.0.0.1 "$coord_port" >"$coord_dir/garbage.out" 2>&1
ok $? "raw garbage, lying greetings and a NULL-mechanism client: each of 24 connections accepted" ||
	diag "$(cat "$coord_dir/garbage.out")"
wait_for 5 grep -q "connection(s) failed the handshake" "$coord_log"
ok $? "the coordinator counted the garbage as failed handshakes" || diag "$(cat "$coord_log")"
[ "$(grep -c "joins generation" "$coord_log")" = 1 ] &&
	! grep -q "dropped a [0-9]*-byte message from an unknown peer" "$coord_log"
ok $? "and none of it reached the protocol: w0's join only, no message" || diag "$(cat "$coord_log")"
"$coord_worker" hostile "$DPTRAIN_COORDINATOR" >"$coord_dir/hostile.out" 2>&1
ok $? "hostile client: version 9 JOIN refused with DPT_EVERSION, task exit acknowledged" ||
	diag "$(cat "$coord_dir/hostile.out")"
kill -0 "$coord_pid" 2>/dev/null
ok $? "the coordinator is still running"
grep -q "refused a join: protocol version 9 is not supported" "$coord_log"
ok $? "the coordinator logs the version mismatch"
grep -q "dropped a [0-9]*-byte message from an unknown peer" "$coord_log"
ok $? "the coordinator logs dropped malformed messages" || diag "$(cat "$coord_log")"
n=$(grep -c "dropped a" "$coord_log")
[ "$n" -le 6 ]
ok $? "malformed-message warnings are rate-limited ($n lines for hundreds of messages)"

worker_start w1 0 1 1 run
r0=0 r1=0
worker_wait w0 60 || r0=$?
worker_wait w1 60 || r1=$?
is "$r0 $r1" "0 0" "after all that, a rendezvous of two workers runs every collective exactly" ||
	diag "$(worker_out w0)" "$(worker_out w1)" "$(cat "$coord_dir/w0.log" "$coord_dir/w1.log")"
coord_exits 0 "and the coordinator exits 0 when they leave"

# 3. The secret never shows up in the coordinator's log or command line.
! grep -qi "$good_secret" "$coord_dir"/coordinator*.log "$coord_dir"/*.out
ok $? "the secret appears in no log"

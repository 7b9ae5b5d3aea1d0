#!/bin/bash
# The coordinator that srun's plugin forks for a --dp-train step: it holds
# none of srun's descriptors (srun's listening sockets stay srun's), and when
# srun is killed with SIGKILL its run directory and endpoint file go with it.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
cluster_up NODES=1 CPUS=2
plan 5

# A TMPDIR of this test's own tells its coordinators and run directories
# from those of tests running at the same time.
TMPDIR=$(mktemp -d /tmp/dptrain-coord-tmp.XXXXXX) || bail_out "mktemp failed"
export TMPDIR
coordinator() { pgrep -f -- "dptrain-coordinator .*--endpoint-file $TMPDIR/" | head -1; }
sockets() { # PID: the socket inodes among its descriptors
	ls -l /proc/"$1"/fd 2>/dev/null | grep -o 'socket:\[[0-9]*\]' | sort -u
}

srun_t -N 1 -n 1 --dp-train=fdtest sleep 30 >/dev/null 2>&1 &
started() { [ -n "$(coordinator)" ] && ls "$TMPDIR"/dptrain.*/endpoint >/dev/null 2>&1; }
wait_for 30 started
coord=$(coordinator)
srun_pid=$(ps -o ppid= -p "${coord:-0}" 2>/dev/null | tr -d ' ')
[ -n "$coord" ] && [ "$(cat /proc/"$srun_pid"/comm 2>/dev/null)" = srun ]
ok $? "the step has a coordinator ($coord) whose parent is srun (${srun_pid:-none})" ||
	bail_out "no coordinator found under $TMPDIR"

# srun listens (for its tasks' I/O and for slurmstepd's messages) on
# sockets of its own; the coordinator has only its zmq sockets.
shared=$(comm -12 <(sockets "$srun_pid") <(sockets "$coord"))
is "$shared" "" "the coordinator holds none of srun's sockets" ||
	diag "coordinator fds:" "$(ls -l /proc/"$coord"/fd)"
# Past stdin, stdout and stderr, every descriptor is one the coordinator
# opened itself: none of them has a number it got across exec, all of them
# are sockets, eventfds, a signalfd, a pidfd or its log, never srun's files.
leaked=$(ls -l /proc/"$coord"/fd | awk 'NR > 1 && $9 > 2 {print $9 " " $11}' |
	grep -v -E ' (socket:|anon_inode:)' || true)
is "$leaked" "" "the coordinator has no other inherited descriptor"

run=$(ls -d "$TMPDIR"/dptrain.* 2>/dev/null)
kill -9 "$srun_pid"
cleaned() { [ -z "$(ls -A "$TMPDIR")" ] && ! kill -0 "$coord" 2>/dev/null; }
wait_for 20 cleaned
is "$(ls -A "$TMPDIR")" "" "kill -9 of srun: its run directory ($run) is gone"
kill -0 "$coord" 2>/dev/null
ok $((!$?)) "kill -9 of srun: the coordinator has exited"
scancel --name=fdtest 2>/dev/null
wait 2>/dev/null
rm -rf "$TMPDIR"

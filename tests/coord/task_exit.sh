#!/bin/bash
# The SPANK plugin's task-exit report (dpt__coord_report_exit, the TASK_EXIT
# message) evicts the task's member at once, far below the heartbeat
# timeout: a stopped (SIGSTOP) worker that still holds its connection is
# reported exited, the survivors are told within a second although the
# timeout is 10 s, and they form generation 2 without it. A report of a
# task the step does not have changes nothing; a task reported while it
# is expected back in the next generation is dropped from it.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/coord/lib.sh"

plan 9

# 1. Three workers, barrier loop (only the coordinator can tell them),
# timeout 10 s. Task 2 freezes; the plugin reports it killed by SIGKILL.
coord_start 3 --heartbeat-ms 500 --timeout-ms 10000 --min-workers 2
for i in 0 1 2; do worker_start "w$i" 0 "$i" "$i" loop --rejoin --barriers; done
wait_for 30 all_joined w 3 || bail_out "3 workers did not join"
kill -STOP "${worker_pid[w2]}"
sleep 0.2
t0=$(now_ns)
out=$("$coord_worker" report-exit "$DPTRAIN_COORDINATOR" 2 9 2>&1)
ok $? "the task exit is reported and acknowledged" || diag "$out"
worst=0 errs=""
for i in 0 1; do
	wait_for 10 grep -q '^error=' "$coord_dir/w$i.out" || continue
	line=$(grep '^error=' "$coord_dir/w$i.out")
	errs="$errs$(field error "$line") "
	ms=$((($(field t "$line") - t0) / 1000000))
	[ "$ms" -gt "$worst" ] && worst=$ms
done
is "$errs" "DPT_EGENERATION DPT_EGENERATION " "both survivors are told the generation ended"
[ "$worst" -lt 1000 ]
ok $? "they are told $worst ms after the report (timeout 10000 ms)"
grep -q "evicting rank 2 (task 2, .*): its task exited (signal 9)" "$coord_log"
ok $? "the coordinator logs the eviction with the task's exit status" || diag "$(cat "$coord_log")"
kill -KILL "${worker_pid[w2]}"
wait "${worker_pid[w2]}" 2>/dev/null
r0=0 r1=0
worker_wait w0 30 || r0=$?
worker_wait w1 30 || r1=$?
is "$r0 $r1 $(grep -h '^rejoined' "$coord_dir/w0.out" "$coord_dir/w1.out" | while read -r l; do echo "$(field world "$l")@$(field gen "$l")"; done | tr '\n' ' ')" \
	"0 0 2@2 2@2 " "the survivors form generation 2 of 2 workers and run every collective"
coord_exits 0 "the coordinator exits 0 once they left"

# 2. A report of a task the step does not have is acknowledged and
# logged, and disturbs nobody.
coord_start 2
worker_start x0 0 0 0 loop
worker_start x1 0 1 1 loop
wait_for 30 all_joined x 2 || bail_out "2 workers did not join"
out=$("$coord_worker" report-exit "$DPTRAIN_COORDINATOR" 7 0 2>&1)
ok $? "a report for task 7 of a 2-task step is acknowledged" || diag "$out"
sleep 0.5
! grep -q '^error' "$coord_dir/x0.out" "$coord_dir/x1.out" && grep -q "task 7 exited (exit code 0): no such task" "$coord_log"
ok $? "it disturbs nobody and is logged" || diag "$(cat "$coord_log")"
kill -KILL "${worker_pid[x0]}" "${worker_pid[x1]}" "$coord_pid"
wait "${worker_pid[x0]}" "${worker_pid[x1]}" "$coord_pid" 2>/dev/null

# 3. A task that stopped answering while the generation ended, so that
# it is expected back in generation 2, is dropped when its exit is
# reported: generation 2 forms without it at once. (Stopped, not killed:
# the heartbeat timeout, 10 s here, is what must not be needed.)
coord_start 3 --heartbeat-ms 500 --timeout-ms 10000 --min-workers 1
for i in 0 1 2; do worker_start "y$i" 0 "$i" "$i" loop --rejoin --barriers; done
wait_for 30 all_joined y 3 || bail_out "3 workers did not join"
kill -STOP "${worker_pid[y1]}" "${worker_pid[y2]}"
"$coord_worker" report-exit "$DPTRAIN_COORDINATOR" 2 9 >/dev/null 2>&1
wait_for 5 grep -q "worker (task 0, .*) joins generation 2" "$coord_log" ||
	diag "task 0 did not re-join after task 2's report"
t0=$(now_ns)
"$coord_worker" report-exit "$DPTRAIN_COORDINATOR" 1 9 >/dev/null 2>&1
wait_for 5 grep -q '^rejoined' "$coord_dir/y0.out"
rc=$?
ms=$((($(now_ns) - t0) / 1000000))
grep -q "evicting worker (task 1, .*its task exited (signal 9)" "$coord_log" &&
	[ "$rc" = 0 ] && [ "$(field world "$(grep '^rejoined' "$coord_dir/y0.out")")" = 1 ]
ok $? "a task waiting to re-join is dropped on its report; generation 2 forms without it (${ms} ms)" ||
	diag "$(cat "$coord_log")"

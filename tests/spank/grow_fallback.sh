#!/bin/bash
# A grow whose larger size does not start falls back (doc/shapes.md, "The
# fallback job"), on the real test cluster (2 nodes of 2 fake GPUs): a job
# that accepts 1 or 2 nodes of 2 GPUs (--dp-shapes=1-2x2) starts on 1 node
# while another user's job holds node n2. Once that job ends, the grow
# check grows the job to 2 nodes, and right after that decision an admin
# reserves n2 for maintenance, so the requeued job waits at 2 nodes. The
# fallback job the grow submitted sets it back to 1 node about a minute
# later: the job starts again on 1 node, says why, resumes the checkpoint
# exactly and finishes; the run's events hold a `fallback` shape line,
# which `dptrain status` shows, and the fallback job ended. Run by hand
# against a job that started, the fallback does nothing.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

grow_setup grow_fallback 2
plan 12

grow_on_one_node fb 30 1200
wait_output "$work/fb.out" 'growing to 2 nodes x 2 GPUs: it can start now' 120
ok $? "once the other user's job ends, the grow check grows the job to 2 nodes" ||
	bail_out "$(job_state "$id")" "$(cat "$work/fb.out")"
scontrol_t create reservation reservationname=maint starttime=now \
	duration=10 nodes=n2 users=root flags=maint,ignore_jobs >/dev/null
ok $? "right after that decision, an admin reserves node n2 for maintenance"

wait_output "$work/fb.out" "warning: job $id growing to 2 nodes x 2 GPUs: .*; fallback job [0-9]* sets it back to 1 node x 2 GPUs if it has not started by [0-9:]*$" 60
ok $? "the job is requeued as 2 nodes x 2 GPUs, and names its fallback job" ||
	diag "$(cat "$work/fb.out")"
fallback=$(grep -o 'fallback job [0-9]*' "$work/fb.out" | head -1 | grep -o '[0-9]*$')

# The task's first line and the coordinator's warning come from two
# processes: wait for both.
wait_output "$work/fb.out" '^run start restart=1 ' 240 &&
	wait_output "$work/fb.out" "warning: job $id fell back to 1 node x 2 GPUs: 2 nodes x 2 GPUs had not started by [0-9:]*, though Slurm had said at the grow that it could start at once$" 30 &&
	grep -q '^run start restart=1 nodes=1 gpus=2 ' "$work/fb.out"
ok $? "n2 being reserved, its fallback job $fallback set it back to 1 node, where it starts again and says why" ||
	diag "$(job_state "$id")" "$(cat "$work/fb.out")"
[[ "$(job_state "$fallback")" =~ JobState=COMPLETED ]]
ok $? "the fallback job $fallback did its work and ended" || diag "$(job_state "$fallback")"

hand=$(timed "$top_builddir/coordinator/dptrain-coordinator" fallback "$id" 1 1x2 2x2 2>&1)
[ $? = 0 ] && [ "$hand" = "job $id started or changed since the grow: nothing to do" ]
ok $? "the fallback, run by hand against the job that started, does nothing" || diag "$hand"

job_ended "$id" "$work/fb.out"
check_resumed_as "$id" "$out" 1 2 1200
events=$(cat "$work"/ckpt/fb/events* 2>/dev/null)
status=$(timed "$top_builddir/dptrain" status "file://$work/ckpt/fb" 2>&1)
grep -q '"event":"shape".*"reason":"grow","shape":"2x2","world":4' <<<"$events" &&
	grep -q '"event":"shape".*"reason":"fallback","shape":"1x2","world":2,"why":"fell back to 1 node x 2 GPUs: ' <<<"$events" &&
	grep -q '^  shape      fell back to 1 node x 2 GPUs: ' <<<"$status"
ok $? "the run's events hold the grow and the fallback, and dptrain status shows it" ||
	diag "$events" "$status"
scontrol_t delete reservationname=maint >/dev/null

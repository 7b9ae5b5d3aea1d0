#!/bin/bash
# A running job grows back (doc/shapes.md, "Growing back"), on the real
# test cluster (2 nodes of 2 fake GPUs): a job that accepts 1 or 2 nodes
# of 2 GPUs (--dp-shapes=1-2x2) while another user's job holds node n2
# starts on 1 node at once; the grow check (every 10 s here) says no while
# n2 is taken, and once the other job ends the step stops with a committed
# checkpoint and the job is requeued as 2 nodes, which resume the
# 2 ranks' checkpoint exactly on 4 and finish. One change only: the job is
# then at its largest shape. The grow's fallback job (doc/shapes.md) is
# cancelled once the job starts at 2 nodes. The run's events hold the
# `shape` line, and `dptrain status` shows it.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

grow_setup grow 2
plan 11

grow_on_one_node grow 45 1200
wait_output "$work/grow.out" 'no grow: 2 nodes x 2 GPUs would start about ' 60
ok $? "while n2 is taken, the grow check says no" || diag "$(cat "$work/grow.out")"
wait_job "$other" 90
ok $? "the other user's job ends" || diag "$(job_state "$other")"
job_ended "$id" "$work/grow.out"
grep -q "growing to 2 nodes x 2 GPUs: it can start now and ends about " <<<"$out" &&
	grep -q "job $id requeued\|requeueing job $id after step [0-9]* (committed)" <<<"$out"
ok $? "the coordinator grew the job to 2 nodes x 2 GPUs, after a committed step" ||
	diag "$out"
check_resumed_as "$id" "$out" 2 4 1200
[ "$(grep -c 'requeueing job ' <<<"$out")" = 1 ] &&
	[ "$(grep -c 'growing to .*: the workers are told to stop' <<<"$out")" = 1 ]
ok $? "one change of size only: at 2 nodes the job is at its largest" || diag "$out"
fallback=$(grep -o "job $id growing to .*; fallback job [0-9]* sets it back to 1 node x 2 GPUs if" <<<"$out" |
	grep -o 'fallback job [0-9]*' | grep -o '[0-9]*$')
[ -n "$fallback" ] && [[ "$(job_state "$fallback")" =~ JobState=CANCELLED ]]
ok $? "its fallback job ${fallback:-(none named)} was cancelled when it started at 2 nodes" ||
	diag "$(job_state "$fallback")" "$out"
events=$(cat "$work"/ckpt/grow/events* 2>/dev/null)
status=$(timed "$top_builddir/dptrain" status "file://$work/ckpt/grow" 2>&1)
grep -q '"event":"shape".*"reason":"grow","shape":"2x2","world":4' <<<"$events" &&
	grep -q '^  shape      growing to 2 nodes x 2 GPUs: ' <<<"$status"
ok $? "the run's events hold the grow, and dptrain status shows it" ||
	diag "$events" "$status"

#!/bin/bash
# GPU sizes within a node (doc/shapes.md), on the real test cluster: two
# nodes of 4 fake GPUs; another user's job holds 1 GPU of n2. A job that
# accepts 1 node of 2 to 4 GPUs (--dp-shapes=1x2-4), whose program
# declares a global batch of 8 (dpt_set_global_batch: 3 GPUs never), runs
# on n1 at 4 GPUs and is stopped for its walltime while an admin's
# maintenance reservation takes n1: Slurm has no near start for 4 GPUs,
# and 3 would start at once on n2 but do not divide the batch, so the job
# is requeued as 1 node x 2 GPUs and the 4 ranks' checkpoint resumes
# exactly on 2. The grow check asks Slurm about the extra GPUs on the
# job's own node: 2 more are not free while the other user's job holds
# one (1 more is, for 3, which the batch rules out), and are once it ends;
# the job then stops at a committed step, is requeued as 1 node x 4 GPUs,
# resumes exactly on 4 and finishes. Two size changes, each a `shape`
# event, and never 3 GPUs.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

grow_setup grow_gpus 4
plan 11
steps=1000

other_job "1 GPU of n2" -w n2 -N 1 --gres=gpu:1 --time=10 --wrap 'sleep 600'

# A step of 400 / world ms; 2 minutes of walltime, stopped 80 s before.
shape_job gpus 80s 1x2-4 "--steps $steps --global-ms 400 --total $steps --global-batch 8" \
	-N 1 --gres=gpu:4 --time=2 --requeue
wait_output "$work/gpus.out" '^run start restart=0 nodes=1 gpus=4 node=n1$' 60
ok $? "a job of 1 node x 2 to 4 GPUs (job $id) starts on n1 at 4 GPUs" ||
	bail_out "$(job_state "$id")" "$(cat "$work/gpus.out")"
scontrol_t create reservation reservationname=gpus_maint starttime=now duration=30 \
	nodes=n1 users=root flags=maint,ignore_jobs >/dev/null
ok $? "an admin reserves n1 for maintenance, beside the running job"

resumed_on_2() {
	[ "$(grep -c '^resumed step=[0-9]* rank=[01] world=2 restart=1 exact$' "$work/gpus.out")" = 2 ]
}
wait_for 150 resumed_on_2
out=$(cat "$work/gpus.out")
grep -q "job $id requeued as 1 node x 2 GPUs: starts now, ends about [0-9:]*; 1 node x 4 GPUs would start about " <<<"$out" &&
	! grep -q "x 3 GPUs" <<<"$out" &&
	grep -q '^run start restart=1 nodes=1 gpus=2 node=n2$' <<<"$out" && resumed_on_2
ok $? "at its walltime stop it is requeued as 1 node x 2 GPUs, not 3, which resume 4 ranks' checkpoint exactly" ||
	bail_out "$(job_state "$id")" "$out"
# The rest of the run gets the time it needs; the coordinator follows it.
scontrol_t update JobId="$id" TimeLimit=6
wait_output "$work/gpus.out" 'no grow: 1 node x 4 GPUs would start about ' 40
ok $? "while the other user's job holds the extra GPUs, the grow check says no" ||
	diag "$(cat "$work/gpus.out")"
as_nobody scancel "$other"
wait_job "$other" 30
ok $? "the other user's job ends" || diag "$(job_state "$other")"

job_ended "$id" "$work/gpus.out"
grep -q "growing to 1 node x 4 GPUs: it can start now and ends about " <<<"$out" &&
	[ "$(grep -c 'growing to .*: the workers are told to stop' <<<"$out")" = 1 ] &&
	! grep -q "x 3 GPUs" <<<"$out"
ok $? "the grow check grew the job back to 1 node x 4 GPUs, once, never to 3" || diag "$out"
[[ "$(job_state "$id")" =~ JobState=COMPLETED.*Restarts=2 ]] &&
	grep -q '^run start restart=2 nodes=1 gpus=4 node=n2$' <<<"$out" &&
	[ "$(grep -c "^resumed step=[0-9]* rank=[0-3] world=4 restart=2 exact$" <<<"$out")" = 4 ]
ok $? "it ran again on n2 at 4 GPUs, whose 4 ranks resumed the checkpoint exactly" ||
	diag "$(job_state "$id")" "$out"
[ "$(grep -c "^finished step=$steps rank=[0-3] committed$" <<<"$out")" = 4 ]
ok $? "and finished at step $steps" || diag "$out"
events=$(cat "$work"/ckpt/gpus/events* 2>/dev/null)
grep -q '"event":"shape".*"reason":"changed","shape":"1x2","world":2' <<<"$events" &&
	grep -q '"event":"shape".*"reason":"grow","shape":"1x4","world":4' <<<"$events" &&
	grep -q '"event":"global_batch".*"global_batch":8}' <<<"$events"
ok $? "the run's events hold both changes of size and the declared batch" || diag "$events"
scontrol_t delete reservationname=gpus_maint >/dev/null

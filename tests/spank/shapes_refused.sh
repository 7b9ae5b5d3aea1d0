#!/bin/bash
# Safe by default (doc/shapes.md): when Slurm refuses the pending job's
# change or has no estimate, the job keeps its submitted request, says
# why, and resumes. On the real test cluster (2 nodes of 2 fake GPUs,
# the site's job_submit.lua tests/spank/site_submit.lua), two one-minute
# jobs of 2 nodes x 2 GPUs that accept 1 x 2 or 2 x 2 are stopped for
# their walltime:
# - "fixed", while a maintenance reservation is about to take n2 for a
#   minute: 1 x 2 ends first, but the site's filter refuses every change
#   of a "fixed" job's node count. The job keeps 2 x 2, says so, waits
#   for n2 and resumes there;
# - "drained", while the admin drains the partition (it takes no new
#   job, queued ones still start): every will-run query is refused, the
#   job keeps 2 x 2, says why, and resumes.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_root
require_built train tests/ckpt/train_loop
cluster_up NODES=2 CPUS=4 GPUS=2 JOB_SUBMIT_LUA="$top_srcdir/tests/spank/site_submit.lua"
work_dir refused
plan 11

# submit NAME: as shapes.sh's jobs, named NAME.
submit() {
	shape_job "$1" 40s 1x2,2x2 "--steps 300 --step-ms 100 --total 300" \
		-N 2 --gres=gpu:2 --time=1 --requeue
	wait_output "$work/$1.out" '^run start restart=0 nodes=2 ' 60
	ok $? "$1: a job of 2 nodes x 2 GPUs with --dp-shapes=1x2,2x2 (job $id) runs" ||
		bail_out "$(job_state "$id")" "$(cat "$work/$1.out")"
}

submit fixed
scontrol_t create reservation reservationname=maint starttime=now+30 \
	duration=1 nodes=n2 users=root flags=maint,ignore_jobs >/dev/null
ok $? "an admin reserves n2 for maintenance, 30 s on, for a minute"
# The Comment says it while the job waits for n2 (the next run's progress
# replaces it).
wait_output "$work/fixed.out" "job $id keeps its request: Slurm refused the change of job $id: " 90 &&
	scontrol_t show job "$id" | grep -q "Comment=dptrain: keeps its request: Slurm refused the change"
ok $? "fixed: 1 x 2 chosen, the site refuses the change: it keeps 2 x 2 and says so (output, Comment)" ||
	diag "$(cat "$work/fixed.out")" "$(scontrol_t show job "$id")"
job_ended "$id" "$work/fixed.out"
check_resumed_as "$id" "$out" 2 4 300
scontrol_t delete reservationname=maint >/dev/null 2>&1

submit drained
wait_output "$work/drained.out" '^fresh start' 30
scontrol_t update partitionname=debug state=drain
job_ended "$id" "$work/drained.out"
scontrol_t update partitionname=debug state=up
grep -q "2 nodes x 2 GPUs left out: Slurm has no start for it: " <<<"$out" &&
	grep -q "job $id keeps its request: no accepted shape has a start estimate and a rate" <<<"$out"
ok $? "drained: no estimate for any shape, each said; it keeps 2 x 2 and says so" ||
	diag "$out"
check_resumed_as "$id" "$out" 2 4 300

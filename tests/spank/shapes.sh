#!/bin/bash
# --dp-shapes (doc/shapes.md) on the real test cluster, two nodes of 2 fake
# GPUs: a job of 4 ranks (2 nodes x 2 GPUs) that accepts 1 x 2 or 2 x 2
# is stopped and requeued. Before the requeue, the coordinator reads the
# run's speed from its events, asks Slurm when each shape would start,
# and updates the pending job to the one that ends first:
# - stopped for its walltime (a one-minute job) while a maintenance
#   reservation takes the second node for 5 minutes: Slurm has no start
#   for 2 x 2, 1 x 2 starts at once; the job resumes on 2 ranks and
#   finishes;
# - stopped by a preemption's signal (scancel --signal=USR1), nothing
#   reserved: both start as soon as the job's own nodes are free, and 2 x 2
#   trains faster; it stays 2 x 2.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_root
require_built train tests/ckpt/train_loop
cluster_up NODES=2 CPUS=4 GPUS=2
work_dir shapes
plan 11

# submit NAME [MINUTES]: a job of 2 nodes x 2 GPUs and a limit of MINUTES
# (1: it stops 20 s in, grace 40 s) that declares 300 steps and stops at
# SIGUSR1 or SIGTERM; its id.
submit() {
	shape_job "$1" 40s 1x2,2x2 "--steps 300 --step-ms 100 --total 300 --stop-signals" \
		-N 2 --gres=gpu:2 --time="${2:-1}" --requeue
	echo "$id"
}

# 1-6. The second node reserved: requeued as 1 x 2, resumed on 2 ranks.
id=$(submit small)
[ -n "$id" ] && wait_output "$work/small.out" '^run start restart=0' 60
ok $? "sbatch of 2 nodes x 2 GPUs with --dp-shapes=1x2,2x2: job $id runs" ||
	bail_out "the job did not start: $(job_state "$id")"
scontrol_t create reservation reservationname=maint starttime=now+30 \
	duration=5 nodes=n2 users=root flags=maint,ignore_jobs >/dev/null
ok $? "an admin reserves node n2 for maintenance, 30 s on, for 5 minutes"
job_ended "$id" "$work/small.out"
grep -q "2 nodes x 2 GPUs left out: Slurm has no start for it: " <<<"$out" &&
	grep -q "job $id requeued as 1 node x 2 GPUs: starts now, ends about [A-Za-z0-9: ]*$" <<<"$out"
ok $? "the coordinator requeued it as 1 node x 2 GPUs, 2 x 2 having no start" ||
	diag "$out"
check_resumed_as "$id" "$out" 1 2 300
scontrol_t delete reservationname=maint >/dev/null

# 7-11. A preemption's stop, nothing waits: 2 x 2 starts as soon as 1 x 2
# and ends first. The job trains 15 s (its speed in the events), then Slurm signals
# its tasks as a preemption with a grace time does.
id=$(submit large 10)
[ -n "$id" ] && wait_output "$work/large.out" '^run start restart=0' 60 && sleep 15 &&
	timed scancel --signal=USR1 "$id"
ok $? "the same job again, 10 minutes, alone: job $id trains 15 s, then scancel --signal=USR1" ||
	bail_out "the job did not start or was not signalled: $(job_state "$id")"
job_ended "$id" "$work/large.out"
# Slurm counts the job's own nodes busy until its limit (doc/shapes.md):
# both shapes start then, or at once.
start='\(now\|about [0-9:]*\)'
grep -q "job $id requeued as 2 nodes x 2 GPUs: starts $start, ends about [0-9:]*; 1 node x 2 GPUs would start $start$" <<<"$out"
ok $? "the coordinator kept 2 nodes x 2 GPUs, which trains faster" || diag "$out"
check_resumed_as "$id" "$out" 2 4 300

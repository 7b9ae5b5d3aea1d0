#!/bin/bash
# Requeue onto the node range (doc/walltime.md), on the real test cluster:
# a batch job of --nodes=1-2 --ntasks-per-node=2 and srun --dp-nodes=1-2
# starts on both nodes (world 4), stops before its walltime and is
# requeued; the test drains n2 meanwhile, as an admin would, and the job
# starts again on n1 alone (world 2) instead of waiting for two nodes; its
# next requeue finds n2 back and runs on 4 ranks again. Every run resumes
# the previous one's committed step with the exact state (tests/ckpt's
# training loop checks it), whatever the world size. Without --dp-nodes
# the requeued job waits for the two nodes it started on. A bad range
# fails srun with a message that says what to write.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

walltime_setup elastic
plan 13

# submit NAME SRUN_OPTIONS: the job's id.
submit() {
	cat >"$work/$1.sh" <<EOF
#!/bin/bash
#SBATCH --nodes=1-2 --ntasks-per-node=2 --time=1 --requeue --open-mode=append
#SBATCH -o $work/$1.out -J $1
echo "run restart=\${SLURM_RESTART_COUNT:-0} nodes=\$SLURM_JOB_NUM_NODES tasks=\$SLURM_NTASKS"
srun --dp-train=$1 --dp-ckpt=file://$work/ckpt --dp-grace=50s $2 $train --step-ms 100 --steps 260
echo "srun exit \$?"
EOF
	sbatch_t --parsable "$work/$1.sh" | cut -d';' -f1
}
in_file() { grep -q -- "$2" "$1" 2>/dev/null; } # FILE PATTERN
drain() { scontrol_t update nodename=n2 state=drain reason="dptrain test: $1"; }
undrain() { scontrol_t update nodename=n2 state=resume; }

# 1. A range that is not one fails srun at once.
out=$(srun_t -N 1 -n 1 --dp-train=bad --dp-nodes=2-1 true 2>&1)
[ $? -ne 0 ] && grep -q -- "--dp-nodes: '2-1': expected a node count or a range MIN-MAX, as sbatch --nodes takes (e.g. 1-2)" <<<"$out"
ok $? "--dp-nodes=2-1: srun fails and says what to write" || diag "$out"

# 2-10. The elastic job: 4 ranks, 2, then 4 again.
id=$(submit elastic --dp-nodes=1-2)
wait_for 90 in_file "$work/elastic.out" "requeueing job $id after step [0-9]* (committed) onto 1-2 nodes"
ok $? "the first run is requeued onto 1-2 nodes" || diag "$(cat "$work/elastic.out")"
drain "elastic run 2"
wait_for 60 in_file "$work/elastic.out" "^run restart=1 "
state=$(scontrol_t show job "$id")
# The second run's requeue must find n2 back.
wait_for 60 in_file "$work/elastic.out" "^resumed step=[0-9]* rank=1 world=2"
undrain
# The third run finishes: its longer limit is set while the job waits in
# the queue after the second requeue, so that the third run's coordinator
# reads it when it starts (it reads the end time then and every 30 s).
for ((i = 0; i < 180; i++)); do
	[ "$(grep -c "requeueing job $id after step" "$work/elastic.out")" -ge 2 ] && break
	sleep 0.5
done
scontrol_t update jobid="$id" timelimit=5
wait_job "$id" 300
out=$(cat "$work/elastic.out")
runs=$(grep '^run restart=' <<<"$out" | tr '\n' ' ')
is "$runs" "run restart=0 nodes=2 tasks=4 run restart=1 nodes=1 tasks=2 run restart=2 nodes=2 tasks=4 " \
	"it ran on 2 nodes, then on n1 alone while n2 was drained, then on 2 again" || diag "$out" "$state"
[[ "$(job_state "$id")" =~ JobState=COMPLETED.*Restarts=2 ]]
ok $? "it completed after two requeues ($(job_state "$id"))" || diag "$out"
worlds=$(grep -o '^\(fresh start\|resumed step=[0-9]*\) rank=0 world=[0-9]*' <<<"$out" | grep -o 'world=[0-9]*' | tr '\n' ' ')
is "$worlds" "world=4 world=2 world=4 " "rank 0 saw worlds of 4, 2 and 4" || diag "$out"
# Each run resumes exactly the step the previous one committed at its stop.
stops=$(grep -o '^stopped step=[0-9]* rank=0 committed' <<<"$out" | cut -d' ' -f2 | cut -d= -f2 | tr '\n' ' ')
resumes=$(grep -o '^resumed step=[0-9]* rank=0' <<<"$out" | cut -d' ' -f2 | cut -d= -f2 | tr '\n' ' ')
is "$resumes" "${stops:-none}" "each run resumed the step the previous one committed ($stops)" ||
	diag "$out"
is "$(grep -c '^resumed step=[0-9]* rank=[0-3] world=[24] restart=[12] exact$' <<<"$out")" 6 \
	"every rank of runs 2 and 3 loaded the exact state of its step" || diag "$out"
grep -q '^finished step=260 rank=0 committed' <<<"$out"
ok $? "the last run trained to step 260 and committed it" || diag "$out"
grep -q "requeueing job $id after step [0-9]* (committed) onto 1-2 nodes: it resumes from there" <<<"$out" &&
	[ "$(grep -c "requeueing job $id" <<<"$out")" = 2 ]
ok $? "both requeues said the range in the job's output" || diag "$out"
[[ "$(sed -n 's/^ *Comment=//p' <<<"$state")" == "dptrain: requeueing job $id after step "*" onto 1-2 nodes"* ]]
ok $? "and in its Comment (seen during the second run)" || diag "$state"

# 11-13. Without --dp-nodes, Slurm's pinned count: the requeued job waits
# for 2 nodes while n2 is drained.
id=$(submit pinned "")
wait_for 90 in_file "$work/pinned.out" "requeueing job $id after step"
ok $? "without --dp-nodes the job is requeued too" || diag "$(cat "$work/pinned.out")"
! grep -q "onto" "$work/pinned.out"
ok $? "and its message names no range" || diag "$(cat "$work/pinned.out")"
drain "pinned"
sleep 15 # twice the requeue delay (cred_expire=5 s) and a scheduling pass
state=$(scontrol_t show job "$id")
undrain
scancel "$id"
[[ "$state" =~ JobState=PENDING ]] && [[ "$state" =~ NumNodes=2 ]]
ok $? "it waits for the 2 nodes it started on ($(grep -o 'JobState=[A-Z]*\|Reason=[A-Za-z_]*\|NumNodes=[0-9-]*' <<<"$state" | tr '\n' ' '))" ||
	diag "$state"

#!/bin/bash
# The requeue guard (doc/walltime.md, "Requeue guard"), on the real test
# cluster: jobs that would requeue forever do not. A grace not shorter
# than the time limit fails srun at once; a program that exits 1 after
# its load is not requeued; --dp-max-requeues=1 lets the job run twice,
# then ends it with the last committed step in its output and Comment; a
# run that resumed and committed nothing newer is requeued held, with the
# reason in its output and Comment. Each batch job: 4 tasks on 2 nodes,
# --time=1 --requeue, the loop of tests/ckpt/train_loop.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

walltime_setup guard
plan 14

# submit NAME SRUN_OPTIONS LOOP_OPTIONS: the job's id.
submit() {
	cat >"$work/$1.sh" <<EOF
#!/bin/bash
#SBATCH -N 2 -n 4 --ntasks-per-node=2 --time=1 --requeue --open-mode=append
#SBATCH -o $work/$1.out -J $1
srun --dp-train=$1 --dp-ckpt=file://$work/ckpt $2 $train --step-ms 100 $3
echo "srun exit \$?"
EOF
	sbatch_t --parsable "$work/$1.sh" | cut -d';' -f1
}
comment() { scontrol_t show job "$1" | sed -n 's/^ *Comment=//p'; }

# The long one runs beside the others (2 of its tasks per node).
cap=$(submit cap "--dp-grace=50s --dp-max-requeues=1" "--steps 100000")
seed=$(submit held "--dp-grace=30s" "--steps 5")
wait_job "$seed" 60 || diag "$(job_state "$seed")"

# 1-2. Grace 90 s on a 1-minute job: refused when the step starts.
id=$(submit grace "--dp-grace=90s" "--steps 100")
wait_job "$id" 60
out=$(cat "$work/grace.out")
[[ "$(job_state "$id")" =~ Restarts=0 ]] && grep -q "srun exit [1-9]" <<<"$out"
ok $? "grace 90s, time limit 1m: the step fails, no requeue ($(job_state "$id"))" || diag "$out"
grep -q -- "--dp-grace=1m30s is not shorter than job $id's time limit (1m)" <<<"$out"
ok $? "and srun says why and what to change" || diag "$out"

# 3-4. A program that exits 1 right after its load is not requeued.
id=$(submit crash "--dp-grace=50s" "--steps 100 --fail-after-load")
wait_job "$id" 60
out=$(cat "$work/crash.out")
[[ "$(job_state "$id")" =~ Restarts=0 ]] && grep -q "srun exit [1-9]" <<<"$out"
ok $? "a program that exits 1 after its load: the job ends ($(job_state "$id"))" || diag "$out"
! grep -q "requeueing job" <<<"$out"
ok $? "and dptrain did not requeue it" || diag "$out"

# 5-10. Held: the seed job committed step 5; the next job resumes from it
# and stops without saving, so its run made no progress.
grep -q '^finished step=5 rank=0 committed' "$work/held.out"
ok $? "the seed job committed step 5" || diag "$(cat "$work/held.out")"
id=$(submit held "--dp-grace=50s" "--steps 100000 --stop-without-save")
for ((i = 0; i < 120; i++)); do
	grep -q "holding job $id" "$work/held.out" 2>/dev/null && break
	sleep 1
done
sleep 3
out=$(cat "$work/held.out")
is "$(grep -c "^stopped step=[0-9]* rank=[0-3] unsaved$" <<<"$out")" 4 \
	"the resumed run stopped without saving" || diag "$out"
grep -q "holding job $id: this run resumed from step 5 and committed no newer step, so a requeue would loop; the last good step is 5: fix the cause, then scontrol release $id" <<<"$out"
ok $? "the coordinator said it holds the job, why, and the last good step" || diag "$out"
state=$(scontrol_t show job "$id")
# Slurm words the reason as the hold's description.
[[ "$state" =~ JobState=PENDING ]] &&
	[[ "$state" =~ Reason=(JobHeld|job_requeued_in_held_state) ]]
ok $? "the job waits in the queue, held ($(grep -o 'JobState=[A-Z]*\|Reason=[A-Za-z_]*' <<<"$state" | tr '\n' ' '))" || diag "$state"
[[ "$(comment "$id")" == "dptrain: holding job $id: this run resumed from step 5"* ]]
ok $? "its Comment says why" || diag "$state"
scancel "$id"
ls=$("$top_builddir/dptrain" ckpt ls "file://$work/ckpt/held" 2>&1)
[ "$(grep -c ' committed$' <<<"$ls")" = 1 ] && grep -Eq '^\S+ +5 +committed$' <<<"$ls"
ok $? "step 5 is still the newest committed step" || diag "$ls"

# 11-14. The cap: requeued once, then not again.
wait_job "$cap" 300
out=$(cat "$work/cap.out")
state=$(job_state "$cap")
[[ "$state" =~ JobState=COMPLETED.*Restarts=1 ]]
ok $? "--dp-max-requeues=1: the job ran twice and ended ($state)" || diag "$out"
is "$(grep -c "requeueing job $cap after step [0-9]* (committed)" <<<"$out")" 1 \
	"the first run was requeued" || diag "$out"
last=$(grep -o '^stopped step=[0-9]* rank=0 committed' <<<"$out" | tail -n 1 | cut -d' ' -f2)
grep -q "not requeueing job $cap: it was requeued 1 times, --dp-max-requeues=1; the last committed step is step ${last#step=}: submit the job again to go on" <<<"$out"
ok $? "the second said why it ended, with the last committed step ($last)" || diag "$out"
[[ "$(comment "$cap")" == "dptrain: not requeueing job $cap: it was requeued 1 times"* ]]
ok $? "and so does the job's Comment" || diag "$(scontrol_t show job "$cap")"

#!/bin/bash
# A time limit changed while the job runs (doc/walltime.md), on the real
# test cluster; both jobs run at once, about 70 s in all:
# - extended: `--time=2 --dp-grace=70s` would stop 50 s in; 4 s in, it is
#   extended to 3 minutes, so its 60 s loop finishes without a stop. Read
#   through libslurm's 60 s cache, the extension was missed and the step
#   stopped at the old end.
# - shortened: `--time=5 --dp-grace=50s`, cut to 1 minute 4 s in: the grace
#   is already inside the new end, so the step stops as soon as the change
#   is seen and commits before Slurm's kill. Through the cache it was seen
#   at the kill and the job ended TIMEOUT.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

walltime_setup wtchange
plan 6

# submit NAME TIME GRACE: a job of 2 tasks on one node whose loop needs 60 s.
submit() {
	cat >"$work/$1.sh" <<EOF
#!/bin/bash
#SBATCH -N 1 -n 2 --time=$2 --no-requeue -o $work/$1.out -J $1
srun --dp-train=$1 --dp-ckpt=file://$work/ckpt --dp-grace=$3 --dp-requeue=off \\
	$train --steps 600 --step-ms 100 --trace
echo "srun exit \$?"
EOF
	sbatch_t --parsable "$work/$1.sh" | cut -d';' -f1
}

ext=$(submit ext 2 70s)
short=$(submit short 5 50s)
[ -n "$ext" ] && [ -n "$short" ] || bail_out "sbatch failed"
# 4 s after the first step, when the coordinators have read the end time.
for ((i = 0; i < 600; i++)); do
	grep -q '^step 1$' "$work/ext.out" 2>/dev/null &&
		grep -q '^step 1$' "$work/short.out" 2>/dev/null && break
	sleep 0.1
done
sleep 4
scontrol_t update JobId="$ext" TimeLimit=3
rc=$?
scontrol_t update JobId="$short" TimeLimit=1
[ $rc = 0 ] && [ $? = 0 ]
ok $? "4 s in: job $ext extended to 3 minutes, job $short cut to 1 minute" ||
	diag "$(cat "$work/ext.out" "$work/short.out" 2>&1)"
wait_job "$ext" 120
wait_job "$short" 120

out=$(cat "$work/ext.out")
is "$(grep -c '^finished step=600 rank=[01] committed$' <<<"$out"):$(grep -c '^stopped step=' <<<"$out")" \
	"2:0" "the extended job was not stopped at its old end: both ranks finished" || diag "$out"
[[ "$(job_state "$ext")" =~ JobState=COMPLETED ]]
ok $? "it completed ($(job_state "$ext"))" || diag "$out"

out=$(cat "$work/short.out")
stop=$(grep -o '^stopped step=[0-9]* rank=[01] committed$' <<<"$out" | cut -d' ' -f2 | sort | uniq -c |
	awk '{ print $1 " " $2 }')
[[ "$stop" =~ ^2\ step=[0-9]+$ ]] && [ "${stop#2 step=}" -le 400 ]
ok $? "the shortened job's ranks stopped at the same step, at once, and committed ($stop)" || diag "$out"
grep -q "job $short ends at .* (grace 50 s): the workers are told to stop" <<<"$out"
ok $? "the coordinator said why it stopped the step" || diag "$out"
[[ "$(job_state "$short")" =~ JobState=COMPLETED ]]
ok $? "it completed before Slurm's kill ($(job_state "$short"))" || diag "$out"

#!/bin/bash
# The --dp-* options as users meet them: listed in --help, bad values and
# values outside the site's bounds refused at once by srun and sbatch with a
# message that names the option, #SBATCH options reaching the steps, and a
# broken dptrain.conf failing --dp-train steps clearly while the node stays
# in service and other jobs run.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_root
conf_cluster_up $'max_keep = 5\nmin_grace = 2m\nmax_grace = 1h\nallowed_roots = file:///ckpt/%u\n' \
	NODES=2 CPUS=4 GPUS=0
plan 21

# 1. Every option is in srun --help.
help=$(timed srun --help 2>&1)
missing=
for o in dp-train dp-ckpt dp-ckpt-every dp-keep dp-grace dp-requeue dp-min-workers dp-backend dp-verbose \
	dp-gpu-bind dp-torchelastic; do
	grep -q -- "--$o" <<<"$help" || missing="$missing --$o"
done
is "$missing" "" "srun --help lists every --dp-* option"

# 2-13. Bad values fail srun before anything runs, naming the option.
refused() { # DESCRIPTION EXPECTED-TEXT OPTIONS...
	local desc=$1 want=$2 out rc=0
	shift 2
	out=$(srun_t -n 1 "$@" echo RAN 2>&1) || rc=$?
	if [ "$rc" != 0 ] && grep -qF -- "$want" <<<"$out" && ! grep -q RAN <<<"$out"; then
		ok 0 "$desc"
	else
		ok 1 "$desc"
		diag "exit status $rc, output:" "$out"
	fi
}
refused "--dp-keep=3x is refused" "--dp-keep: '3x': expected a number" --dp-train --dp-keep=3x
refused "--dp-grace=soon is refused with the accepted forms" "HH:MM:SS" --dp-train --dp-grace=soon
refused "--dp-requeue=never is refused" "--dp-requeue: 'never': expected auto or off" --dp-train --dp-requeue=never
refused "--dp-backend=mpi is refused" "expected auto, nccl or cpu" --dp-train --dp-backend=mpi
refused "--dp-ckpt with a relative path is refused" "file:///path or s3://bucket/prefix" --dp-train --dp-ckpt=ckpt/dir
refused "--dp-keep above the site's max_keep is refused with the bound" "at most 5" --dp-train --dp-keep=9
refused "--dp-grace outside the site's range is refused with the range" "the site allows 2m to 1h" --dp-train --dp-grace=30s
refused "--dp-min-workers larger than the step is refused" "--dp-min-workers=3 is larger than the step's 2 tasks" \
	--dp-train -n 2 --dp-min-workers=3
# '..' cannot climb out of the site's allowed_roots (file:///ckpt/%u),
# however it is written, and cannot name a run.
me=$(id -un)
refused "--dp-ckpt=.../$me/../bob is refused, saying what to write" \
	"--dp-ckpt=file:///ckpt/$me/../bob: a '.' or '..' component (also written %2e) is not allowed: write the path without it" \
	--dp-train --dp-ckpt="file:///ckpt/$me/../bob"
refused "--dp-ckpt with .. percent-encoded is refused" "is not allowed: write the path without it" \
	--dp-train --dp-ckpt="file:///ckpt/$me/%%2e%%2e/bob"
refused "--dp-train=.. is refused, saying what a run name is" \
	"--dp-train: '..': '.' and '..' name directories, not a run: give the run a name" --dp-train=..
is "$(srun_t -n 1 --dp-train=r1 --dp-ckpt="file:///ckpt//$me/r1/" sh -c 'echo "$DPTRAIN_CKPT_URI"' 2>&1)" \
	"file:///ckpt//$me/r1/" "an allowed root spelled with extra slashes is accepted"

# 14. sbatch checks too, at submission.
out=$(cd /tmp && sbatch_t --dp-train --dp-keep=x --wrap true 2>&1)
rc=$?
[ $rc != 0 ] && grep -q -- "--dp-keep" <<<"$out"
ok $? "sbatch --dp-keep=x fails at submission naming the option" || diag "exit $rc: $out"

# 15-16. #SBATCH options reach the steps inside the batch job.
script=$(mktemp /tmp/dptrain-batch.XXXXXX)
out_file=$script.out
cat >"$script" <<'EOS'
#!/bin/bash
#SBATCH --dp-train=batchrun
#SBATCH --dp-keep=4
srun -n 1 sh -c 'echo "run=$DPTRAIN_RUN keep=$DPTRAIN_KEEP"'
EOS
jobid=$(cd /tmp && sbatch_t --parsable -o "$out_file" "$script")
ok $? "sbatch with #SBATCH --dp-train is accepted"
job_gone() { [ -z "$(squeue_t -h -j "$jobid" 2>/dev/null)" ]; }
wait_for 60 job_gone
is "$(grep '^run=' "$out_file" 2>/dev/null)" "run=batchrun keep=4" \
	"#SBATCH --dp-train=batchrun --dp-keep=4 reach srun inside the job" || diag "$(cat "$out_file" 2>/dev/null)"
rm -f "$script" "$out_file"

# 17-21. A broken dptrain.conf: --dp-train steps fail with the file, line
# and key; the node is not drained; jobs without --dp-train still run.
printf 'max_keep = 5\ngrace = whenever\n' >"$conf"
out=$(srun_t -n 1 --dp-train echo RAN 2>&1)
rc=$?
[ $rc != 0 ] && ! grep -q RAN <<<"$out"
ok $? "srun --dp-train with a broken dptrain.conf fails" || diag "exit $rc: $out"
grep -qF "$conf:2: grace='whenever'" <<<"$out"
ok $? "the message names the file, the line and the key" || diag "$out"
is "$(srun_tasks -n 1 echo RAN)" "RAN" "a job without --dp-train still runs"
# (A node may still be completing the last job: not a failure.)
is "$(sinfo -h -N -t down,drain,fail,no_respond -o '%N %t' | sort -u | tr '\n' ' ')" "" \
	"no node is drained or down"
# The same through slurmstepd: the step is submitted with a good config and
# the config breaks before the tasks start reading it on the node.
printf 'max_keep = 5\n' >"$conf"
out=$(srun_tasks -n 1 --dp-train sh -c 'echo RAN')
is "$out" "RAN" "with the config fixed, --dp-train runs again"
rm -f "$conf"

#!/bin/bash
# Ranks see every GPU: with --gres=gpu:N, every task of a --dp-train step
# sees all of its node's GPUs of the step in CUDA_VISIBLE_DEVICES, as
# under torchrun, and LOCAL_RANK indexes that list. --dp-gpu-bind=rank,
# or the site's gpu_bind=rank, narrows each task to the GPU at its local
# rank; the user's option wins over the site's default; bad values and a
# node with fewer GPUs than tasks are refused with a message saying what
# to do; Slurm's own per-task binding and steps without GPUs are left
# alone. In a batch job of a node range (dptrain(8)'s elastic example),
# --ntasks-per-node with --gres, and --dp-gpu-bind=rank or srun
# --gpus-per-task=1, gives one rank per GPU; --gres alone one task per
# node. The cluster's GPUs are fake (character devices): the checks are
# on what the tasks are told, which is what CUDA reads.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_root
conf_cluster_up "" NODES=2 CPUS=8 GPUS=4
plan 18

# One line per task, sorted by rank: "node local gpus".
show='echo "$RANK $SLURMD_NODENAME ${LOCAL_RANK-unset} $CUDA_VISIBLE_DEVICES"'
err=$(mktemp /tmp/dptrain-gpus-err.XXXXXX) || bail_out "mktemp failed"
dpt_scratch+=("$err")
# (One-node steps name n1: Slurm may place one on n2 while n1 still ends
# the step before.)
layout() { # SRUN-OPTIONS...: the step's layout, or its error output
	local out
	if out=$(cd /tmp && srun_t "$@" sh -c "$show" 2>"$err"); then
		sort -n <<<"$out" | cut -d' ' -f2- | tr '\n' ';'
	else
		echo "FAILED: $out $(cat "$err")"
	fi
}
# The entry at LOCAL_RANK of each task's list: what cuda:LOCAL_RANK is.
indexed() {
	sort -n <<<"$1" | while read -r _ _ lr devs; do
		IFS=, read -r -a list <<<"$devs"
		printf '%s;' "${list[$lr]:-none}"
	done
}

# 1-3. The default: every task sees its node's 4 GPUs of the step.
out=$(cd /tmp && srun_t -N 2 --ntasks-per-node=2 --gres=gpu:4 --dp-train=gpus sh -c "$show" 2>"$err")
is "$(sort -n <<<"$out" | cut -d' ' -f2- | tr '\n' ';')" \
	"n1 0 0,1,2,3;n1 1 0,1,2,3;n2 0 0,1,2,3;n2 1 0,1,2,3;" \
	"-N 2 --ntasks-per-node=2 --gres=gpu:4: every task sees all 4 GPUs of its node"
is "$(indexed "$out")" "0;1;0;1;" "LOCAL_RANK indexes them: ranks 0-3 use GPUs 0,1,0,1"
is "$(cd /tmp && srun_t -n 1 --gres=gpu:4 --dp-train sh -c 'echo $DPTRAIN_GPU_BIND' 2>&1)" none \
	"DPTRAIN_GPU_BIND=none by default"

# 4-5. A step that holds GPUs 2 and 3 of n1 (another job holds 0 and 1):
# LOCAL_RANK indexes the list, it is not a device number.
(cd /tmp && timed srun -w n1 -n 1 --gres=gpu:2 -J gpuholder sleep 60) >/dev/null 2>&1 &
holder=$!
holder_runs() { [ -n "$(squeue_t -h -n gpuholder -t R 2>/dev/null)" ]; }
holder_gone() { [ -z "$(squeue_t -h -n gpuholder 2>/dev/null)" ]; }
wait_for 30 holder_runs
sleep 1 # the step's GPUs are allocated once the job runs its step
out=$(cd /tmp && srun_t -w n1 -n 2 --gres=gpu:2 --dp-train=gpus sh -c "$show" 2>"$err")
is "$(sort -n <<<"$out" | cut -d' ' -f2- | tr '\n' ';')$(indexed "$out")" \
	"n1 0 2,3;n1 1 2,3;2;3;" \
	"GPUs 2,3 of n1: both tasks see 2,3; local ranks 0 and 1 pick GPUs 2 and 3"
is "$(layout -w n1 -n 2 --gres=gpu:2 --dp-train=gpus --dp-gpu-bind=rank)" "n1 0 2;n1 1 3;" \
	"--dp-gpu-bind=rank on GPUs 2,3: local rank 0 sees GPU 2, local rank 1 GPU 3"
scancel -n gpuholder 2>/dev/null
wait "$holder" 2>/dev/null
wait_for 30 holder_gone

# 6-7. --dp-gpu-bind=rank: one GPU per task, the one at its local rank.
is "$(layout -N 2 --ntasks-per-node=2 --gres=gpu:4 --dp-train=gpus --dp-gpu-bind=rank)" \
	"n1 0 0;n1 1 1;n2 0 0;n2 1 1;" "--dp-gpu-bind=rank: each task sees the GPU of its local rank"
is "$(layout -N 1 -w n1 -n 2 --gres=gpu:4 --dp-train=gpus --dp-gpu-bind=rank --dp-gpu-bind=none)" \
	"n1 0 0,1,2,3;n1 1 0,1,2,3;" "the last --dp-gpu-bind given wins (none)"

# 8-9. The site's default, and the user's option over it.
printf '# site default\ngpu_bind = rank\n' >"$conf"
is "$(layout -N 1 -w n1 -n 2 --gres=gpu:4 --dp-train=gpus)" "n1 0 0;n1 1 1;" \
	"gpu_bind=rank in dptrain.conf: tasks get one GPU each without the option"
is "$(layout -N 1 -w n1 -n 2 --gres=gpu:4 --dp-train=gpus --dp-gpu-bind=none)" \
	"n1 0 0,1,2,3;n1 1 0,1,2,3;" "--dp-gpu-bind=none overrides the site's gpu_bind=rank"

# 10. Without GPUs rank binding has nothing to do, and the step runs.
is "$(layout -N 1 -w n1 -n 2 --dp-train=gpus)" "n1 0 ;n1 1 ;" \
	"gpu_bind=rank and no --gres: the step runs, no CUDA_VISIBLE_DEVICES"

# 11. Slurm's own per-task binding stays as Slurm made it.
is "$(layout -N 1 -w n1 -n 2 --gpus-per-task=1 --dp-train=gpus)" "n1 0 0;n1 1 1;" \
	"gpu_bind=rank with --gpus-per-task=1: Slurm's binding stays"

# 12. Fewer GPUs than tasks on a node: refused, saying what to ask for.
out=$(cd /tmp && srun_t -N 1 -n 3 --gres=gpu:2 --dp-train=gpus sh -c 'echo RAN' 2>&1)
rc=$?
[ $rc != 0 ] && ! grep -q RAN <<<"$out" &&
	grep -qF -- "gpu_bind=rank (the site's default): this node runs 3 tasks of the step but has only 2 GPUs for them (CUDA_VISIBLE_DEVICES=0,1): ask for a GPU per task (--gres=gpu:3) or use --dp-gpu-bind=none" <<<"$out"
ok $? "3 tasks on 2 GPUs with the site's rank binding: no task runs, the message says what to do" ||
	diag "exit $rc:" "$out"

# 13. A bad site value: --dp-train steps fail with the file, line and key.
printf '# site default\ngpu_bind = socket\n' >"$conf"
out=$(cd /tmp && srun_t -n 1 --dp-train echo RAN 2>&1)
rc=$?
[ $rc != 0 ] && ! grep -q RAN <<<"$out" && grep -qF "$conf:2: gpu_bind='socket': expected none or rank" <<<"$out"
ok $? "gpu_bind=socket in dptrain.conf: srun fails naming the file, the line and the value" ||
	diag "exit $rc:" "$out"
: >"$conf"

# 14. A bad user value: srun fails before anything runs.
out=$(cd /tmp && srun_t -n 1 --dp-train --dp-gpu-bind=socket echo RAN 2>&1)
rc=$?
[ $rc != 0 ] && ! grep -q RAN <<<"$out" &&
	grep -qF -- "--dp-gpu-bind: 'socket': expected none (every GPU of the step visible to each task) or rank (one GPU per task)" <<<"$out"
ok $? "--dp-gpu-bind=socket: srun fails with the accepted values" || diag "exit $rc:" "$out"

# 15. Without --dp-train the option changes nothing.
is "$(layout -N 1 -w n1 -n 2 --gres=gpu:4 --dp-gpu-bind=rank)" "n1 unset 0,1,2,3;n1 unset 0,1,2,3;" \
	"--dp-gpu-bind=rank without --dp-train: GPUs as Slurm sets them, no LOCAL_RANK"

# 16-18. Batch jobs on a node range, srun without -n or -N (the world
# follows the allocation): the forms of dptrain(8)'s elastic example.
batch() { # SBATCH-OPTIONS SRUN-OPTIONS: the layout of the job's step
	local out=$work_dir/batch.$RANDOM
	(cd /tmp && sbatch_t --wait -o "$out" $1 --wrap "srun --dp-train=gpus $2 sh -c '$show' | sort -n") >/dev/null 2>&1 &&
		cut -d' ' -f2- "$out" | tr '\n' ';'
}
work_dir=$(mktemp -d /tmp/dptrain-gpus-batch.XXXXXX) || bail_out "mktemp failed"
dpt_scratch+=("$work_dir")
chmod 777 "$work_dir"
is "$(batch "--nodes=1-2 --ntasks-per-node=2 --gres=gpu:2" --dp-gpu-bind=rank)" \
	"n1 0 0;n1 1 1;n2 0 0;n2 1 1;" \
	"--nodes=1-2 --ntasks-per-node=2 --gres=gpu:2, --dp-gpu-bind=rank: a rank per GPU"
# (sbatch refuses --gpus-per-task without -n: it goes to srun.)
is "$(batch "--nodes=1-2 --ntasks-per-node=2 --gres=gpu:2" --gpus-per-task=1)" \
	"n1 0 0;n1 1 1;n2 0 0;n2 1 1;" \
	"the same with srun --gpus-per-task=1: a rank per GPU, Slurm's binding"
is "$(batch "--nodes=1-2 --gres=gpu:2" "")" "n1 0 0,1;n2 0 0,1;" \
	"--nodes=1-2 --gres=gpu:2 alone: one task per node, as dptrain(8) warns"

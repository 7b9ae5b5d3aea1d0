#!/bin/bash
# The test cluster itself, with the plugin of this build tree loaded: the
# options show in srun and sbatch, four nodes run tasks, fake GPUs are bound,
# --dp-train reaches the task, and up/down leave nothing behind.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
cluster_up NODES=4 CPUS=8 GPUS=4
dir=$DPTRAIN_CLUSTER_DIR
unset DPTRAIN_RUN
plan 11

# 1-2. srun prints the plugin's options after its own; sbatch too, if the
# plugin registers them where sbatch looks (the allocator context).
out=$(timed srun --help 2>&1)
grep -q -- '--dp-train' <<<"$out"
ok $? "srun --help lists --dp-train" || diag "$(grep -A3 -i plugin <<<"$out")"
out=$(timed sbatch --help 2>&1)
grep -q -- '--dp-train' <<<"$out"
ok $? "sbatch --help lists --dp-train" ||
	diag "sbatch shows only the options that slurm_spank_init registers with spank_option_register()"

# 3. One task on each of the four nodes.
is "$(srun_t -N 4 -n 4 printenv SLURMD_NODENAME | sort | tr '\n' ' ')" "n1 n2 n3 n4 " \
	"srun -N 4 -n 4 runs one task on each of n1..n4"

# 4. gres/gpu binds the fake devices as it would real ones.
is "$(srun_t -n 1 --gres=gpu:2 printenv CUDA_VISIBLE_DEVICES)" "0,1" \
	"--gres=gpu:2 gives the task CUDA_VISIBLE_DEVICES=0,1"

# 5-6. The plugin sets DPTRAIN_RUN in the task with the flag, only then.
is "$(srun_t --dp-train=myrun -n 1 printenv DPTRAIN_RUN 2>&1)" "myrun" \
	"srun --dp-train=myrun: the task sees DPTRAIN_RUN=myrun"
is "$(srun_t -n 1 sh -c 'echo "run=${DPTRAIN_RUN-unset}"' 2>&1)" "run=unset" \
	"without --dp-train the task has no DPTRAIN_RUN"

# 7. up on a running cluster changes nothing.
ctld=$(cat "$dir/run/slurmctld.pid")
DPTRAIN_CLUSTER_DIR=$dir bash "$top_srcdir/tests/cluster/up" >/dev/null 2>&1
rc=$?
[ $rc = 0 ] && [ "$(cat "$dir/run/slurmctld.pid" 2>/dev/null)" = "$ctld" ] && kill -0 "$ctld"
ok $? "up again while running: exit 0, same slurmctld" || diag "up exited $rc"

# 8. down with a job running on every node: the job is cancelled, and no
# daemon, slurmstepd or task of this cluster is left, zombies included.
tag=299.$$
task_re="^(/usr)?/bin/sleep $tag\$" # the tasks, not srun nor timeout
timed srun -N 4 -n 4 /bin/sleep "$tag" >/dev/null 2>&1 &
srun_pid=$!
four_tasks() { [ "$(pgrep -fc "$task_re")" = 4 ]; }
wait_for 30 four_tasks
running=$(pgrep -fc "$task_re")
daemons=$(cat "$dir"/run/*.pid | tr '\n' ' ')
# slurmd, slurmctld and every slurmstepd carry the cluster's mark.
marked=$(grep -lzxF "DPTRAIN_CLUSTER_DAEMON=$dir" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | tr '\n' ' ')
cluster_down
wait "$srun_pid" 2>/dev/null
left=
for pid in $daemons $marked; do
	[ -e "/proc/$pid" ] && left="$left $pid($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null))"
done
left="$left$(pgrep -af -- "$dir/" | tr '\n' ' ')"
left="$left$(pgrep -af "sleep $tag\$" | tr '\n' ' ')" # srun too
left="$left$(grep -lzxF "DPTRAIN_CLUSTER_DAEMON=$dir" /proc/[0-9]*/environ 2>/dev/null | tr '\n' ' ')"
[ "$running" = 4 ] && [ -n "$daemons" ] && [ -z "$left" ]
ok $? "down stops the daemons ($daemons), the job's steps and tasks" ||
	diag "tasks running before down: $running of 4; left after down:$left"

# 9-11. down is idempotent and up works again after it.
DPTRAIN_CLUSTER_DIR=$dir bash "$top_srcdir/tests/cluster/down" >/dev/null 2>&1
ok $? "down again: exit 0"
out=$(DPTRAIN_CLUSTER_DIR=$dir INSTALL=0 bash "$top_srcdir/tests/cluster/up" 2>&1)
ok $? "up after down: exit 0" || diag "$out"
is "$(srun_t -N 4 -n 4 printenv SLURMD_NODENAME 2>&1 | sort | tr '\n' ' ')" "n1 n2 n3 n4 " \
	"the cluster started again runs tasks on n1..n4"

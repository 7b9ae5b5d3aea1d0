#!/bin/bash
# libdptrain programs under srun --dp-train on the real test cluster: the
# plugin's coordinator gives them ranks and a communicator across nodes,
# and when a task dies the survivors hear of it within seconds although the
# site's heartbeat timeout is long: the plugin reports the task's exit.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_root
require_built worker tests/coord/coord_worker
# A 30 s timeout: a failure noticed in under 3 s did not wait for it.
conf_cluster_up $'timeout_ms = 30000\n' NODES=2 CPUS=4 GPUS=0
plan 5

# 1-2. Four workers on two nodes: dense ranks, every collective checked.
out=$(srun_t -N 2 -n 4 --ntasks-per-node=2 --dp-train "$worker" run 2>&1)
ok $? "srun -N 2 -n 4 --dp-train coord_worker run exits 0" || diag "$out"
is "$(grep -o '^ok rank=[0-9]*' <<<"$out" | sort | tr '\n' ' ')" \
	"ok rank=0 ok rank=1 ok rank=2 ok rank=3 " \
	"ranks 0..3 each checked every collective" || diag "$out"

# 3-5. Task 3 is killed while the others train: they get an error at once,
# and srun reports the failed step.
script='if [ "$RANK" = 3 ]; then "$0" loop & p=$!; sleep 2; kill -9 $p; wait $p; exit; fi; exec "$0" loop'
rc=0
start=$(date +%s%N)
out=$(srun_t -N 2 -n 4 --ntasks-per-node=2 --dp-train --kill-on-bad-exit=0 \
	sh -c "$script" "$worker" 2>&1) || rc=$?
[ "$rc" != 0 ]
ok $? "a step with a killed task fails (exit status $rc)" || diag "$out"
killed=$(grep -o 'error=[A-Z_]* t=[0-9]* rank=[012]$' <<<"$out")
is "$(wc -l <<<"$killed" | tr -d ' ')" "3" "the three survivors got an error" || diag "$out"
# Each survivor printed the wall clock of its error; the kill came 2 s after
# the start at the earliest, so an error within start + 5 s is under 3 s.
late=$(awk -v s="$start" '{ split($2, t, "="); if (t[2] - s > 5e9) print }' <<<"$killed")
is "$late" "" "every survivor got its error within 3 s of the kill" || diag "$out"

#!/bin/bash
# The task environment of a --dp-train step: the rank contract PyTorch and
# Lightning read, every GPU of the node visible, one coordinator per step (two
# steps on one node get their own coordinator and MASTER_PORT), and no
# coordinator left after the step, also when srun is killed.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
cluster_up NODES=2 CPUS=8 GPUS=4
plan 15

# srun's plugin makes its coordinator's run directory under TMPDIR: a
# directory of this test's own tells its coordinators from those of tests
# running at the same time.
TMPDIR=$(mktemp -d /tmp/dptrain-env-tmp.XXXXXX) || bail_out "mktemp failed"
export TMPDIR
coordinators() { pgrep -f -- "dptrain-coordinator .*--endpoint-file $TMPDIR/" | tr '\n' ' '; }
show='echo "node=$SLURMD_NODENAME rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK lws=$LOCAL_WORLD_SIZE noderank=$NODE_RANK master=$MASTER_ADDR:$MASTER_PORT coord=$DPTRAIN_COORDINATOR gpu=$CUDA_VISIBLE_DEVICES restart=$DPTRAIN_RESTART_COUNT mtbf=$DPTRAIN_MTBF min=$DPTRAIN_MIN_CKPT_INTERVAL"'

out=$(srun_t -N 2 --ntasks-per-node=4 --gres=gpu:4 --dp-train=envtest sh -c "$show" 2>&1)
ok $? "srun -N 2 -n 8 --dp-train runs" || diag "$out"
field() { grep -o " $1=[^ ]*" <<<"$out" | cut -d= -f2-; }

is "$(field rank | sort -n | tr '\n' ' ')" "0 1 2 3 4 5 6 7 " "RANK is 0..7, each once"
is "$(field world | sort -u)" "8" "WORLD_SIZE=8 everywhere"
is "$(grep node=n1 <<<"$out" | grep -o ' local=[0-9]*' | sort | tr '\n' ' ')" \
	" local=0  local=1  local=2  local=3 " "LOCAL_RANK 0..3 on n1"
is "$(grep node=n2 <<<"$out" | grep -o ' local=[0-9]*' | sort | tr '\n' ' ')" \
	" local=0  local=1  local=2  local=3 " "LOCAL_RANK 0..3 on n2"
is "$(field lws | sort -u)$(field noderank | sort -u | tr '\n' ' ')" "40 1 " "LOCAL_WORLD_SIZE=4, NODE_RANK 0 and 1"
masters=$(field master | sort -u)
rank0_node=$(grep ' rank=0 ' <<<"$out" | grep -o 'node=[^ ]*' | cut -d= -f2)
[ "$(wc -l <<<"$masters")" = 1 ] && [[ "$masters" =~ ^[0-9.]+:[0-9]+$ ]] && [ "$rank0_node" = n1 ]
ok $? "one MASTER_ADDR:MASTER_PORT for all ranks ($masters), rank 0 on n1" || diag "$out"
is "$(grep node=n1 <<<"$out" | grep -o ' gpu=[0-9,]*' | sort | tr '\n' ' ')" \
	" gpu=0,1,2,3  gpu=0,1,2,3  gpu=0,1,2,3  gpu=0,1,2,3 " \
	"each task sees every GPU of its node, as under torchrun (tests/spank/gpus.sh: binding)"
is "$(field restart | sort -u)" "0" "DPTRAIN_RESTART_COUNT=0 on the first run"
is "$(field mtbf | sort -u) $(field min | sort -u)" "1296000 0" \
	"DPTRAIN_MTBF: the default 30 days of a node over the step's 2 nodes; no DPTRAIN_MIN_CKPT_INTERVAL floor"
is "$(coordinators)" "" "no coordinator is left after the step"

# Two steps at once on the same node: each its own coordinator and port.
a=$(mktemp) b=$(mktemp)
srun_t -N 1 -w n1 -n 2 --dp-train=A sh -c "$show; sleep 2" >"$a" 2>&1 &
pa=$!
srun_t -N 1 -w n1 -n 2 --dp-train=B sh -c "$show; sleep 2" >"$b" 2>&1 &
pb=$!
wait $pa
ra=$?
wait $pb
rb=$?
ma=$(grep -o 'master=[^ ]*' "$a" | sort -u) mb=$(grep -o 'master=[^ ]*' "$b" | sort -u)
ca=$(grep -o 'coord=[^ ]*' "$a" | sort -u) cb=$(grep -o 'coord=[^ ]*' "$b" | sort -u)
[ $ra = 0 ] && [ $rb = 0 ] && [ -n "$ma" ] && [ -n "$mb" ] && [ "$ma" != "$mb" ] && [ "$ca" != "$cb" ]
ok $? "two steps on one node at once: both run, different coordinators and MASTER_PORTs" ||
	diag "A (exit $ra):" "$(cat "$a")" "B (exit $rb):" "$(cat "$b")"
rm -f "$a" "$b"

# srun killed with SIGKILL: its coordinator goes too.
srun_t -N 1 -n 1 --dp-train=killed sleep 30 >/dev/null 2>&1 &
has_coordinator() { [ -n "$(coordinators)" ]; }
no_coordinator() { [ -z "$(coordinators)" ]; }
wait_for 30 has_coordinator
before=$(coordinators)
srun_pid=$(cluster_pgrep "srun -N 1 -n 1 --dp-train=killed")
kill -9 $srun_pid 2>/dev/null
wait_for 20 no_coordinator
[ -n "$before" ] && [ -n "$srun_pid" ]
ok $? "a coordinator ran for the step ($before)"
is "$(coordinators)" "" "kill -9 of srun: the coordinator exits too"
scancel --name=killed 2>/dev/null
wait 2>/dev/null

# Without --dp-train, nothing of ours is in the task's environment.
is "$(srun_t -n 1 sh -c 'env | grep -v "^DPTRAIN_CLUSTER_" | grep -c -E "^(DPTRAIN_|MASTER_|RANK=)"; true' 2>&1)" "0" \
	"without --dp-train the task environment is untouched"
rm -rf "$TMPDIR"

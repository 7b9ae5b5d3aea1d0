#!/bin/bash
# The NCCL backend on real GPUs, through dptrain's relay of the NCCL
# unique ID: a dptrain-coordinator started by hand (as tests/coord does;
# no Slurm) and tests/gpu/gpu_coll workers with the environment that
# `srun --dp-train` gives them, one GPU each (SLURM_LOCALID picks it).
# - World size 1 on one GPU (NCCL refuses two ranks on one GPU), and the
#   largest world the machine's GPUs allow (up to 8) when it has 2 or
#   more: allreduce, broadcast and allgather of device buffers of every
#   dtype and of staged host buffers, against results computed on the host.
# - With 2 or more GPUs, a rank killed in the middle of a loop of
#   allreduces: the others' collective fails within a bound (no hang in
#   NCCL), they rejoin a generation of one rank less and pass every check
#   in it.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

coordinator=$top_builddir/coordinator/dptrain-coordinator
worker=$top_builddir/tests/gpu/gpu_coll
[ -x "$coordinator" ] || bail_out "$coordinator is not built"
[ -x "$worker" ] || skip_all "$worker is not built (configure found no CUDA)"
require_prog timeout od

plan 7
# The checks of 2 or more GPUs, skipped for the reason WHY; the test ends.
skip_multi_gpu() { # WHY
	skip "world size 2+: every worker exits 0" "$1"
	skip "world size 2+: every collective of every dtype matches the host's result" "$1"
	skip "rejoin: the survivors' collective fails (DPT_EPEERLOST or DPT_EGENERATION), no hang" "$1"
	skip "rejoin: the survivors join a generation of one rank less" "$1"
	skip "rejoin: every check passes in the new generation" "$1"
	exit 0
}
probe=$("$worker" --probe 2>&1) || probe="gpus=0 error=gpu_coll --probe failed: $probe"
gpus=$(sed -n 's/^gpus=\([0-9]*\).*/\1/p' <<<"$probe")
gpus=${gpus:-0}
diag "$probe"
if [ "$gpus" = 0 ]; then
	why="no usable GPU (${probe#*error=})"
	skip "world size 1: every worker exits 0" "$why"
	skip "world size 1: every collective of every dtype matches the host's result" "$why"
	skip_multi_gpu "$why"
fi

dpt_scratch_dir dir gpu
pids=()
coord_pid=
# pids holds the timeout(1) processes: each leads a process group of its
# own with its worker (timeout's setpgid), which SIGKILL to the timeout
# alone would leave running, holding its GPU, until the worker's own end.
stop_all() {
	local p
	for p in "${pids[@]}"; do
		kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true
	done
	[ -z "$coord_pid" ] || kill -KILL "$coord_pid" 2>/dev/null || true
}
trap 'stop_all; dpt_teardown' EXIT

# coordinator WORLD MIN: a coordinator for WORLD workers, MIN of whom keep
# the job going; sets ep and secret.
coordinator_start() {
	secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
	(umask 077 && echo "$secret" >"$dir/secret")
	rm -f "$dir/endpoint"
	"$coordinator" --world-size "$1" --min-workers "$2" \
		--bind 'tcp://127.0.0.1:*' --advertise 127.0.0.1 \
		--secret-file "$dir/secret" --endpoint-file "$dir/endpoint" \
		--timeout-ms 1500 --join-timeout-ms 30000 --parent-pid $$ \
		--log-level info >"$dir/coord.$1.log" 2>&1 &
	coord_pid=$!
	for _ in $(seq 100); do
		[ -s "$dir/endpoint" ] && break
		sleep 0.1
	done
	ep=$(cat "$dir/endpoint" 2>/dev/null) || bail_out "the coordinator did not start: $(cat "$dir/coord.$1.log")"
}

# workers PREFIX N ARG...: N workers, worker I on GPU I.
workers_start() {
	local prefix=$1 n=$2 i
	shift 2
	pids=()
	for ((i = 0; i < n; i++)); do
		DPTRAIN_COORDINATOR=$ep DPTRAIN_SECRET=$secret DPTRAIN_BACKEND=nccl \
			SLURM_NODEID=0 SLURM_LOCALID=$i SLURM_PROCID=$i \
			timeout -k 5 "${DPT_TIMEOUT:-120}" "$worker" "$@" >"$dir/$prefix.$i" 2>&1 &
		pids+=($!)
	done
}
workers_wait() { # status: the number of workers that failed
	local started=("${pids[@]}")
	pids=()
	wait_all "${started[@]}"
}
show() { # PREFIX: the workers' outputs, less the passing checks
	local f
	for f in "$dir/$1".*; do
		diag "== $f" "$(grep -v ' ok$' "$f" | tail -n 40)"
	done
}

world_checks() { # WORLD
	local w=$1 rc=0
	coordinator_start "$w" "$w"
	workers_start "w$w" "$w"
	workers_wait || rc=$?
	ok $rc "world size $w: every worker exits 0" || show "w$w"
	is "$(cat "$dir/w$w".* | grep -c "^done checks=[1-9][0-9]* failures=0$")" "$w" \
		"world size $w: every collective of every dtype matches the host's result" || show "w$w"
	diag "$(grep -h '^joined' "$dir/w$w".*)" "$(grep -h '^done' "$dir/w$w".* | head -n 1)"
	kill "$coord_pid" 2>/dev/null || true
	wait "$coord_pid" 2>/dev/null || true
	coord_pid=
}

world_checks 1
if [ "$gpus" -lt 2 ]; then
	skip_multi_gpu "one GPU: NCCL refuses two ranks on one GPU"
fi
world=$((gpus > 8 ? 8 : gpus))
world_checks "$world"

# Rejoin: WORLD ranks loop on allreduces; the last one is killed.
coordinator_start "$world" $((world - 1))
workers_start rj "$world" --rejoin
for _ in $(seq 600); do
	[ "$(cat "$dir"/rj.* | grep -c '^looping')" = "$world" ] && break
	sleep 0.1
done
# The worker itself, not the timeout(1) that runs it.
victim=$(sed -n 's/^looping pid=\([0-9]*\)$/\1/p' "$dir/rj.$((world - 1))")
[ -n "$victim" ] || bail_out "worker $((world - 1)) never looped: $(cat "$dir/rj.$((world - 1))")"
kill -KILL "$victim"
timeout_pid=${pids[$((world - 1))]}
unset "pids[$((world - 1))]"
wait "$timeout_pid" 2>/dev/null || true
rc=0
workers_wait || rc=$?
lost=$(cat "$dir"/rj.* | grep -c '^lost error=DPT_E\(PEERLOST\|GENERATION\) ')
ok $([ "$lost" = $((world - 1)) ] && echo 0 || echo 1) \
	"rejoin: the survivors' collective fails (DPT_EPEERLOST or DPT_EGENERATION), no hang" || show rj
is "$(cat "$dir"/rj.* | grep -c "^rejoined rank=[0-9]* world=$((world - 1)) ")" $((world - 1)) \
	"rejoin: the survivors join a generation of one rank less" || show rj
is "$rc/$(cat "$dir"/rj.* | grep -c '^done checks=[1-9][0-9]* failures=0$')" "0/$((world - 1))" \
	"rejoin: every check passes in the new generation" || show rj
diag "$(grep -h '^lost\|^rejoined' "$dir"/rj.*)"

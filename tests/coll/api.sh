#!/bin/bash
# The collectives as a training program sees them: a real
# dptrain-coordinator and 2, 3 and 4 worker processes (tests/coll/api)
# that join it through libdptrain's public API, some from the environment
# that `srun --dp-train` sets, some from explicit dpt_init options. Every
# worker checks allreduce (sum, average), broadcast and allgather, in
# place and out of place, for float32, float64, bfloat16 and float16, from
# 1 element to 64 MiB, counts that are no multiple of the world size
# included, exactly against a reference it computes itself; then a
# boolean allreduce: the average refused with a logged reason, the
# generation going on, the sum a logical or.
#
# One machine plays several nodes: a worker's node is its SLURM_NODEID (or
# --node), so the layouts below cover shared memory alone, the TCP ring
# alone, and both.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

coordinator=$top_builddir/coordinator/dptrain-coordinator
worker=$top_builddir/tests/coll/api
[ -x "$coordinator" ] || skip_all "$coordinator is not built (run make)"
[ -x "$worker" ] || skip_all "$worker is not built (run make check)"
require_prog timeout od

# Checks per worker and collective: 4 dtypes x (5 sizes x 2 variants + the
# 64 MiB size once). tests/coll/api.c's main() and check_all() say which.
per_collective=44
collectives="allreduce-sum allreduce-avg broadcast allgather"

# One layout per line: how workers get their settings (env or options),
# then NODE:LOCAL_RANK of each worker in the order they start.
layouts=(
	"env 0:0 0:1"
	"options 0:0 1:0"
	"options 0:1 1:0 0:0"
	"env 1:0 0:0 1:1 0:1"
)
plan $((${#layouts[@]} * 8))

dir=$(dpt_state_dir coll) || exit 1
secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
(umask 077 && echo "$secret" >"$dir/secret")

# The rank a worker must get: generations order ranks by node, then
# local rank (doc/protocol.md).
expected_rank() { # NODE:LOCAL ALL...
	local me=$1 r=0 x
	shift
	for x in "$@"; do
		if [ "${x%:*}" -lt "${me%:*}" ] ||
			{ [ "${x%:*}" = "${me%:*}" ] && [ "${x#*:}" -lt "${me#*:}" ]; }; then
			r=$((r + 1))
		fi
	done
	echo "$r"
}

run_layout() { # MODE NODE:LOCAL...
	local mode=$1
	shift
	local n=$# what k spec node local pid ep rc out want got bad
	local -a pids=() status=()
	what="$n workers, nodes:local ranks $*, settings from $mode"
	local log=$dir/$n-$mode

	rm -f "$log".*
	timed "$coordinator" --world-size "$n" --bind 'tcp://127.0.0.1:*' \
		--secret-file "$dir/secret" --endpoint-file "$log.endpoint" \
		--join-timeout-ms 60000 --parent-pid $$ \
		>"$log.coordinator.out" 2>"$log.coordinator.err" &
	pid=$!
	for _ in $(seq 100); do
		[ -s "$log.endpoint" ] && break
		sleep 0.1
	done
	ep=$(cat "$log.endpoint" 2>/dev/null)
	[ -n "$ep" ] || {
		diag "$(cat "$log.coordinator.err")"
		bail_out "the coordinator wrote no endpoint in 10 s"
	}

	k=0
	for spec; do
		node=${spec%:*} local=${spec#*:}
		if [ "$mode" = env ]; then
			DPTRAIN_COORDINATOR=$ep DPTRAIN_SECRET=$secret \
				DPTRAIN_BACKEND=cpu SLURM_NODEID=$node \
				SLURM_LOCALID=$local timed "$worker" \
				>"$log.$k.out" 2>"$log.$k.err" &
		else
			env -u DPTRAIN_COORDINATOR -u DPTRAIN_SECRET \
				-u DPTRAIN_BACKEND -u SLURM_NODEID \
				-u SLURM_LOCALID -u LOCAL_RANK \
				timeout -k 5 "${DPT_TIMEOUT:-60}" "$worker" \
				--coordinator "$ep" --secret "$secret" \
				--backend cpu --node "$node" --local-rank "$local" \
				>"$log.$k.out" 2>"$log.$k.err" &
		fi
		pids+=($!)
		k=$((k + 1))
	done
	for k in "${!pids[@]}"; do
		rc=0
		wait "${pids[$k]}" || rc=$?
		status+=("$rc")
	done
	rc=0
	wait "$pid" || rc=$?

	# Ranks: dense, in node order, one generation, the CPU backend.
	want="" got=""
	k=0
	for spec; do
		want+="worker $k: joined rank=$(expected_rank "$spec" "$@") world=$n local_rank=${spec#*:} generation=1 backend=cpu"$'\n'
		got+="worker $k: $(grep -h '^joined\|^init' "$log.$k.out")"$'\n'
		k=$((k + 1))
	done
	is "$got" "$want" "$what: ranks dense and ordered by node, then local rank"

	for coll in $collectives; do
		bad=""
		for k in "${!pids[@]}"; do
			out=$(grep "^check $coll " "$log.$k.out")
			if grep -q ' FAIL' <<<"$out"; then
				bad+="worker $k: $(grep ' FAIL' <<<"$out" | head -n 3)"$'\n'
			elif [ "$(grep -c ' ok$' <<<"$out")" != "$per_collective" ]; then
				bad+="worker $k: $(grep -c ' ok$' <<<"$out") checks passed, want $per_collective"$'\n'
			fi
		done
		ok "$([ -z "$bad" ]; echo $?)" "$what: $coll exact ($per_collective checks per worker)" ||
			diag "$bad"
	done

	bad=""
	for k in "${!pids[@]}"; do
		grep -q '^check refuse-bool-avg ok$' "$log.$k.out" &&
			grep -q '^check bool-or ok$' "$log.$k.out" &&
			grep -q 'cannot allreduce dtype 7 with op 1: a boolean has no average' "$log.$k.err" ||
			bad+="worker $k: $(grep -h 'bool' "$log.$k.out" "$log.$k.err")"$'\n'
	done
	ok "$([ -z "$bad" ]; echo $?)" "$what: bool avg refused with its reason, bool sum a logical or" ||
		diag "$bad"

	bad=""
	for k in "${!pids[@]}"; do
		[ "${status[$k]}" = 0 ] ||
			bad+="worker $k exited with ${status[$k]}: $(tail -n 3 "$log.$k.out" "$log.$k.err")"$'\n'
	done
	ok "$([ -z "$bad" ]; echo $?)" "$what: every worker finished and left" || diag "$bad"
	is "$rc" 0 "$what: the coordinator exited 0 once all had left" ||
		diag "$(tail -n 5 "$log.coordinator.err")"
}

for layout in "${layouts[@]}"; do
	# shellcheck disable=SC2086
	run_layout $layout
done
if [ "$tap_failed" = 0 ] && [ "${DPT_KEEP:-0}" != 1 ]; then
	rm -rf "$dir"
else
	diag "logs kept in $dir"
fi

# tests/coord/lib.sh: what the coordinator's integration tests share, on
# top of tests/lib.sh. A real dptrain-coordinator and real worker processes
# (tests/coord/coord_worker, linked with libdptrain) on loopback:
#
#   . "$top_srcdir/tests/lib.sh"
#   . "$top_srcdir/tests/coord/lib.sh"
#   coord_start 4 --min-workers 3     # secret, endpoint, log; stopped at exit
#   worker_start w0 NODE LOCAL TASK run
#   worker_wait w0 20                 # exit status, or 124 after 20 s
#
# Every process started here is killed (by its pid) when the test exits;
# the state directory (logs, worker outputs) is kept when a check failed.

coord_bin=$top_builddir/coordinator/dptrain-coordinator
coord_worker=$top_builddir/tests/coord/coord_worker
[ -x "$coord_bin" ] || skip_all "build the coordinator first ($coord_bin)"
[ -x "$coord_worker" ] || skip_all "build the test worker first (make check builds $coord_worker)"

coord_dir=$(dpt_state_dir coord) || exit 1
coord_pids=()
declare -A worker_pid=()

coord_teardown() {
	local rc=$? pid
	for pid in "${worker_pid[@]}" "${coord_pids[@]}"; do
		kill -KILL "$pid" 2>/dev/null
	done
	wait 2>/dev/null
	if [ "$tap_failed" -gt 0 ] || { [ "$rc" != 0 ] && [ "$rc" != 77 ]; } ||
		{ [ -n "$tap_planned" ] && [ "$tap_count" != "$tap_planned" ]; } ||
		[ "${DPT_KEEP:-0}" = 1 ]; then
		diag "coordinator and worker logs kept in $coord_dir"
		tail -n 30 "$coord_dir"/*.log 2>/dev/null | sed 's/^/# /'
	else
		rm -rf "$coord_dir"
	fi
	(exit "$rc")
	dpt_teardown
}
trap coord_teardown EXIT

new_secret() { # a fresh step secret: 64 hex characters
	od -An -N32 -tx1 /dev/urandom | tr -d ' \n'
}

now_ns() { date +%s%N; }

# coord_start WORLD [OPTION...]: start a coordinator for WORLD workers on
# loopback with a new secret; sets coord_pid, coord_log, coord_port and
# exports DPTRAIN_COORDINATOR and DPTRAIN_SECRET for the workers.
coord_seq=0
coord_started() { # the endpoint is written, or the coordinator is gone
	[ -s "$coord_dir/endpoint" ] || ! kill -0 "$coord_pid" 2>/dev/null
}
coord_start() {
	local world=$1 i
	shift
	coord_seq=$((coord_seq + 1))
	coord_log=$coord_dir/coordinator$coord_seq.log
	DPTRAIN_SECRET=$(new_secret)
	export DPTRAIN_SECRET
	rm -f "$coord_dir/endpoint"
	"$coord_bin" --world-size "$world" --bind 'tcp://127.0.0.1:*' \
		--endpoint-file "$coord_dir/endpoint" "$@" \
		>"$coord_dir/coordinator$coord_seq.out" 2>"$coord_log" &
	coord_pid=$!
	coord_pids+=("$coord_pid")
	wait_for 30 coord_started
	[ -s "$coord_dir/endpoint" ] || { diag "$(cat "$coord_log")"; bail_out "the coordinator did not start"; }
	DPTRAIN_COORDINATOR=$(cat "$coord_dir/endpoint")
	export DPTRAIN_COORDINATOR
	coord_port=${DPTRAIN_COORDINATOR##*:}
}

# coord_wait SECONDS: the coordinator's exit status, or 124 if it still
# runs after SECONDS (it is then killed).
coord_wait() {
	pid_wait "$coord_pid" "$1"
}
# coord_exits STATUS DESCRIPTION: a check that the coordinator exits with
# STATUS within 10 s.
coord_exits() {
	local rc=0
	coord_wait 10 || rc=$?
	is "$rc" "$1" "$2"
}

pid_wait() { # PID SECONDS
	local pid=$1 i rc=0
	for ((i = 0; i < $2 * 20; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		return 124
	fi
	wait "$pid" 2>/dev/null || rc=$?
	return "$rc"
}

# worker_start NAME NODE LOCAL_RANK TASK ARG...: one coord_worker process
# with the environment the SPANK plugin would give it; its output goes to
# $coord_dir/NAME.out and its log to NAME.log.
worker_start() {
	local name=$1 node=$2 lr=$3 task=$4
	shift 4
	SLURM_NODEID=$node SLURM_LOCALID=$lr SLURM_PROCID=$task \
		DPTRAIN_BACKEND=cpu DPTRAIN_DATA_HOST=127.0.0.1 \
		"$coord_worker" "$@" >"$coord_dir/$name.out" 2>"$coord_dir/$name.log" &
	worker_pid[$name]=$!
}

worker_wait() { # NAME SECONDS: its exit status, 124 if it had to be killed
	local rc=0
	pid_wait "${worker_pid[$1]}" "$2" || rc=$?
	unset "worker_pid[$1]"
	return "$rc"
}

worker_out() { cat "$coord_dir/$1.out" 2>/dev/null; }

# all_joined PREFIX N: workers PREFIX0..PREFIX(N-1) have printed "joined".
all_joined() { # PREFIX N
	local i
	for ((i = 0; i < $2; i++)); do
		grep -q '^joined' "$coord_dir/$1$i.out" 2>/dev/null || return 1
	done
}

# field NAME LINE: the value of NAME=VALUE in LINE.
field() {
	local w
	for w in $2; do
		[ "${w%%=*}" = "$1" ] && { echo "${w#*=}"; return; }
	done
}

# tests/ckpt/lib.sh: jobs of real worker processes on loopback for the
# checkpoint tests. A job is a real dptrain-coordinator and N real
# tests/ckpt/ckpt_worker processes (the CPU backend), as srun --dp-train
# would start them, without Slurm.
#
#   ckpt_job N OUT ARGS...   run a job of N workers with ARGS; worker I's
#                            output (stdout and stderr) goes to OUT.I; the
#                            status is the number of workers that failed
#   ckpt_job_start N OUT ARGS...   the same, in the background: the pids
#                            are in ckpt_pids, then ckpt_job_wait
#   ckpt_program=PROGRAM     run PROGRAM instead of ckpt_worker (the
#                            training loop, tests/ckpt/train_loop)
#   ckpt_join_ms=MS          the coordinator's join timeout (default 20000:
#                            more for workers that import torch first)
#   ckpt_python_job N OUT SCRIPT ARGS...   ckpt_job of N Python ranks
#                            running SCRIPT with $py (require_python), given
#                            the time that importing torch takes
# shellcheck shell=bash

ckpt_worker=$top_builddir/tests/ckpt/ckpt_worker
ckpt_coordinator=$top_builddir/coordinator/dptrain-coordinator
ckpt_tool=$top_builddir/dptrain
[ -x "$ckpt_worker" ] || bail_out "$ckpt_worker is not built (make check builds it)"
[ -x "$ckpt_coordinator" ] || bail_out "$ckpt_coordinator is not built"
[ -x "$ckpt_tool" ] || bail_out "$ckpt_tool is not built"
require_prog timeout od
# The jobs here are not the caller's: no Slurm job or log level of its own
# reaches the workers.
unset DPTRAIN_LOG_LEVEL SLURM_RESTART_COUNT SLURM_JOB_ID

ckpt_dir=$(dpt_state_dir ckpt) || exit 1
# Where a test saves (file://$root; a test on other storage sets its own
# $root), its run's directory, and the prefix of its jobs' output files.
root=$ckpt_dir/root
run=$root/run
out=$ckpt_dir/job
ckpt_coord_pids=()
ckpt_pids=()
# Kills what the test started and waits for it: then nothing holds a file
# open under $ckpt_dir (a file system mounted there can be unmounted).
ckpt_kill() {
	local p
	# ckpt_pids are timeout(1) processes, each the leader of a process
	# group with its worker: SIGKILL to the timeout alone would leave the
	# worker running until its own end.
	for p in "${ckpt_pids[@]}"; do
		kill -9 -- "-$p" 2>/dev/null || kill -9 "$p" 2>/dev/null || true
	done
	for p in "${ckpt_coord_pids[@]}"; do
		kill -9 "$p" 2>/dev/null || true
	done
	for p in "${ckpt_pids[@]}" "${ckpt_coord_pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
}
ckpt_cleanup() {
	ckpt_kill
	if [ "$tap_failed" = 0 ] && [ "${DPT_KEEP:-0}" != 1 ]; then
		rm -rf "$ckpt_dir"
	else
		diag "checkpoint test state kept in $ckpt_dir"
	fi
}
# Runs before the library's teardown (which exits).
trap 'ckpt_cleanup; dpt_teardown' EXIT

ckpt_job_start() { # N OUT ARGS...
	local n=$1 out=$2 i secret ep
	shift 2
	secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
	(umask 077 && echo "$secret" >"$out.secret")
	rm -f "$out.endpoint"
	"$ckpt_coordinator" --world-size "$n" --bind 'tcp://127.0.0.1:*' \
		--advertise 127.0.0.1 --secret-file "$out.secret" \
		--endpoint-file "$out.endpoint" --timeout-ms 1500 \
		--join-timeout-ms "${ckpt_join_ms:-20000}" --parent-pid $$ --log-level warn \
		>"$out.coord" 2>&1 &
	ckpt_coord_pids+=($!)
	for i in $(seq 50); do
		[ -s "$out.endpoint" ] && break
		sleep 0.1
	done
	ep=$(cat "$out.endpoint" 2>/dev/null) || bail_out "the coordinator did not start: $(cat "$out.coord")"
	ckpt_pids=()
	for ((i = 0; i < n; i++)); do
		DPTRAIN_COORDINATOR=$ep DPTRAIN_SECRET=$secret DPTRAIN_BACKEND=${ckpt_backend:-cpu} \
			SLURM_NODEID=0 SLURM_LOCALID=$i SLURM_PROCID=$i \
			timeout -k 5 "${DPT_TIMEOUT:-60}" "${ckpt_program:-$ckpt_worker}" "$@" >"$out.$i" 2>&1 &
		ckpt_pids+=($!)
	done
}
ckpt_job_wait() { # prints nothing; status: workers that failed
	local pids=("${ckpt_pids[@]}")
	ckpt_pids=()
	wait_all "${pids[@]}"
}
ckpt_job() { # N OUT ARGS...
	ckpt_job_start "$@"
	ckpt_job_wait
}
ckpt_python_job() { # N OUT SCRIPT ARGS...
	ckpt_program=$py ckpt_join_ms=120000 DPT_TIMEOUT=180 ckpt_job "$@"
}
# The lines of every worker's output matching PATTERN, sorted.
ckpt_grep() { # OUT PATTERN
	cat "$1".[0-9]* | grep -E -- "$2" | sort
}

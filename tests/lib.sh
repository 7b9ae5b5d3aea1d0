# tests/lib.sh: what every integration test (a bash script printing TAP)
# shares. A test sources it, states what it needs, starts its test beds,
# then plans and checks:
#
#   . "$top_srcdir/tests/lib.sh"
#   require_root
#   require_prog srun
#   cluster_up NODES=2          # own state dir and ports; torn down at exit
#   plan 1
#   is "$(srun_t -n1 printenv SLURM_NNODES)" 1 "one node"
#
# A requirement that is missing ends the test with "1..0 # SKIP reason" and
# exit status 77 (tests/run-tap.sh turns 77 into success for the harness), so
# it must be stated before plan. The harness exports top_srcdir and
# top_builddir as absolute paths; a test run by hand gets them from the
# location of this file (then the source tree is the build tree).
#
# Environment knobs: DPT_TIMEOUT (seconds allowed to each srun, sbatch and
# timed command, default 60), DPT_TEST_TMPDIR (where the test beds' state
# directories go, default /tmp: Slurm's Unix sockets live there and must stay
# short), DPT_KEEP=1 (keep the state directories even when all passed; they
# are always kept when something failed).

if [ -z "${BASH_VERSION:-}" ]; then
	echo "Bail out! tests/lib.sh needs bash"
	exit 1
fi

if [ -z "${top_srcdir:-}" ]; then
	top_srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fi
top_builddir=${top_builddir:-$top_srcdir}
export top_srcdir top_builddir
# The test beds' port lock (s3_hold_port).
# shellcheck source=tests/beds.sh
. "$top_srcdir/tests/beds.sh"

# ---------------------------------------------------------------- TAP
tap_count=0
tap_failed=0
tap_planned=
# DPT_TAP_NAME: a wrapper that runs this test again in another setting
# (tests/python/torch2/) names its state directories and files apart.
tap_name=${DPT_TAP_NAME:-$(basename "$0" .sh)}

plan() { # N
	tap_planned=$1
	echo "1..$1"
}
diag() { # LINE...: each argument, and each line in it, as a TAP comment
	local line
	printf '%s\n' "$@" | while IFS= read -r line; do echo "# $line"; done
}
ok() { # STATUS DESCRIPTION: passes when STATUS is 0
	local status=$1
	shift
	tap_count=$((tap_count + 1))
	if [ "$status" = 0 ]; then
		echo "ok $tap_count - $*"
		return 0
	fi
	tap_failed=$((tap_failed + 1))
	echo "not ok $tap_count - $*"
	return 1
}
not_ok() { # DESCRIPTION: a failure found by the test itself
	ok 1 "$@"
}
is() { # GOT WANT DESCRIPTION: passes when the strings are equal
	if [ "$1" = "$2" ]; then
		ok 0 "$3"
		return 0
	fi
	ok 1 "$3"
	diag "got:" "$1" "want:" "$2"
	return 1
}
# DESCRIPTION COMMAND...: passes when COMMAND succeeds; its output is shown
# only when it fails.
run_ok() {
	local desc=$1 out rc=0
	shift
	out=$("$@" 2>&1) || rc=$?
	ok "$rc" "$desc" && return 0
	diag "command: $*" "exit status $rc, output:" "$out"
	return 1
}
skip() { # DESCRIPTION REASON: a check that cannot run here
	tap_count=$((tap_count + 1))
	echo "ok $tap_count - $1 # SKIP $2"
}
skip_all() { # REASON: the whole test cannot run here (before plan)
	echo "1..0 # SKIP $*"
	exit 77
}
bail_out() { # REASON: the test cannot go on; everything is a failure
	echo "Bail out! $*"
	exit 1
}

# ---------------------------------------------------------------- requirements
require_root() {
	[ "$(id -u)" = 0 ] || skip_all "needs root (it starts slurmctld and slurmd)"
}
require_prog() { # PROGRAM...
	local p
	for p; do
		command -v "$p" >/dev/null 2>&1 || skip_all "'$p' not found on PATH"
	done
}

# The Python of the PyTorch tests: Debian's /usr/bin/python3 (python3-torch
# 1.13, the baseline), or DPT_PYTHON (tests/python/torch2/ sets the torch 2
# venv's). Never the python3 first on PATH: pyenv's has no torch.
# x_rows FILE: the rows X(A, B, "C", ...) of the X-macro tables of a C
# file, one a line, as A, B, C, ... (no quotes): for tests that check
# something against the code's own tables rather than a copy.
x_rows() {
	sed 's/\\$//' "$1" | tr -d '\n\t' | grep -o 'X([A-Z_][A-Z_]*, [^)]*)' |
		sed 's/^X(//; s/)$//; s/"//g; s/  */ /g'
}

python_missing= # why python_has said no
python_has() { # PY MODULE...: whether PY runs and imports each MODULE
	local py=$1 m
	shift
	python_missing=
	"$py" -c '' 2>/dev/null || { python_missing="$py does not run"; return 1; }
	for m; do
		"$py" -c "import $m" 2>/dev/null ||
			{ python_missing="$py cannot import $m (Debian: python3-${m%%.*})"; return 1; }
	done
}
require_python_module() { # PY MODULE...: SKIP unless PY imports each MODULE
	python_has "$@" || skip_all "$python_missing"
}
require_python() { # MODULE...: sets $py (DPT_PYTHON, else Debian's python3); as above
	py=${DPT_PYTHON:-/usr/bin/python3}
	require_python_module "$py" "$@"
}
# A test program of this build tree (make check builds them): sets VAR to
# its path; the test cannot go on without it.
require_built() { # VAR PATH (under the build tree)
	printf -v "$1" %s "$top_builddir/$2"
	[ -x "${!1}" ] || bail_out "${!1} is not built (make check builds it)"
}
# The binding of this tree, for the Python it runs: sets $lib (SKIP
# unless it is built) and exports PYTHONPATH and DPTRAIN_LIBRARY, and
# PYTHONFAULTHANDLER: a Python task that dies of a signal (SIGSEGV,
# SIGABRT) prints every thread's traceback into the test's log.
require_binding() {
	lib=$top_builddir/worker/.libs/libdptrain.so
	[ -f "$lib" ] || skip_all "build libdptrain first ($lib)"
	export PYTHONPATH=$top_srcdir/worker/python DPTRAIN_LIBRARY=$lib PYTHONFAULTHANDLER=1
}
# Fashion-MNIST from Debian's dataset-fashion-mnist: sets $data, SKIP
# without it.
require_fmnist() {
	data=/usr/share/datasets/fashion-mnist
	[ -f "$data/train-images-idx3-ubyte.gz" ] || skip_all "Debian's dataset-fashion-mnist is not installed"
}

# What a test that trains a Fashion-MNIST example of contrib/examples on
# the test cluster needs: root, $py with torch (with "lightning": torch 2
# and Lightning, torch2_lightning), the data and the binding of this tree.
# Sets $check, the checker of the examples' --trace files.
require_fmnist_training() { # [lightning]
	require_root
	if [ "${1:-}" = lightning ]; then
		torch2_lightning
	else
		require_python torch
	fi
	require_fmnist
	require_binding
	check=$top_srcdir/tests/python/fmnist_check.py
}

# ---------------------------------------------------------------- time limits
# A request that the cluster cannot satisfy waits forever: nothing that
# talks to Slurm runs without a limit. -k: a command that ignores SIGTERM
# (srun blocks it during some phases) is killed 5 s later.
timed() { # COMMAND...
	timeout -k 5 "${DPT_TIMEOUT:-60}" "$@"
}
srun_t() { timed srun "$@"; }
# srun_tasks ARGS...: srun_t's stdout and stderr without srun's own "job N
# queued and waiting" lines, for a test that compares the tasks' output.
srun_tasks() { srun_t "$@" 2>&1 | grep -v '^srun: job [0-9]* '; }
sbatch_t() { timed sbatch "$@"; }
# env_has PID NAME=VALUE...: whether process PID's environment holds each.
env_has() {
	local p=$1 v
	shift
	for v; do
		tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF -- "$v" || return 1
	done
}
# cluster_pgrep PATTERN [NAME=VALUE...]: `pgrep -f PATTERN`, only this
# test's cluster's processes (its SLURM_CONF in their environment: srun, its
# coordinator, the tasks), with each NAME=VALUE too. Test beds run side by
# side, with the same job ids and programs.
cluster_pgrep() {
	local p pattern=$1
	shift
	for p in $(pgrep -f -- "$pattern"); do
		env_has "$p" "SLURM_CONF=$SLURM_CONF" "$@" && echo "$p"
	done
	return 0
}
scontrol_t() { timed scontrol "$@"; }
squeue_t() { timed squeue "$@"; }
# Until COMMAND succeeds (0) or SECONDS have passed (1). Startup waits are
# generous: CI runs two tests at once on two cores, and a process that
# starts in 50 ms alone has been seen to take over 5 s there.
wait_for() { # SECONDS COMMAND...
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 0.1
	done
}

# torch2_lightning: $py, the Python of the torch 2 + Lightning venv that
# contrib/setup/install-deps.sh makes ($DPTRAIN_TORCH2, by default
# /opt/dptrain-torch2); a SKIP saying why where it is missing.
torch2_lightning() {
	py=${DPTRAIN_TORCH2:-/opt/dptrain-torch2}/bin/python
	[ -x "$py" ] || skip_all "no torch 2 environment at $py (contrib/setup/install-deps.sh makes it)"
	"$py" -c 'import lightning' 2>/dev/null || skip_all "Lightning is not importable by $py"
}

# Waits for each background process PID of this shell; the status is the
# number that failed.
wait_all() { # PID...
	local p failed=0
	for p in "$@"; do
		wait "$p" || failed=$((failed + 1))
	done
	return $failed
}

# ---------------------------------------------------------------- batch jobs
# Until a line of FILE matches PATTERN (0) or SECONDS have passed (1).
wait_output() { # FILE PATTERN SECONDS
	wait_for "$3" grep -q "$2" "$1" 2>/dev/null
}
job_state() { # ID: the job's state, restart count and exit code
	scontrol_t show job "$1" 2>/dev/null |
		grep -o 'JobState=[A-Z_]*\|Restarts=[0-9]*\|ExitCode=[0-9:]*' | tr '\n' ' '
}
wait_job() { # ID SECONDS: until the job has ended (COMPLETED, FAILED, ...)
	local i
	for ((i = 0; i < $2; i++)); do
		case $(job_state "$1") in
		*JobState=PENDING* | *JobState=RUNNING* | *JobState=REQUEUED* | \
			*JobState=CONFIGURING* | *JobState=COMPLETING* | "") sleep 1 ;;
		*) return 0 ;;
		esac
	done
	return 1
}

# ---------------------------------------------------------------- test beds
# Each test gets state directories of its own (mktemp) and free ports picked
# by the up scripts, so tests run in parallel. Whatever was started is
# stopped when the test exits, however it exits.
dpt_cluster_dirs=()
dpt_s3_dirs=()
# Files and directories of the test, removed by the teardown unless kept
# for a failure: dpt_scratch+=("$path") in the test's own shell.
dpt_scratch=()
# Commands that undo what a test changed on the system (packages it
# installed, say), run by the teardown after the test beds are down,
# however the test ends: dpt_exit_hooks+=(FUNCTION).
dpt_exit_hooks=()

dpt_state_dir() { # KIND: a new state directory for this test
	local base=${DPT_TEST_TMPDIR:-/tmp}
	mktemp -d "$base/dptrain-$1-$tap_name.XXXXXX" || bail_out "cannot create a directory in $base"
}
# A local of its own name: VAR (often "dir") is the caller's.
dpt_scratch_dir() { # VAR KIND: a new state directory in $VAR, in dpt_scratch
	local dpt_scratch_new
	dpt_scratch_new=$(dpt_state_dir "$2") || exit 1
	dpt_scratch+=("$dpt_scratch_new")
	printf -v "$1" %s "$dpt_scratch_new"
}

cluster_up() { # [NAME=VALUE...]: settings for tests/cluster/up (MODE, NODES, ...)
	require_root
	require_prog slurmctld slurmd srun sbatch sinfo squeue scancel scontrol timeout flock ss
	local dir out
	dir=$(dpt_state_dir cluster) || exit 1
	dpt_cluster_dirs+=("$dir")
	# INSTALL=0: a test never installs packages; a missing Slurm is a SKIP
	# (above), not a surprise apt-get in the middle of `make check`.
	if ! out=$(env "$@" DPTRAIN_CLUSTER_DIR="$dir" INSTALL=0 top_builddir="$top_builddir" \
		bash "$top_srcdir/tests/cluster/up" 2>&1); then
		diag "$out"
		bail_out "tests/cluster/up failed (state kept in $dir)"
	fi
	# shellcheck disable=SC1091
	. "$dir/env.sh"
	DPT_CLUSTER_DIR=$dir
}
cluster_down() { # [DIR]: stop a cluster now (default: the last one started)
	local dir=${1:-${DPT_CLUSTER_DIR:-}}
	[ -n "$dir" ] || return 0
	DPTRAIN_CLUSTER_DIR=$dir bash "$top_srcdir/tests/cluster/down" >/dev/null
}

s3_up() { # [NAME=VALUE...]: settings for tests/s3/up
	require_prog curl ss flock
	local dir out rc=0
	dir=$(dpt_state_dir s3) || exit 1
	dpt_s3_dirs+=("$dir")
	out=$(env "$@" DPTRAIN_S3_DIR="$dir" bash "$top_srcdir/tests/s3/up" 2>&1) || rc=$?
	if [ $rc = 77 ]; then
		skip_all "$(printf '%s\n' "$out" | tail -n 1)"
	elif [ $rc != 0 ]; then
		diag "$out"
		bail_out "tests/s3/up failed (state kept in $dir)"
	fi
	# shellcheck disable=SC1091
	. "$dir/env.sh"
	DPT_S3_DIR=$dir
}
# A fault-injecting proxy (tests/storage/s3_faults.py) in front of the S3
# server of s3_up: each RULE is METHOD:SUBSTRING:ACTION:COUNT (see the
# script); the faults it injects are appended to LOG, its output goes next
# to LOG. Sets s3_proxy (its endpoint URL); a new proxy replaces the last
# one; the teardown stops it.
s3_proxy_pid=
s3_proxy_up() { # LOG RULE...
	local log=$1 out try status
	shift
	[ -x /usr/bin/python3 ] || bail_out "/usr/bin/python3 not found (it runs the proxy)"
	s3_proxy_down
	out=${log%/*}/proxy
	# CI saw a proxy end without a word, now and then, under load: it
	# is said, and started again (three tries).
	for try in 1 2 3; do
		# Emptied here, not by the redirection below: that one happens
		# in the child, maybe after the first look for "ready", which
		# would then read the last proxy's line.
		: >"$log"
		: >"$out.out"
		/usr/bin/python3 "$top_srcdir/tests/storage/s3_faults.py" 0 "${DPTRAIN_S3_ENDPOINT##*:}" \
			"$log" "$@" >"$out.out" 2>"$out.err" &
		s3_proxy_pid=$!
		wait_for 60 s3_proxy_started "$out.out"
		grep -q '^ready ' "$out.out" && break
		kill -0 "$s3_proxy_pid" 2>/dev/null && status=running || {
			wait "$s3_proxy_pid"
			status="exit status $?"
		}
		diag "try $try: the proxy did not start ($status): $(cat "$out.out" "$out.err")"
		s3_proxy_down
	done
	grep -q '^ready ' "$out.out" || bail_out "the proxy did not start in three tries"
	s3_proxy=http://127.0.0.1:$(awk '/^ready/ { print $2 }' "$out.out")
}
s3_proxy_started() { # OUT: it said ready, or it is gone (no use waiting)
	grep -q '^ready ' "$1" || ! kill -0 "$s3_proxy_pid" 2>/dev/null
}
s3_proxy_down() {
	[ -n "$s3_proxy_pid" ] || return 0
	kill "$s3_proxy_pid" 2>/dev/null
	wait "$s3_proxy_pid" 2>/dev/null
	s3_proxy_pid=
}
s3_down() { # [DIR]
	local dir=${1:-${DPT_S3_DIR:-}}
	[ -n "$dir" ] || return 0
	DPTRAIN_S3_DIR=$dir bash "$top_srcdir/tests/s3/down" >/dev/null
}
# A restart of the server of s3_up on its port: s3_hold_port takes the
# port lock (tests/beds.sh) before the test stops the server, so that no
# test bed starting meanwhile picks the port left free; s3_start_again
# starts the server there again and lets the lock go.
s3_hold_port() {
	port_lock || bail_out "cannot hold the S3 server's port"
}
s3_start_again() { # TRIES [NAME=VALUE...]: settings for tests/s3/up; 1 if it fails
	local try out rc=1
	for ((try = 1; try <= $1; try++)); do
		out=$(env "${@:2}" DPTRAIN_S3_DIR="$DPT_S3_DIR" DPTRAIN_S3_PORT="${DPTRAIN_S3_ENDPOINT##*:}" \
			DPTRAIN_PORT_LOCK_HELD=1 bash "$top_srcdir/tests/s3/up" 2>&1) && { rc=0; break; }
		diag "try $try: tests/s3/up did not start the server again: $out"
	done
	port_unlock
	# shellcheck disable=SC1091
	[ $rc != 0 ] || . "$DPT_S3_DIR/env.sh"
	return $rc
}
# The keys under PREFIX of the incomplete multipart uploads of the S3
# server of env.sh's bucket, one a line. ListMultipartUploads (curl 7.88
# signs "?uploads" only when written "?uploads="; the prefix is matched
# here, not sent: servers disagree on how a "/" in a query value is
# signed); s3rver has no such request (501), so its uploads are read from
# its object store, where each open upload is a directory holding its key.
# Fails, saying why on stderr, when neither can tell.
s3_uploads() { # PREFIX
	local out code f keys=() key
	out=$(timed curl -sS -w '\n%{http_code}' --aws-sigv4 "aws:amz:$AWS_DEFAULT_REGION:s3" \
		--user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
		"$DPTRAIN_S3_ENDPOINT/$DPTRAIN_S3_BUCKET?uploads=") ||
		{ echo "ListMultipartUploads failed" >&2; return 1; }
	code=${out##*$'\n'}
	out=${out%$'\n'*}
	if [ "$code" = 200 ] && grep -q '<ListMultipartUploadsResult' <<<"$out"; then
		mapfile -t keys < <(tr -d '\n' <<<"$out" | grep -o '<Upload>.*</Upload>' |
			sed 's|</Upload>|&\n|g' | sed -n 's|.*<Key>\([^<]*\)</Key>.*|\1|p')
	elif [ "$code" = 501 ] && [ "${DPTRAIN_S3_SERVER:-}" = s3rver ] && [ -d "${DPTRAIN_S3_OBJECTS:-}" ]; then
		for f in "$DPTRAIN_S3_OBJECTS/$DPTRAIN_S3_BUCKET/._S3rver_uploads"/*/key; do
			[ ! -f "$f" ] || keys+=("$(cat "$f")")
		done
	else
		echo "ListMultipartUploads: HTTP $code: $out" >&2
		return 1
	fi
	for key in "${keys[@]}"; do
		[[ $key != "$1"* ]] || echo "$key"
	done
}

dpt_teardown() {
	local rc=$? purge=1 dir
	trap - EXIT
	trap '' PIPE # a reader that went away must not stop the teardown
	# Keep the logs of a failure for whoever reads the test's .log file.
	if [ "${DPT_KEEP:-0}" = 1 ] || [ "$tap_failed" -gt 0 ] || { [ "$rc" != 0 ] && [ "$rc" != 77 ]; }; then
		purge=0
	fi
	if [ -n "$tap_planned" ] && [ "$tap_count" != "$tap_planned" ]; then
		diag "planned $tap_planned checks, ran $tap_count"
		purge=0
	fi
	for dir in "${dpt_cluster_dirs[@]}"; do
		DPTRAIN_CLUSTER_DIR=$dir PURGE=$purge bash "$top_srcdir/tests/cluster/down" >/dev/null 2>&1 ||
			diag "tests/cluster/down failed for $dir"
		[ $purge = 1 ] || diag "cluster state and logs kept in $dir"
	done
	s3_proxy_down
	for dir in "${dpt_s3_dirs[@]}"; do
		DPTRAIN_S3_DIR=$dir PURGE=$purge bash "$top_srcdir/tests/s3/down" >/dev/null 2>&1 ||
			diag "tests/s3/down failed for $dir"
		[ $purge = 1 ] || diag "S3 server state and log kept in $dir"
	done
	local hook
	for hook in "${dpt_exit_hooks[@]}"; do
		"$hook" || diag "exit hook $hook failed"
	done
	for dir in "${dpt_scratch[@]}"; do
		if [ $purge = 1 ]; then
			rm -rf -- "$dir"
		else
			diag "kept $dir"
		fi
	done
	exit "$rc"
}
trap dpt_teardown EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 141' PIPE

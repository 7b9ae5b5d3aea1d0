#!/bin/bash
# The GPU bundle cannot rot: tests/gpu/bundle builds it (the tree with
# --with-cuda --with-nccl, in a build directory of its own under the build
# tree) and bundle/run runs it here, where there is no GPU:
# - as a bare machine would (every carried library in use) and as this
#   machine does: every library resolves, every GPU test is a SKIP with the
#   reason, exit 0, and $OUT holds gpu.tap (what it printed, line for
#   line), gpu-summary.txt and the packed state, a valid archive;
# - with a part that hangs (DPT_GPU_SELFTEST_HANG): it fails by its limit,
#   nothing it started is left running (its child ignores SIGTERM, its
#   grandchild is in a session of its own), and the state is still packed;
# - stopped with SIGTERM in the middle of that part: what the part printed
#   was already in gpu.tap, and the summary and the state are still written;
# - with its budget spent: every test part is a SKIP saying so, exit 0.
# The runs' own TAP streams are shown as comments.
#
# Not named tests/gpu/bundle.sh: GNU make's built-in rule '%: %.sh' would
# then overwrite tests/gpu/bundle with it (make dist did).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_prog make gcc dpkg objdump timeout od tar gzip setsid

# Never run anything but the builder (a clobbered copy of this script
# would start itself without end).
grep -q '^# tests/gpu/bundle \[BUNDLE\]: build the GPU test bundle' "$top_srcdir/tests/gpu/bundle" ||
	bail_out "$top_srcdir/tests/gpu/bundle is not the bundle builder"

build=$top_builddir/tests/gpu/no_gpu.build
bundle=$top_builddir/tests/gpu/no_gpu.bundle
out=$top_builddir/tests/gpu/no_gpu.out
res=$top_builddir/tests/gpu/no_gpu.res
rc=0
DPT_GPU_BUILD_DIR=$build bash "$top_srcdir/tests/gpu/bundle" "$bundle" >"$out" 2>&1 || rc=$?
# 77: no CUDA toolkit or no NCCL here; the builder's last line says where
# it looked and what installs them.
[ "$rc" != 77 ] || skip_all "$(sed -n '$s/^bundle: //p' "$out")"
plan 9
ok "$rc" "tests/gpu/bundle builds the bundle" || { diag "$(cat "$out")"; bail_out "no bundle to run"; }
diag "$(cat "$out")"
rm -rf "$res"
mkdir -p "$res"

# Every process the runs start carries this in its environment: what is
# left of them is found whatever session or process group it is in.
mark=$$.$RANDOM
left_running() { # the live processes carrying the mark, described
	local d state
	for d in /proc/[0-9]*; do
		grep -qzx "DPT_NO_GPU_MARK=$mark" "$d/environ" 2>/dev/null || continue
		state=$(sed 's/.*) \(.\).*/\1/' "$d/stat" 2>/dev/null) || continue
		[ "$state" = Z ] || echo "pid ${d#/proc/}: $(tr '\0' ' ' <"$d/cmdline" 2>/dev/null)"
	done
}
# run NAME [VAR=VALUE...]: bundle/run with OUT=$res/NAME, its stdout in
# $res/NAME.stdout, its stderr in $res/NAME.stderr; sets run_rc.
run() {
	local name=$1
	shift
	run_rc=0
	env "$@" DPT_NO_GPU_MARK="$mark" OUT="$res/$name" "$bundle/run" \
		>"$res/$name.stdout" 2>"$res/$name.stderr" || run_rc=$?
	diag "== bundle/run ($name$([ $# = 0 ] || echo ": $*")): exit status $run_rc" \
		"$(cat "$res/$name.stdout" "$res/$name.stderr")"
}
summary_re='^gpu: tests=[0-9]+ passed=[0-9]+ failed=([0-9]+) skipped=[0-9]+ gpus=[0-9]+ device=[^ ]+ stall_ratio=[^ ]+$'
# failures NAME: the failures its summary counts, or "none" when
# gpu-summary.txt is missing, malformed, or not the last line of gpu.tap
failures() {
	local s
	s=$(cat "$res/$1/gpu-summary.txt" 2>/dev/null)
	[[ $s =~ $summary_re ]] && [ "$(tail -n 1 "$res/$1/gpu.tap")" = "$s" ] &&
		echo "${BASH_REMATCH[1]}" || echo none
}
# archive NAME FILE...: $OUT/gpu-state.tar.gz is a valid archive holding
# each FILE
archive() {
	local name=$1 list f
	shift
	list=$(tar -tzf "$res/$name/gpu-state.tar.gz" 2>&1) || { diag "tar: $list"; return 1; }
	for f; do
		grep -qx "$f" <<<"$list" || { diag "$name: no $f in the state:" "$list"; return 1; }
	done
}

# First as a bare machine would run it, every carried library in use.
run bare DPT_GPU_LIBS=bundle
is "$run_rc/$(failures bare)/$(grep -c '^# from this machine (0): none$' "$res/bare.stdout")" 0/0/1 \
	"with every carried library in use (a bare machine): exit 0, no failure, nothing of this machine's"

# As it runs on this machine.
run here
is "$run_rc/$(failures here)" 0/0 "here: exit 0, no failure, the summary in gpu-summary.txt and last in gpu.tap"
run_ok "gpu.tap holds what the run printed, line for line" cmp "$res/here.stdout" "$res/here/gpu.tap"
# Every check of a GPU part is a SKIP with its reason (the checks that
# nothing was left running pass).
not_skipped=$(grep -E '^(not )?ok [0-9]+ - (nccl|ckpt-cuda|torch|figure)\b' "$res/here/gpu.tap" |
	grep -v ' - [a-z-]*: nothing of it is left running$' | grep -vE ' # SKIP [^ ]' || true)
skips=$(grep -cE '^ok [0-9]+ - (nccl|ckpt-cuda|torch|figure)\b.* # SKIP [^ ]' "$res/here/gpu.tap")
st=0
[ -z "$not_skipped" ] && [ "$skips" -ge 4 ] || st=1
ok $st "every GPU check is a SKIP with the reason ($skips)" || diag "not skipped:" "$not_skipped"
st=0
archive here env.txt left-out.txt probe.out nccl.out ckpt-cuda.out torch.out || st=1
ok $st "the state is packed: gpu-state.tar.gz is a valid archive of each part's output"

# A part that hangs: failed by its limit of 3 s, ended with its child and
# grandchild.
run hang DPT_GPU_SELFTEST_HANG=3
lingering=$(left_running)
got="$run_rc/$(failures hang)/$(grep -cE '^not ok [0-9]+ - selftest-hang: finished within 3 s$' "$res/hang/gpu.tap")"
got="$got/$(grep -cE '^ok [0-9]+ - selftest-hang: nothing of it is left running$' "$res/hang/gpu.tap")"
st=0
[ "$got" = 1/1/1/1 ] && [ -z "$lingering" ] || st=1
archive hang selftest-hang.out || st=1
tar -xzOf "$res/hang/gpu-state.tar.gz" selftest-hang.out 2>/dev/null | grep -q '^# selftest: hanging' || st=1
ok $st "a part that hangs fails by its limit, leaves nothing running, and the state is packed" ||
	diag "exit status/failures/limit line/left line: $got (want 1/1/1/1)" "left running:" "$lingering"

# The run stopped with SIGTERM while that part hangs: what the part
# printed is in gpu.tap before the run ends.
env DPT_GPU_SELFTEST_HANG=120 DPT_NO_GPU_MARK="$mark" OUT="$res/term" "$bundle/run" \
	>"$res/term.stdout" 2>"$res/term.stderr" &
term_pid=$!
streamed=0
wait_for 60 grep -qs '^# selftest: hanging' "$res/term/gpu.tap" && streamed=1
kill -TERM "$term_pid"
run_rc=0
wait "$term_pid" || run_rc=$?
diag "== bundle/run (term: DPT_GPU_SELFTEST_HANG=120, SIGTERM): exit status $run_rc" \
	"$(cat "$res/term.stdout" "$res/term.stderr")"
lingering=$(left_running)
got="$streamed/$run_rc/$(failures term)/$(grep -cE '^not ok [0-9]+ - selftest-hang: finished before the run ended \(it got SIGTERM\)$' "$res/term/gpu.tap")"
st=0
[ "$got" = 1/143/1/1 ] && [ -z "$lingering" ] || st=1
archive term selftest-hang.out || st=1
ok $st "stopped by SIGTERM: its lines were in gpu.tap as printed, the summary and the state are written, nothing is left" ||
	diag "streamed/exit status/failures/interrupted line: $got (want 1/143/1/1)" "left running:" "$lingering"

# A budget already spent: the test parts are SKIPs, not failures.
run budget DPT_GPU_BUDGET=1
is "$run_rc/$(failures budget)/$(grep -cE '^ok [0-9]+ - (nccl|ckpt-cuda|torch) # SKIP not run: the budget is spent ' "$res/budget/gpu.tap")" 0/0/3 \
	"a spent budget SKIPs the parts it does not reach: exit 0, no failure"

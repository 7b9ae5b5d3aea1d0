#!/bin/bash
# The GPU bundle cannot rot: tests/gpu/bundle builds it (the tree with
# --with-cuda --with-nccl, in a build directory of its own under the build
# tree) and bundle/run runs it here, where there is no GPU: it must check
# that every library resolves, SKIP every GPU test with the reason, print
# its summary and exit 0. Its TAP stream is this test's.
#
# Not named tests/gpu/bundle.sh: GNU make's built-in rule '%: %.sh' would
# then overwrite tests/gpu/bundle with it (make dist did).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_prog make gcc dpkg objdump timeout od

# Never run anything but the builder (a clobbered copy of this script
# would start itself without end).
grep -q '^# tests/gpu/bundle \[BUNDLE\]: build the GPU test bundle' "$top_srcdir/tests/gpu/bundle" ||
	bail_out "$top_srcdir/tests/gpu/bundle is not the bundle builder"

build=$top_builddir/tests/gpu/no_gpu.build
bundle=$top_builddir/tests/gpu/no_gpu.bundle
out=$top_builddir/tests/gpu/no_gpu.out
rc=0
DPT_GPU_BUILD_DIR=$build bash "$top_srcdir/tests/gpu/bundle" "$bundle" >"$out" 2>&1 || rc=$?
# 77: no CUDA toolkit or no NCCL here; the builder's last line says where
# it looked and what installs them.
[ "$rc" != 77 ] || skip_all "$(sed -n '$s/^bundle: //p' "$out")"
if [ "$rc" != 0 ]; then
	echo "1..1"
	echo "not ok 1 - tests/gpu/bundle builds the bundle"
	sed 's/^/# /' "$out"
	exit 1
fi
sed 's/^/# /' "$out"
res=$top_builddir/tests/gpu/no_gpu.res
rm -rf "$res"
# First as a bare machine would run it, every carried library in use
# (its TAP as comments: it must pass on its own), then as it runs on
# this machine: that run's TAP is this test's.
bare=$(DPT_GPU_LIBS=bundle OUT=$res/bare "$bundle/run" 2>&1)
bare_rc=$?
sed 's/^/# bare: /' <<<"$bare"
rc=0
OUT=$res "$bundle/run" || rc=$?
summary=$(cat "$res/gpu-summary.txt" 2>/dev/null)
re='^gpu: tests=[0-9]+ passed=[0-9]+ failed=0 skipped=[0-9]+ gpus=[0-9]+ device=[^ ]+ stall_ratio=[^ ]+$'
if [ "$bare_rc" != 0 ] || ! grep -q '^# from this machine (0): none$' <<<"$bare" ||
	! [[ $(cat "$res/bare/gpu-summary.txt" 2>/dev/null) =~ $re ]]; then
	echo "# the run with the bundle's libraries only failed (exit status $bare_rc)"
	exit 1
fi
# What a GPU machine's run leaves in $OUT: the TAP and the summary.
[ "$rc" = 0 ] && [[ $summary =~ $re ]] && [ "$(tail -n 1 "$res/gpu.tap")" = "$summary" ] || {
	echo "# run: exit status $rc, summary '$summary'"
	exit 1
}

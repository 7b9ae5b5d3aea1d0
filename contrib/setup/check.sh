#!/bin/bash
# The README's second command and what CI runs (.ci/run): install, check
# the code's style (contrib/setup/style.sh), build with warnings as
# errors, run the whole test suite (unit tests and integration tests on a
# real local Slurm cluster and a real S3 server),
# check the distribution (its unit tests), and run the unit tests and the C integration
# tests (coordinator, checkpoints) again under AddressSanitizer and
# UndefinedBehaviorSanitizer.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
jobs=$(nproc)

step() { printf '\n=== %s (%ds)\n' "$*" "$SECONDS"; }

step "install dependencies"
bash contrib/setup/install-deps.sh

step "style: formatted as .clang-format says, no banned function"
bash contrib/setup/style.sh

step "build (warnings are errors)"
bash contrib/setup/build.sh

# Show why tests failed: the harness keeps each test's log.
show_failures() { # DIR
	find "$1" -name '*.log' -path '*tests*' -print0 |
		xargs -0 grep -l -E '^(not ok|ERROR|FAIL)' 2>/dev/null |
		while read -r f; do echo "--- $f"; tail -50 "$f"; done
}

# Three times as many tests as cores: most integration tests wait on
# Slurm, timers and their jobs, and the longest run first (LONG_TESTS,
# tests/local.mk). With twice as many, the CPU idled 15% of the run
# (Nov 29 2026), while the tests that hardly compute held the slots.
step "make check: unit and integration tests"
if ! make -j"$((3 * jobs))" check; then
	show_failures .
	exit 1
fi

# The tarball, built and checked in a tree of its own: every tracked file in
# it, the unit tests and the tests of what it installs for users
# (DIST_TESTS, tests/local.mk); the integration tests ran above.
step "make distcheck"
if ! make -j"$jobs" distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror TESTS='$(DIST_TESTS)'; then
	show_failures "$(ls -d dptrain-*/ 2>/dev/null | head -1)"
	exit 1
fi

# From the tarball that distcheck made: this tree is configured in place,
# and a tree configured in place cannot host a second (VPATH) build.
step "unit, coordinator and checkpoint tests under ASan + UBSan"
tarball=$(ls -t dptrain-*.tar.gz | head -1)
rm -rf build-asan && mkdir build-asan
tar -xzf "$tarball" -C build-asan --strip-components=1
cd build-asan
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
./configure -q --enable-werror CFLAGS="-O1 -g $san" LDFLAGS="$san"
make -j"$jobs"
if ! DPT_SANITIZED=1 ASAN_OPTIONS=detect_leaks=1 \
	UBSAN_OPTIONS=print_stacktrace=1 make -j"$jobs" check-sanitized; then
	show_failures .
	exit 1
fi
cd .. && rm -rf build-asan

step "all checks passed"

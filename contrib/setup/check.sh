#!/bin/bash
# The README's second command and what CI runs (.ci/run): install, build
# with warnings as errors, run the whole test suite (unit tests and
# integration tests on a real local Slurm cluster and a real S3 server),
# check the distribution, and run the unit tests again under
# AddressSanitizer and UndefinedBehaviorSanitizer.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
jobs=$(nproc)

step() { printf '\n=== %s (%ds)\n' "$*" "$SECONDS"; }

step "install dependencies"
bash contrib/setup/install-deps.sh

step "build (warnings are errors)"
bash contrib/setup/build.sh

step "make check: unit and integration tests"
if ! make -j"$jobs" check; then
	# Show why: the harness keeps each test's log.
	find . -name '*.log' -path '*tests*' -newer config.status -print0 |
		xargs -0 grep -l -E '^(not ok|ERROR|FAIL)' 2>/dev/null |
		while read -r f; do echo "--- $f"; tail -50 "$f"; done
	exit 1
fi

step "make distcheck"
make -j"$jobs" distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror

step "unit tests under AddressSanitizer + UndefinedBehaviorSanitizer"
rm -rf build-asan && mkdir build-asan && cd build-asan
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
../configure -q --enable-werror CFLAGS="-O1 -g $san" LDFLAGS="$san"
make -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 make -j"$jobs" check-unit
cd .. && rm -rf build-asan

step "all checks passed"

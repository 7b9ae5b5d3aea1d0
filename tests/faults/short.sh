#!/bin/bash
# The short fault campaign of `make check`: 24 trials, a fixed seed, every
# kind three times, a few minutes (tests/faults/campaign says what a trial does
# and checks).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
exec bash "${top_srcdir:-$(dirname "$0")/../..}/tests/faults/campaign" --trials 24 --seed 16

#!/bin/bash
# The short fault campaign of `make check`: 16 trials, a fixed seed, every
# kind twice, a few minutes (tests/faults/campaign says what a trial does
# and checks).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
exec bash "${top_srcdir:-$(dirname "$0")/../..}/tests/faults/campaign" --trials 16 --seed 16

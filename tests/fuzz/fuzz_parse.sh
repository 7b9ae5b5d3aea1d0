#!/bin/sh
# The parsers of typed values (common/parse.c: durations, ckpt-every,
# numbers, booleans, key=value) under libFuzzer. See tests/fuzz/lib.sh.
. "${top_srcdir:?}/tests/fuzz/lib.sh"
fuzz_run parse "" 256 common/parse.c common/error.c

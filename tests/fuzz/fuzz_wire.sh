#!/bin/sh
# The wire decoder (common/wire.c) under libFuzzer, from the seeds in
# tests/fuzz/corpus/wire/ (protocol version 4: a JOIN, a ROSTER of two
# ranks, a GEN_END, a BARRIER and a VOTE_DONE with the STOP flag).
# See tests/fuzz/lib.sh.
. "${top_srcdir:?}/tests/fuzz/lib.sh"
fuzz_run wire "libzmq libcrypto" 4096 \
	common/wire.c common/error.c common/log.c common/setting_names.c common/parse.c

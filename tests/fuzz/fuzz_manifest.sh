#!/bin/sh
# The manifest's decoder, checks and encoder (ckpt/manifest.c) and the
# shard headers derived from it (ckpt/shard.c) under libFuzzer, from the
# manifests in tests/fuzz/corpus/manifest/. The storage module is linked
# in for its key check. See tests/fuzz/lib.sh.
. "${top_srcdir:?}/tests/fuzz/lib.sh"
fuzz_run manifest "jansson libcurl libcrypto" 16384 \
	ckpt/manifest.c ckpt/cover.c ckpt/plan.c ckpt/shard.c worker/version.c \
	$fuzz_storage_sources \
	common/buf.c common/parse.c common/error.c common/log.c common/setting_names.c

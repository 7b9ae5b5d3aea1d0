#!/bin/sh
# The storage's name parsers (common/uri.c: root URIs and keys;
# storage/s3_config.c: S3 endpoints) under libFuzzer. storage.c opens the backends,
# so they are linked in too, with libcurl and libcrypto. See
# tests/fuzz/lib.sh.
. "${top_srcdir:?}/tests/fuzz/lib.sh"
fuzz_run uri "libcurl libcrypto" 2048 \
	$fuzz_storage_sources \
	common/buf.c common/parse.c common/error.c common/log.c common/setting_names.c

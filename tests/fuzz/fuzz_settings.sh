#!/bin/sh
# The plugin's configuration (spank/settings.c: dptrain.conf, plugstack
# words, --dp-* options and their resolution) under libFuzzer, checked
# against the storage's reading of URIs (common/uri.c; the storage module
# comes whole, with libcurl and libcrypto). See tests/fuzz/lib.sh.
. "${top_srcdir:?}/tests/fuzz/lib.sh"
fuzz_run settings "libcurl libcrypto" 4096 \
	spank/settings.c \
	$fuzz_storage_sources \
	common/buf.c common/parse.c common/error.c common/log.c common/setting_names.c \
	common/shape.c

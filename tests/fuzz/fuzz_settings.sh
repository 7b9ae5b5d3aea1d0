#!/bin/sh
# The plugin's configuration (spank/settings.c: dptrain.conf, plugstack
# words, --dp-* options and their resolution) under libFuzzer, checked
# against the storage's reading of URIs (storage/uri.c; the storage module
# comes whole, with libcurl and libcrypto). See tests/fuzz/lib.sh.
. "${top_srcdir:?}/tests/fuzz/lib.sh"
fuzz_run settings "libcurl libcrypto" 4096 \
	spank/settings.c storage/uri.c storage/storage.c storage/posix.c \
	storage/posix_writer.c storage/posix_tree.c storage/s3.c \
	storage/s3_writer.c storage/s3_request.c storage/s3_outcome.c \
	storage/s3_config.c storage/sigv4.c storage/xml.c \
	common/buf.c common/parse.c common/error.c common/log.c

#!/bin/sh
# The storage's name parsers (storage/uri.c: root URIs and S3 endpoints;
# storage/storage.c: keys) under libFuzzer. storage.c opens the backends,
# so they are linked in too, with libcurl and libcrypto. See
# tests/fuzz/lib.sh.
. "${top_srcdir:?}/tests/fuzz/lib.sh"
fuzz_run uri "libcurl libcrypto" 2048 \
	storage/uri.c storage/storage.c storage/posix.c \
	storage/posix_writer.c storage/posix_tree.c storage/s3.c \
	storage/s3_writer.c storage/s3_request.c storage/s3_outcome.c \
	storage/s3_config.c storage/sigv4.c storage/xml.c \
	common/buf.c common/parse.c common/error.c common/log.c

#!/bin/sh
# The S3 XML reader (storage/xml.c) and the classification of S3 answers
# (storage/s3_outcome.c) under libFuzzer, from real answers in
# tests/fuzz/corpus/s3xml/ (under 1 KiB each; inputs up to 4 KiB, since
# every answer is scanned a dozen times, each comparison traced). See
# tests/fuzz/lib.sh.
. "${top_srcdir:?}/tests/fuzz/lib.sh"
fuzz_run s3xml "libcurl libcrypto" 4096 \
	storage/xml.c storage/s3_outcome.c storage/storage.c storage/uri.c \
	storage/posix.c storage/posix_writer.c storage/posix_tree.c \
	storage/s3.c storage/s3_writer.c storage/s3_request.c \
	storage/s3_config.c storage/sigv4.c \
	common/buf.c common/parse.c common/error.c common/log.c

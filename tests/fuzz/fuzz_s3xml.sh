#!/bin/sh
# The S3 XML reader (storage/xml.c) and the classification of S3 answers
# (storage/s3_outcome.c) under libFuzzer, from real answers in
# tests/fuzz/corpus/s3xml/ (under 1 KiB each; inputs up to 4 KiB, since
# every answer is scanned a dozen times, each comparison traced). See
# tests/fuzz/lib.sh.
. "${top_srcdir:?}/tests/fuzz/lib.sh"
fuzz_run s3xml "libcurl libcrypto" 4096 \
	$fuzz_storage_sources \
	common/buf.c common/parse.c common/error.c common/log.c common/setting_names.c

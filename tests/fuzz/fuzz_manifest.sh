#!/bin/sh
# The manifest's decoder, checks and encoder (ckpt/manifest.c) and the
# shard headers derived from it (ckpt/shard.c) under libFuzzer, from the
# manifests in tests/fuzz/corpus/manifest/. The storage module is linked
# in for its key check. See tests/fuzz/lib.sh.
. "${top_srcdir:?}/tests/fuzz/lib.sh"
fuzz_run manifest "jansson libcurl libcrypto" 16384 \
	ckpt/manifest.c ckpt/plan.c ckpt/shard.c worker/version.c \
	storage/storage.c storage/uri.c storage/posix.c \
	storage/posix_writer.c storage/posix_tree.c storage/s3.c \
	storage/s3_writer.c storage/s3_request.c storage/s3_outcome.c \
	storage/s3_config.c storage/sigv4.c storage/xml.c \
	common/buf.c common/parse.c common/error.c common/log.c

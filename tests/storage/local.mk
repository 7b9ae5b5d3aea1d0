# Storage tests: integration tests of the s3 backend against a real S3
# server (moto, SigV4 enforced), driven through storage_tool. The flags
# serve the storage backends' unit tests too (tests/unit/local.mk).
STORAGE_TEST_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir) $(CURL_CFLAGS) $(CRYPTO_CFLAGS)
STORAGE_TEST_LDADD = storage/libdptstorage.la common/libdptcommon.la \
	$(CURL_LIBS) $(CRYPTO_LIBS)

# storage_tool drives the storage interface from the integration scripts.
check_PROGRAMS += tests/storage/storage_tool
tests_storage_storage_tool_SOURCES = tests/storage/storage_tool.c
tests_storage_storage_tool_CFLAGS = $(STORAGE_TEST_CFLAGS)
tests_storage_storage_tool_LDADD = $(STORAGE_TEST_LDADD)

# Integration tests: the s3 backend against moto (SKIP without it), also
# through a fault-injecting proxy, and the posix backend on a full tmpfs
# (SKIP without root).
STORAGE_TESTS = \
	tests/storage/s3.sh \
	tests/storage/s3_faults.sh \
	tests/storage/enospc.sh
TESTS += $(STORAGE_TESTS)
EXTRA_DIST += $(STORAGE_TESTS) tests/storage/s3_faults.py

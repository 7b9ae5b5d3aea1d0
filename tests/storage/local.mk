# Storage tests: cmocka unit tests of the signer, the URI and XML parsers,
# the posix backend and the table of S3 outcomes, and integration tests of
# the s3 backend against a real S3 server (moto, SigV4 enforced), driven
# through storage_tool.
STORAGE_TEST_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir) $(CURL_CFLAGS) $(CRYPTO_CFLAGS)
STORAGE_TEST_LDADD = storage/libdptstorage.la common/libdptcommon.la \
	$(CURL_LIBS) $(CRYPTO_LIBS)

if HAVE_CMOCKA
STORAGE_UNIT_TESTS = \
	tests/unit/test_storage_sigv4 \
	tests/unit/test_storage_uri \
	tests/unit/test_storage_xml \
	tests/unit/test_storage_posix \
	tests/unit/test_storage_enospc \
	tests/unit/test_storage_s3_classify
UNIT_TESTS += $(STORAGE_UNIT_TESTS)
tests_unit_test_storage_sigv4_SOURCES = tests/unit/test_storage_sigv4.c
tests_unit_test_storage_sigv4_CFLAGS = $(STORAGE_TEST_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_storage_sigv4_LDADD = $(STORAGE_TEST_LDADD) $(CMOCKA_LIBS)
tests_unit_test_storage_uri_SOURCES = tests/unit/test_storage_uri.c
tests_unit_test_storage_uri_CFLAGS = $(STORAGE_TEST_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_storage_uri_LDADD = $(STORAGE_TEST_LDADD) $(CMOCKA_LIBS)
tests_unit_test_storage_xml_SOURCES = tests/unit/test_storage_xml.c
tests_unit_test_storage_xml_CFLAGS = $(STORAGE_TEST_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_storage_xml_LDADD = $(STORAGE_TEST_LDADD) $(CMOCKA_LIBS)
tests_unit_test_storage_posix_SOURCES = tests/unit/test_storage_posix.c
tests_unit_test_storage_posix_CFLAGS = $(STORAGE_TEST_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_storage_posix_LDADD = $(STORAGE_TEST_LDADD) $(CMOCKA_LIBS)
tests_unit_test_storage_enospc_SOURCES = tests/unit/test_storage_enospc.c
tests_unit_test_storage_enospc_CFLAGS = $(STORAGE_TEST_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_storage_enospc_LDADD = $(STORAGE_TEST_LDADD) $(CMOCKA_LIBS)
tests_unit_test_storage_s3_classify_SOURCES = \
	tests/unit/test_storage_s3_classify.c
tests_unit_test_storage_s3_classify_CFLAGS = \
	$(STORAGE_TEST_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_storage_s3_classify_LDADD = \
	$(STORAGE_TEST_LDADD) $(CMOCKA_LIBS)
endif

# storage_tool drives the storage interface from the integration scripts.
check_PROGRAMS += tests/storage/storage_tool
tests_storage_storage_tool_SOURCES = tests/storage/storage_tool.c
tests_storage_storage_tool_CFLAGS = $(STORAGE_TEST_CFLAGS)
tests_storage_storage_tool_LDADD = $(STORAGE_TEST_LDADD)

# Integration tests: the s3 backend against moto (SKIP without it), also
# through a fault-injecting proxy, and the posix backend on a full tmpfs
# (SKIP without root).
TESTS += \
	tests/storage/s3.sh \
	tests/storage/s3_faults.sh \
	tests/storage/enospc.sh
EXTRA_DIST += \
	tests/storage/s3.sh \
	tests/storage/s3_faults.sh \
	tests/storage/s3_faults.py \
	tests/storage/enospc.sh

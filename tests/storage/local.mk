# Storage tests: cmocka unit tests of the storage layer.
STORAGE_TEST_CFLAGS = $(AM_CFLAGS) -I$(top_srcdir) $(CURL_CFLAGS) $(CRYPTO_CFLAGS)
STORAGE_TEST_LDADD = storage/libdptstorage.la common/libdptcommon.la \
	$(CURL_LIBS) $(CRYPTO_LIBS)

if HAVE_CMOCKA
STORAGE_UNIT_TESTS = \
	tests/unit/test_storage_sigv4 \
	tests/unit/test_storage_xml
UNIT_TESTS += $(STORAGE_UNIT_TESTS)
tests_unit_test_storage_sigv4_SOURCES = tests/unit/test_storage_sigv4.c
tests_unit_test_storage_sigv4_CFLAGS = $(STORAGE_TEST_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_storage_sigv4_LDADD = $(STORAGE_TEST_LDADD) $(CMOCKA_LIBS)
tests_unit_test_storage_xml_SOURCES = tests/unit/test_storage_xml.c
tests_unit_test_storage_xml_CFLAGS = $(STORAGE_TEST_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_storage_xml_LDADD = $(STORAGE_TEST_LDADD) $(CMOCKA_LIBS)
endif

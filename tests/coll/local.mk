# The reduction kernels' unit test sits with the other unit tests but is
# registered here, with the rest of the CPU backend's tests.
if HAVE_CMOCKA
check_PROGRAMS += tests/unit/test_cpu_reduce
TESTS += tests/unit/test_cpu_reduce
tests_unit_test_cpu_reduce_SOURCES = tests/unit/test_cpu_reduce.c
tests_unit_test_cpu_reduce_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_unit_test_cpu_reduce_LDADD = worker/libdptcpu.la worker/libdptrain.la \
	common/libdptcommon.la $(CMOCKA_LIBS) -lm
tests_unit_test_cpu_reduce_LDFLAGS = -no-install
endif

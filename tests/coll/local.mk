# Integration tests of the CPU collective backend: real processes over
# loopback TCP and shared memory (tests/coll/harness.c forks them). TAP.
COLL_TESTS = \
	tests/coll/test_coll \
	tests/coll/test_coll_fail \
	tests/coll/test_coll_neighbour
check_PROGRAMS += $(COLL_TESTS)
TESTS += $(COLL_TESTS)
COLL_LDADD = worker/libdptcpu.la worker/libdptrain.la common/libdptcommon.la
tests_coll_test_coll_SOURCES = tests/coll/test_coll.c \
	tests/coll/harness.c tests/coll/harness.h
tests_coll_test_coll_LDADD = $(COLL_LDADD)
tests_coll_test_coll_fail_SOURCES = tests/coll/test_coll_fail.c \
	tests/coll/harness.c tests/coll/harness.h
tests_coll_test_coll_fail_LDADD = $(COLL_LDADD)
tests_coll_test_coll_LDFLAGS = -no-install
tests_coll_test_coll_fail_LDFLAGS = -no-install
# The data plane against a neighbour on the node: forged HELLOs, planted
# segment names (as nobody, when run as root), the names' contents.
tests_coll_test_coll_neighbour_SOURCES = tests/coll/test_coll_neighbour.c \
	tests/coll/harness.c tests/coll/harness.h
tests_coll_test_coll_neighbour_LDADD = $(COLL_LDADD)
tests_coll_test_coll_neighbour_LDFLAGS = -no-install

# The collectives through libdptrain's public API, between worker
# processes that join a real dptrain-coordinator: tests/coll/api.sh starts
# both, tests/coll/api is the worker.
check_PROGRAMS += tests/coll/api
tests_coll_api_SOURCES = tests/coll/api.c
tests_coll_api_LDADD = worker/libdptrain.la common/libdptcommon.la
TESTS += tests/coll/api.sh
EXTRA_DIST += tests/coll/api.sh

# The data plane of real workers seen from a neighbour: the listener's
# address, junk on it (tests/coord/coord_worker, tests/coord/lib.sh).
TESTS += tests/coll/dataplane.sh
EXTRA_DIST += tests/coll/dataplane.sh

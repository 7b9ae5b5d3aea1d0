# Integration tests of the coordinator on loopback: a real coordinator
# process and real worker processes (tests/coord/coord_worker, linked with
# libdptrain), driven by the scripts below.
check_PROGRAMS += tests/coord/coord_worker
tests_coord_coord_worker_SOURCES = tests/coord/coord_worker.c
tests_coord_coord_worker_CFLAGS = $(AM_CFLAGS) $(ZMQ_CFLAGS)
tests_coord_coord_worker_LDADD = worker/libdptrain.la common/libdptcommon.la $(ZMQ_LIBS) -lm

COORD_TESTS = \
	tests/coord/cli.sh \
	tests/coord/rendezvous.sh \
	tests/coord/security.sh \
	tests/coord/failover.sh \
	tests/coord/task_exit.sh \
	tests/coord/stop.sh \
	tests/coord/flood.sh \
	tests/coord/netns.sh
TESTS += $(COORD_TESTS)
EXTRA_DIST += $(COORD_TESTS) tests/coord/lib.sh

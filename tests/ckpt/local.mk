# Checkpoint tests: cmocka unit tests of the manifest codec and the
# resharding planner; integration tests that run a real coordinator and
# real workers (tests/ckpt/ckpt_worker, linked with libdptrain) saving and
# loading through the public API, and the `dptrain ckpt` tool.
check_PROGRAMS += tests/ckpt/ckpt_worker
tests_ckpt_ckpt_worker_SOURCES = tests/ckpt/ckpt_worker.c
tests_ckpt_ckpt_worker_CFLAGS = $(AM_CFLAGS) $(XXHASH_CFLAGS)
tests_ckpt_ckpt_worker_LDADD = worker/libdptrain.la $(XXHASH_LIBS)

CKPT_TESTS = \
	tests/ckpt/reshard.sh \
	tests/ckpt/damage.sh \
	tests/ckpt/crash.sh \
	tests/ckpt/enospc.sh
TESTS += $(CKPT_TESTS)
EXTRA_DIST += $(CKPT_TESTS) tests/ckpt/lib.sh

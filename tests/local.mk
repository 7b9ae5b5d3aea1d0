# Tests: unit tests are cmocka programs printing TAP; integration tests are
# shell scripts printing TAP that drive real programs on a real local Slurm
# cluster and a real S3 server. Both run under automake's parallel harness
# with the TAP driver.
TEST_EXTENSIONS = .sh
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
SH_LOG_DRIVER = $(LOG_DRIVER)
SH_LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/run-tap.sh $(SHELL)
AM_TESTS_ENVIRONMENT = \
	CMOCKA_MESSAGE_OUTPUT=TAP; export CMOCKA_MESSAGE_OUTPUT; \
	top_srcdir='$(abs_top_srcdir)'; export top_srcdir; \
	top_builddir='$(abs_top_builddir)'; export top_builddir;

EXTRA_DIST += tests/lib.sh tests/beds.sh tests/run-tap.sh tests/testlib.h

# The tests that take minutes run before every other test: `make -jN
# check` starts tests in the order of TESTS, and the suite ends when its
# last long test does. Seconds on the 2-core CI machine (Nov 28 2026), CPU
# seconds in brackets: the torch 2 preemptions 350 (200), the Lightning
# modes 300 to 500 (160), the fault campaign 340 (60, mostly waiting for
# Slurm and timeouts), the Lightning stops 140 alone (80; 300 while
# Lightning gave its ranks, alone on their nodes, two threads each),
# Lightning 160 (150), the torch 1.13 preemptions 150
# (80), the demo 130 (100), the GPU bundle built without a GPU 120 and the
# Debian packages 90, the torch tests and Fashion-MNIST on both torches 80
# to 150 (mostly CPU);
# and the tests that mostly wait for Slurm, a few CPU seconds each
# (SPANK_WAITING: the job shapes' churn 190, a grow's fallback 240,
# refused change 150, grows 120 to 140, chosen shape 90; the walltime's
# four 30 to 80). The CPU is what the suite is short of: at most one test
# that mostly waits among the first four, then waiting tests and tests
# that compute in turn (those after the long tests start only once all
# of these have), so that the slots of -j6 are never all held by sleepers
# while the CPU idles. Each is declared (EXTRA_DIST, comment) in its folder's local.mk.
LONG_TESTS = \
	tests/python/torch2/preempt.sh \
	tests/python/lightning_modes.sh \
	tests/faults/short.sh \
	tests/python/lightning_stop.sh \
	tests/python/lightning.sh \
	tests/python/preempt.sh \
	tests/spank/shapes_churn.sh \
	tests/python/demo.sh \
	tests/spank/grow_fallback.sh \
	tests/python/torch2/torch.sh \
	tests/spank/shapes_refused.sh \
	tests/gpu/no_gpu.sh \
	tests/spank/grow.sh \
	tests/python/torch2/fmnist.sh \
	tests/spank/grow_gpus.sh \
	tests/python/fmnist.sh \
	tests/spank/shapes.sh \
	tests/packaging/deb.sh \
	tests/spank/walltime.sh \
	tests/python/torch.sh \
	tests/spank/walltime-change.sh \
	tests/spank/requeue-guard.sh \
	tests/spank/elastic.sh

include $(srcdir)/tests/unit/local.mk

include $(srcdir)/tests/cluster/local.mk
include $(srcdir)/tests/s3/local.mk
include $(srcdir)/tests/coll/local.mk
include $(srcdir)/tests/coord/local.mk
include $(srcdir)/tests/fuzz/local.mk
include $(srcdir)/tests/storage/local.mk
include $(srcdir)/tests/ckpt/local.mk

# `make check-unit`: the unit tests alone. `make check-sanitized`: those
# and the integration tests of the coordinator and the checkpoints, whose
# programs are C (what the sanitizer build of contrib/setup/check.sh runs,
# with DPT_SANITIZED=1: the Python parts of those tests skip, python3 not
# being built with the sanitizers).
check-unit:
	$(MAKE) $(AM_MAKEFLAGS) check TESTS="$(UNIT_TESTS)"
check-sanitized:
	$(MAKE) $(AM_MAKEFLAGS) check \
		TESTS="$(UNIT_TESTS) $(COORD_TESTS) $(CKPT_TESTS)"
.PHONY: check-unit check-sanitized
# What make distcheck runs in the tree built from the tarball
# (contrib/setup/check.sh passes TESTS='$(DIST_TESTS)'): the unit tests and
# the tests of what the tarball carries for users (the man pages, the
# Python package's pip install and its struct layouts). The integration
# tests run once, in make check of the source tree; distcheck-hook checks
# that the tarball holds every tracked file they use.
DIST_TESTS = $(UNIT_TESTS) tests/man/man.sh tests/python/venv.sh tests/python/layout.sh
include $(srcdir)/tests/spank/local.mk
include $(srcdir)/tests/python/local.mk
include $(srcdir)/tests/gpu/local.mk

# The manual pages stand alone: no warnings, no path of the source tree.
MAN_TESTS = tests/man/man.sh
TESTS += $(MAN_TESTS)
EXTRA_DIST += $(MAN_TESTS)
include $(srcdir)/tests/packaging/local.mk
include $(srcdir)/tests/faults/local.mk
include $(srcdir)/tests/shrink/local.mk

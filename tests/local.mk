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

EXTRA_DIST += tests/lib.sh tests/run-tap.sh

# The tests that take minutes, slowest first (on the 2-core CI machine: the
# fault campaign 260 s, the preemptions 220 s each, the Lightning tests 130
# to 175 s, the demo 130 s). They run before every other test: `make -jN
# check` starts tests in the order of TESTS, and the suite ends when its
# last long test does. Each is declared (EXTRA_DIST, comment) in its
# folder's local.mk.
LONG_TESTS = \
	tests/faults/short.sh \
	tests/python/preempt.sh \
	tests/python/torch2/preempt.sh \
	tests/python/lightning_stop.sh \
	tests/python/lightning_modes.sh \
	tests/python/lightning.sh \
	tests/python/demo.sh

if HAVE_CMOCKA
UNIT_TESTS = \
	tests/unit/test_error \
	tests/unit/test_parse \
	tests/unit/test_buf \
	tests/unit/test_jsonl \
	tests/unit/test_scalars \
	tests/unit/test_spank_config \
	tests/unit/test_setting_names \
	tests/unit/test_wire \
	tests/unit/test_client \
	tests/unit/test_net \
	tests/unit/test_stepd \
	tests/unit/test_coord \
	tests/unit/test_kv \
	tests/unit/test_requeue \
	tests/unit/test_sampler \
	tests/unit/test_gpu_probe \
	tests/unit/test_run_as \
	tests/unit/test_metrics \
	tests/unit/test_event_log
check_PROGRAMS += $(UNIT_TESTS)
TESTS += $(UNIT_TESTS)
UNIT_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
UNIT_LDADD = common/libdptcommon.la $(CMOCKA_LIBS)
tests_unit_test_error_SOURCES = tests/unit/test_error.c
tests_unit_test_error_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_error_LDADD = $(UNIT_LDADD)
tests_unit_test_parse_SOURCES = tests/unit/test_parse.c
tests_unit_test_parse_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_parse_LDADD = $(UNIT_LDADD)
tests_unit_test_buf_SOURCES = tests/unit/test_buf.c
tests_unit_test_buf_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_buf_LDADD = $(UNIT_LDADD)
tests_unit_test_jsonl_SOURCES = tests/unit/test_jsonl.c
tests_unit_test_jsonl_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_jsonl_LDADD = $(UNIT_LDADD)
tests_unit_test_scalars_SOURCES = tests/unit/test_scalars.c
tests_unit_test_scalars_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_scalars_LDADD = $(UNIT_LDADD) -lm
tests_unit_test_spank_config_SOURCES = tests/unit/test_spank_config.c spank/settings.c
tests_unit_test_spank_config_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_spank_config_LDADD = $(UNIT_LDADD)
# The names of the settings, walked through the plugin's and the
# coordinator's parsers.
tests_unit_test_setting_names_SOURCES = tests/unit/test_setting_names.c \
	spank/settings.c coordinator/options.c
tests_unit_test_setting_names_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_setting_names_LDADD = $(UNIT_LDADD)
tests_unit_test_wire_SOURCES = tests/unit/test_wire.c
tests_unit_test_wire_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_wire_LDADD = $(UNIT_LDADD)
# The client against a hostile fake coordinator (a thread on loopback).
tests_unit_test_client_SOURCES = tests/unit/test_client.c
tests_unit_test_client_CFLAGS = $(UNIT_CFLAGS) $(ZMQ_CFLAGS)
tests_unit_test_client_LDADD = $(UNIT_LDADD) $(ZMQ_LIBS) -lpthread
tests_unit_test_gpu_probe_SOURCES = tests/unit/test_gpu_probe.c worker/gpu_probe.c
tests_unit_test_gpu_probe_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_gpu_probe_LDADD = $(UNIT_LDADD)
# Needs root (as slurmstepd): the child becomes nobody.
tests_unit_test_run_as_SOURCES = tests/unit/test_run_as.c spank/run_as.c
tests_unit_test_run_as_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_run_as_LDADD = $(UNIT_LDADD)
tests_unit_test_net_SOURCES = tests/unit/test_net.c
tests_unit_test_net_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_net_LDADD = $(UNIT_LDADD)
# slurmstepd's side of the plugin with a fake Slurm and a fake client.
tests_unit_test_stepd_SOURCES = tests/unit/test_stepd.c spank/stepd.c spank/run_as.c \
	spank/settings.c
tests_unit_test_stepd_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/spank
tests_unit_test_stepd_CFLAGS = $(UNIT_CFLAGS) $(ZMQ_CFLAGS)
tests_unit_test_stepd_LDADD = $(UNIT_LDADD)
# The coordinator's state machine and key-value store, with no socket: the
# test injects the sender (libzmq only for its message buffers).
tests_unit_test_coord_SOURCES = tests/unit/test_coord.c coordinator/coord.c coordinator/coord_gen.c coordinator/coord_report.c \
	coordinator/kv.c coordinator/peers.c
tests_unit_test_coord_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/coordinator \
	-DDPT_TOP_SRCDIR='"$(abs_top_srcdir)"' 
tests_unit_test_coord_CFLAGS = $(UNIT_CFLAGS) $(ZMQ_CFLAGS)
tests_unit_test_coord_LDADD = $(UNIT_LDADD) $(ZMQ_LIBS)
tests_unit_test_kv_SOURCES = tests/unit/test_kv.c coordinator/kv.c coordinator/coord_gen.c coordinator/coord_report.c \
	coordinator/coord.c coordinator/peers.c
tests_unit_test_kv_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/coordinator
tests_unit_test_kv_CFLAGS = $(UNIT_CFLAGS) $(ZMQ_CFLAGS)
tests_unit_test_kv_LDADD = $(UNIT_LDADD) $(ZMQ_LIBS)
tests_unit_test_requeue_SOURCES = tests/unit/test_requeue.c \
	coordinator/requeue.c
tests_unit_test_requeue_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/coordinator
tests_unit_test_requeue_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_requeue_LDADD = $(UNIT_LDADD)
tests_unit_test_metrics_SOURCES = tests/unit/test_metrics.c \
	coordinator/metrics.c
tests_unit_test_metrics_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/coordinator
tests_unit_test_metrics_CFLAGS = $(UNIT_CFLAGS) $(ZMQ_CFLAGS)
tests_unit_test_metrics_LDADD = $(UNIT_LDADD)
# The run's events through the coordinator's writer and the tool's reader.
tests_unit_test_event_log_SOURCES = tests/unit/test_event_log.c \
	coordinator/events.c tool/event_line.c
tests_unit_test_event_log_CPPFLAGS = $(AM_CPPFLAGS) \
	-I$(top_srcdir)/coordinator -I$(top_srcdir)/tool
tests_unit_test_event_log_CFLAGS = $(UNIT_CFLAGS) $(ZMQ_CFLAGS) \
	$(JANSSON_CFLAGS)
tests_unit_test_event_log_LDADD = storage/libdptstorage.la $(UNIT_LDADD) \
	$(JANSSON_LIBS) $(CURL_LIBS) $(CRYPTO_LIBS) -lpthread -lm
# The sampler's source is built in: the test also checks its internal
# random stream (worker/sampler_int.h), which the library hides.
tests_unit_test_sampler_SOURCES = tests/unit/test_sampler.c worker/sampler.c
tests_unit_test_sampler_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_sampler_LDADD = $(UNIT_LDADD)
endif

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

# Unit tests: cmocka programs printing TAP, each built from
# tests/unit/NAME.c (and the sources its _SOURCES adds: a private module
# built in). UNIT_TESTS is the one list of them: `make check-unit`, `make
# check-sanitized` and distcheck's DIST_TESTS run it. A new test: a line in
# UNIT_TESTS and a stanza of its group's shape below.
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
	tests/unit/test_shapes \
	tests/unit/test_sampler \
	tests/unit/test_gpu_probe \
	tests/unit/test_run_as \
	tests/unit/test_metrics \
	tests/unit/test_event_log \
	tests/unit/test_run_rates \
	tests/unit/test_cpu_reduce \
	tests/unit/test_cpu_hello \
	tests/unit/test_coll_ops \
	tests/unit/test_storage_sigv4 \
	tests/unit/test_storage_uri \
	tests/unit/test_storage_xml \
	tests/unit/test_storage_posix \
	tests/unit/test_storage_enospc \
	tests/unit/test_storage_s3_classify \
	tests/unit/test_ckpt_manifest \
	tests/unit/test_ckpt_plan \
	tests/unit/test_ckpt_interval
check_PROGRAMS += $(UNIT_TESTS)
TESTS += $(UNIT_TESTS)

# The groups: what a module's tests are built and linked with.
# common/, with the plugin's or the coordinator's sources built in.
UNIT_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
UNIT_LDADD = common/libdptcommon.la $(CMOCKA_LIBS)
UNIT_COORD_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/coordinator
# The CPU collective backend (worker/libdptcpu.la).
UNIT_CPU_LDADD = worker/libdptcpu.la worker/libdptrain.la $(UNIT_LDADD)
# The storage backends (tests/storage/local.mk's flags).
UNIT_STORAGE_CFLAGS = $(STORAGE_TEST_CFLAGS) $(CMOCKA_CFLAGS)
UNIT_STORAGE_LDADD = $(STORAGE_TEST_LDADD) $(CMOCKA_LIBS)
# The checkpoints.
UNIT_CKPT_CFLAGS = $(UNIT_CFLAGS) $(JANSSON_CFLAGS)
UNIT_CKPT_LDADD = ckpt/libdptckpt.la storage/libdptstorage.la \
	common/libdptcommon.la worker/libdptrain.la $(JANSSON_LIBS) \
	$(XXHASH_LIBS) $(CURL_LIBS) $(CRYPTO_LIBS) $(CMOCKA_LIBS)

tests_unit_test_error_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_error_LDADD = $(UNIT_LDADD)
tests_unit_test_parse_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_parse_LDADD = $(UNIT_LDADD)
tests_unit_test_buf_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_buf_LDADD = $(UNIT_LDADD)
tests_unit_test_jsonl_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_jsonl_LDADD = $(UNIT_LDADD)
tests_unit_test_scalars_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_scalars_LDADD = $(UNIT_LDADD) -lm
tests_unit_test_wire_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_wire_LDADD = $(UNIT_LDADD)
tests_unit_test_net_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_net_LDADD = $(UNIT_LDADD)
# The client against a hostile fake coordinator (a thread on loopback).
tests_unit_test_client_CFLAGS = $(UNIT_CFLAGS) $(ZMQ_CFLAGS)
tests_unit_test_client_LDADD = $(UNIT_LDADD) $(ZMQ_LIBS) -lpthread

# The plugin's settings; their names walked through the plugin's and the
# coordinator's parsers.
tests_unit_test_spank_config_SOURCES = tests/unit/test_spank_config.c \
	spank/settings.c
tests_unit_test_spank_config_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_spank_config_LDADD = $(UNIT_LDADD)
# The settings' rows, walked through the plugin's parsers and merge, srun's
# command line for the coordinator and the coordinator's parser.
tests_unit_test_setting_names_SOURCES = tests/unit/test_setting_names.c \
	spank/settings.c spank/srun.c coordinator/options.c
tests_unit_test_setting_names_CPPFLAGS = $(AM_CPPFLAGS) \
	-DDPT_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_setting_names_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_setting_names_LDADD = $(UNIT_LDADD)
# Needs root (as slurmstepd): the child becomes nobody.
tests_unit_test_run_as_SOURCES = tests/unit/test_run_as.c spank/run_as.c
tests_unit_test_run_as_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_run_as_LDADD = $(UNIT_LDADD)
# slurmstepd's side of the plugin with a fake Slurm and a fake client.
tests_unit_test_stepd_SOURCES = tests/unit/test_stepd.c spank/stepd.c \
	spank/run_as.c spank/settings.c
tests_unit_test_stepd_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/spank
tests_unit_test_stepd_CFLAGS = $(UNIT_CFLAGS) $(ZMQ_CFLAGS)
tests_unit_test_stepd_LDADD = $(UNIT_LDADD)

# The coordinator's state machine and key-value store, with no socket: the
# test injects the sender (tests/unit/recorder.c; libzmq only for its
# message buffers).
UNIT_COORD_SOURCES = coordinator/coord.c coordinator/coord_gen.c \
	coordinator/coord_report.c coordinator/kv.c coordinator/peers.c \
	tests/unit/recorder.c
tests_unit_test_coord_SOURCES = tests/unit/test_coord.c $(UNIT_COORD_SOURCES)
tests_unit_test_coord_CPPFLAGS = $(UNIT_COORD_CPPFLAGS) \
	-DDPT_TOP_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_coord_CFLAGS = $(UNIT_CFLAGS) $(ZMQ_CFLAGS)
tests_unit_test_coord_LDADD = $(UNIT_LDADD) $(ZMQ_LIBS)
tests_unit_test_kv_SOURCES = tests/unit/test_kv.c $(UNIT_COORD_SOURCES)
tests_unit_test_kv_CPPFLAGS = $(UNIT_COORD_CPPFLAGS)
tests_unit_test_kv_CFLAGS = $(UNIT_CFLAGS) $(ZMQ_CFLAGS)
tests_unit_test_kv_LDADD = $(UNIT_LDADD) $(ZMQ_LIBS)
tests_unit_test_requeue_SOURCES = tests/unit/test_requeue.c \
	coordinator/requeue.c
tests_unit_test_requeue_CPPFLAGS = $(UNIT_COORD_CPPFLAGS)
tests_unit_test_requeue_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_requeue_LDADD = $(UNIT_LDADD)
tests_unit_test_shapes_SOURCES = tests/unit/test_shapes.c \
	coordinator/shape_choice.c
tests_unit_test_shapes_CPPFLAGS = $(UNIT_COORD_CPPFLAGS)
tests_unit_test_shapes_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_shapes_LDADD = $(UNIT_LDADD) -lm
tests_unit_test_metrics_SOURCES = tests/unit/test_metrics.c \
	coordinator/metrics.c
tests_unit_test_metrics_CPPFLAGS = $(UNIT_COORD_CPPFLAGS)
tests_unit_test_metrics_CFLAGS = $(UNIT_CFLAGS) $(ZMQ_CFLAGS)
tests_unit_test_metrics_LDADD = $(UNIT_LDADD)
# The run's event log (common/event_log.h) written by the coordinator's
# formatter and read back by the tool's reader.
tests_unit_test_run_rates_SOURCES = tests/unit/test_run_rates.c \
	tool/run_rates.c tool/event_line.c
tests_unit_test_run_rates_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tool
tests_unit_test_run_rates_CFLAGS = $(UNIT_CFLAGS) $(JANSSON_CFLAGS)
tests_unit_test_run_rates_LDADD = $(UNIT_LDADD) $(JANSSON_LIBS)
tests_unit_test_event_log_SOURCES = tests/unit/test_event_log.c \
	coordinator/events.c tool/event_line.c
tests_unit_test_event_log_CPPFLAGS = $(AM_CPPFLAGS) \
	-I$(top_srcdir)/coordinator -I$(top_srcdir)/tool
tests_unit_test_event_log_CFLAGS = $(UNIT_CFLAGS) $(ZMQ_CFLAGS) \
	$(JANSSON_CFLAGS)
tests_unit_test_event_log_LDADD = storage/libdptstorage.la $(UNIT_LDADD) \
	$(JANSSON_LIBS) $(CURL_LIBS) $(CRYPTO_LIBS) -lpthread -lm

# The worker's modules built in: the sampler's test also checks its
# internal random stream (worker/sampler_int.h), which the library hides.
tests_unit_test_sampler_SOURCES = tests/unit/test_sampler.c worker/sampler.c
tests_unit_test_sampler_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_sampler_LDADD = $(UNIT_LDADD)
tests_unit_test_gpu_probe_SOURCES = tests/unit/test_gpu_probe.c \
	worker/gpu_probe.c
tests_unit_test_gpu_probe_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_gpu_probe_LDADD = $(UNIT_LDADD)

# The CPU backend's reduction kernels, its data plane's HELLO codec and
# key derivation.
tests_unit_test_cpu_reduce_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_cpu_reduce_LDADD = $(UNIT_CPU_LDADD) -lm
tests_unit_test_cpu_reduce_LDFLAGS = -no-install
tests_unit_test_cpu_hello_CFLAGS = $(UNIT_CFLAGS) $(CRYPTO_CFLAGS)
tests_unit_test_cpu_hello_LDADD = $(UNIT_CPU_LDADD) $(CRYPTO_LIBS)
tests_unit_test_cpu_hello_LDFLAGS = -no-install
# The backends' operations (worker/coll.h): the list, the lookup, the
# capabilities, the CPU backend through them. The seam's sources are built
# in: libdptrain hides them.
tests_unit_test_coll_ops_SOURCES = tests/unit/test_coll_ops.c \
	worker/coll.c worker/nccl.c worker/gpu_probe.c
tests_unit_test_coll_ops_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_coll_ops_LDADD = $(UNIT_CPU_LDADD)
tests_unit_test_coll_ops_LDFLAGS = -no-install
if HAVE_NCCL
tests_unit_test_coll_ops_CFLAGS += $(CUDA_CFLAGS) $(NCCL_CFLAGS)
tests_unit_test_coll_ops_LDADD += $(NCCL_LIBS) $(CUDA_LIBS)
endif

# The storage backends: the signer, the URI and XML parsers, the posix
# backend, the table of S3 outcomes.
tests_unit_test_storage_sigv4_CFLAGS = $(UNIT_STORAGE_CFLAGS)
tests_unit_test_storage_sigv4_LDADD = $(UNIT_STORAGE_LDADD)
tests_unit_test_storage_uri_CFLAGS = $(UNIT_STORAGE_CFLAGS)
tests_unit_test_storage_uri_LDADD = $(UNIT_STORAGE_LDADD)
tests_unit_test_storage_xml_CFLAGS = $(UNIT_STORAGE_CFLAGS)
tests_unit_test_storage_xml_LDADD = $(UNIT_STORAGE_LDADD)
tests_unit_test_storage_posix_CFLAGS = $(UNIT_STORAGE_CFLAGS)
tests_unit_test_storage_posix_LDADD = $(UNIT_STORAGE_LDADD)
tests_unit_test_storage_enospc_CFLAGS = $(UNIT_STORAGE_CFLAGS)
tests_unit_test_storage_enospc_LDADD = $(UNIT_STORAGE_LDADD)
tests_unit_test_storage_s3_classify_CFLAGS = $(UNIT_STORAGE_CFLAGS)
tests_unit_test_storage_s3_classify_LDADD = $(UNIT_STORAGE_LDADD)

# The checkpoints: the manifest codec, the resharding planner, and
# --dp-ckpt-every=auto's interval (Young/Daly) and its bounds.
tests_unit_test_ckpt_manifest_CFLAGS = $(UNIT_CKPT_CFLAGS)
tests_unit_test_ckpt_manifest_LDADD = $(UNIT_CKPT_LDADD)
tests_unit_test_ckpt_plan_CFLAGS = $(UNIT_CKPT_CFLAGS)
tests_unit_test_ckpt_plan_LDADD = $(UNIT_CKPT_LDADD)
tests_unit_test_ckpt_interval_CFLAGS = $(UNIT_CKPT_CFLAGS)
tests_unit_test_ckpt_interval_LDADD = $(UNIT_CKPT_LDADD) -lm
endif

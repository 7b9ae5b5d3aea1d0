# dptrain-coordinator: one per job step, started by the SPANK plugin.
bin_PROGRAMS += coordinator/dptrain-coordinator
coordinator_dptrain_coordinator_SOURCES = \
	coordinator/main.c coordinator/service.h \
	coordinator/loop.c coordinator/loop.h \
	coordinator/router.c coordinator/signals.c \
	coordinator/status_file.c coordinator/report.c \
	coordinator/options.c coordinator/options.h \
	coordinator/zap.c coordinator/zap.h \
	coordinator/coord.c coordinator/coord.h coordinator/coord_int.h \
	coordinator/coord_gen.c coordinator/coord_report.c \
	coordinator/peers.c coordinator/peers.h \
	coordinator/kv.c coordinator/kv.h \
	coordinator/walltime.c coordinator/walltime.h \
	coordinator/requeue.c coordinator/requeue.h \
	coordinator/shape_choice.c coordinator/shape_choice.h \
	coordinator/shape_slurm.c coordinator/shape_slurm.h \
	coordinator/shape_grow.c \
	coordinator/shape_requeue.c coordinator/shape_requeue.h \
	coordinator/shape_fallback.c coordinator/shape_fallback.h \
	tool/event_line.c tool/run_rates.c tool/run_events.c \
	coordinator/events.c coordinator/events.h \
	coordinator/metrics.c coordinator/metrics.h \
	coordinator/sodium_alloc.c
# The run's events are read back, as `dptrain status` reads them (tool/),
# for the speed --shapes chooses by.
coordinator_dptrain_coordinator_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tool
coordinator_dptrain_coordinator_CFLAGS = $(AM_CFLAGS) $(ZMQ_CFLAGS) \
	$(JANSSON_CFLAGS)
# The run's events go through the storage layer (coordinator/events.c).
coordinator_dptrain_coordinator_LDADD = storage/libdptstorage.la \
	common/libdptcommon.la $(ZMQ_LIBS) $(CURL_LIBS) $(CRYPTO_LIBS) \
	$(SLURM_LIBS) $(JANSSON_LIBS) -lm
dist_man_MANS += doc/man/dptrain-coordinator.1

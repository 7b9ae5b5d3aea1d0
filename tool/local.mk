# dptrain: the command-line tool (doc/man/dptrain.1): `dptrain ckpt
# ls|show|verify|gc URI` (cli.c, over ckpt/libdptckpt), `dptrain status`
# from a job's coordinator or a run's events (status.c; status_job.c: what
# Slurm says of a job, the owner's status files), `dptrain plot` (plot.c).
bin_PROGRAMS += dptrain
dptrain_SOURCES = tool/cli.c tool/status.c tool/status.h tool/plot.c \
	tool/event_line.c tool/event_line.h \
	tool/run_rates.c tool/run_rates.h \
	tool/run_events.c tool/run_events.h \
	tool/status_job.c \
	tool/plot.h
dptrain_LDADD = ckpt/libdptckpt.la storage/libdptstorage.la \
	common/libdptcommon.la worker/libdptrain.la \
	$(JANSSON_LIBS) $(XXHASH_LIBS) $(CURL_LIBS) $(CRYPTO_LIBS)
dist_man_MANS += doc/man/dptrain.1

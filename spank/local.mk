# dptrain.so, the SPANK plugin loaded by srun, sbatch, salloc and slurmstepd.
# Only slurm_spank_* and plugin_* symbols are exported (spank/dptrain.lds).
spank_LTLIBRARIES += spank/dptrain.la
spank_dptrain_la_SOURCES = \
	spank/plugin.c spank/plugin.h \
	spank/settings.c spank/settings.h \
	spank/srun.c \
	spank/stepd.c \
	spank/run_as.c spank/run_as.h
spank_dptrain_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DDPT_COORDINATOR_PATH='"$(bindir)/dptrain-coordinator"'
# The version script decides what is exported; hidden visibility would hide
# the entry points Slurm looks up by name.
spank_dptrain_la_CFLAGS = $(AM_CFLAGS) $(ZMQ_CFLAGS) -fvisibility=default
spank_dptrain_la_LIBADD = common/libdptcommon_spank.la $(ZMQ_LIBS) $(CRYPTO_LIBS)
# No -lslurm: the symbols come from the process (srun, slurmstepd) that loads us.
spank_dptrain_la_LDFLAGS = -module -avoid-version -shared \
	-Wl,--version-script=$(srcdir)/spank/dptrain.lds
spank_dptrain_la_DEPENDENCIES = common/libdptcommon_spank.la $(srcdir)/spank/dptrain.lds
EXTRA_DIST += spank/dptrain.lds
dist_man_MANS += doc/man/dptrain.8 doc/man/dptrain.conf.5

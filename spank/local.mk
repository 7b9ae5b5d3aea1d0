# dptrain.so, the SPANK plugin loaded by srun, sbatch, salloc and slurmstepd.
# Only slurm_spank_* and plugin_* symbols are exported (spank/dptrain.lds).
spank_LTLIBRARIES += spank/dptrain.la
spank_dptrain_la_SOURCES = spank/plugin.c
spank_dptrain_la_CFLAGS = $(AM_CFLAGS)
spank_dptrain_la_LIBADD = common/libdptcommon.la
# No -lslurm: the symbols come from the process (srun, slurmstepd) that loads us.
spank_dptrain_la_LDFLAGS = -module -avoid-version -shared \
	-Wl,--version-script=$(srcdir)/spank/dptrain.lds
spank_dptrain_la_DEPENDENCIES = common/libdptcommon.la $(srcdir)/spank/dptrain.lds
EXTRA_DIST += spank/dptrain.lds

# Benchmarks, built by plain `make` and run by hand (doc/protocol.md has no
# numbers: they are in the commit messages and the performance record).
#
# bench/rendezvous: rendezvous time of N simulated workers against the real
# coordinator, and failure detection with real libdptrain workers. It links
# coordinator/sodium_alloc.c for the same reason the coordinator does: its
# thousands of CURVE clients live in one process.
noinst_PROGRAMS += bench/rendezvous
bench_rendezvous_SOURCES = bench/rendezvous.c bench/join.h \
	coordinator/sodium_alloc.c
bench_rendezvous_CFLAGS = $(AM_CFLAGS) $(ZMQ_CFLAGS) \
	-DDPT_COORDINATOR_BIN='"$(abs_top_builddir)/coordinator/dptrain-coordinator"' \
	-DDPT_TCPSTORE_SCRIPT='"$(abs_top_srcdir)/bench/rendezvous_tcpstore.py"'
bench_rendezvous_LDADD = worker/libdptrain.la common/libdptcommon.la $(ZMQ_LIBS)
EXTRA_DIST += bench/rendezvous_tcpstore.py

# Benchmarks. bench/allreduce: dptrain's CPU backend next to Open MPI's
# MPI_Allreduce in the same run (doc/PERFORMANCE.md has the figures and
# the command). bench/allreduce_mpi is the MPI side, built with $(MPICC)
# when configure found it; bench/allreduce runs it under mpirun.
noinst_PROGRAMS += bench/allreduce
bench_allreduce_SOURCES = bench/allreduce.c bench/bench.h \
	tests/coll/harness.c tests/coll/harness.h
bench_allreduce_LDADD = worker/libdptcpu.la worker/libdptrain.la \
	common/libdptcommon.la -lm
# A real executable, not a libtool wrapper: it finds allreduce_mpi beside
# itself through /proc/self/exe.
bench_allreduce_LDFLAGS = -no-install
EXTRA_DIST += bench/allreduce_mpi.c

if HAVE_MPI
# Automake has no per-target compiler: compile and link with the MPI
# wrapper compiler in one rule. Building bench/allreduce builds it too.
EXTRA_bench_allreduce_DEPENDENCIES = bench/allreduce_mpi$(EXEEXT)
CLEANFILES += bench/allreduce_mpi$(EXEEXT)
bench/allreduce_mpi$(EXEEXT): bench/allreduce_mpi.c bench/bench.h
	@$(MKDIR_P) bench
	$(AM_V_CC)$(MPICC) $(DPT_CFLAGS) $(CFLAGS) -o $@ $(srcdir)/bench/allreduce_mpi.c
endif

# bench/ckpt: checkpoint save, stall and resharding load against dd and
# memcpy in the same run (doc/PERFORMANCE.md, "Checkpoints"); with --s3,
# to and from S3 against curl (doc/PERFORMANCE.md, "Checkpoints on S3").
noinst_PROGRAMS += bench/ckpt
bench_ckpt_SOURCES = bench/ckpt.c bench/ckpt_peers.c bench/ckpt_peers.h \
	bench/bench.h bench/join.h
bench_ckpt_CFLAGS = $(AM_CFLAGS) $(XXHASH_CFLAGS) $(JANSSON_CFLAGS) \
	-DDPT_COORDINATOR_BIN='"$(abs_top_builddir)/coordinator/dptrain-coordinator"'
# With --s3 it deletes its objects at the end through ckpt/ and storage/
# (linked as the dptrain tool links them) and times curl as its peer.
bench_ckpt_LDADD = ckpt/libdptckpt.la storage/libdptstorage.la \
	common/libdptcommon.la worker/libdptrain.la $(JANSSON_LIBS) \
	$(XXHASH_LIBS) $(CURL_LIBS) $(CRYPTO_LIBS)
EXTRA_DIST += bench/torch_ckpt.py
# The time from a walltime stop to the resumed run's first step, split
# (a script: it runs the demo on a throw-away cluster).
EXTRA_DIST += bench/restart.sh bench/restart_split.py bench/flood_cpu.sh \
	bench/shapes

# bench/flooder: a connection flood at a coordinator's port without the
# step's secret, for bench/observe's flood job and tests/coord/flood.sh.
noinst_PROGRAMS += bench/flooder
bench_flooder_SOURCES = bench/flooder.c
bench_flooder_CFLAGS = $(AM_CFLAGS) $(ZMQ_CFLAGS)
bench_flooder_LDADD = common/libdptcommon.la $(ZMQ_LIBS)

# bench/observe: a job's step time while `dptrain status` asks every
# second, and while /metrics is scraped every second, against the same job
# unwatched in the same run; and the bytes of its events per step
# (doc/PERFORMANCE.md, "Watching a job").
noinst_PROGRAMS += bench/observe
bench_observe_SOURCES = bench/observe.c bench/bench.h bench/join.h
bench_observe_CFLAGS = $(AM_CFLAGS) \
	-DDPT_COORDINATOR_BIN='"$(abs_top_builddir)/coordinator/dptrain-coordinator"' \
	-DDPT_DPTRAIN_BIN='"$(abs_top_builddir)/dptrain"' \
	-DDPT_FLOODER_BIN='"$(abs_top_builddir)/bench/flooder"'
bench_observe_LDADD = worker/libdptrain.la common/libdptcommon.la

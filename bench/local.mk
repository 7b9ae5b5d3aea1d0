# Benchmarks, built by plain `make` and run by hand (doc/protocol.md has no
# numbers: they are in the commit messages and the performance record).
#
# bench/rendezvous: rendezvous time of N simulated workers against the real
# coordinator, and failure detection with real libdptrain workers. It links
# coordinator/sodium_alloc.c for the same reason the coordinator does: its
# thousands of CURVE clients live in one process.
noinst_PROGRAMS += bench/rendezvous
bench_rendezvous_SOURCES = bench/rendezvous.c coordinator/sodium_alloc.c
bench_rendezvous_CFLAGS = $(AM_CFLAGS) $(ZMQ_CFLAGS) \
	-DDPT_COORDINATOR_BIN='"$(abs_top_builddir)/coordinator/dptrain-coordinator"'
bench_rendezvous_LDADD = worker/libdptrain.la common/libdptcommon.la $(ZMQ_LIBS)

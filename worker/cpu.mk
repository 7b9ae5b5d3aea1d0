# The CPU collective backend (worker/cpu_comm.h): shared memory between the
# ranks of a node, a TCP ring between nodes. A convenience library so that
# the tests and the benchmark can link its internal (hidden) symbols.
noinst_LTLIBRARIES += worker/libdptcpu.la
worker_libdptcpu_la_SOURCES = \
	worker/cpu_comm.h \
	worker/cpu_comm.c \
	worker/cpu_coll.c \
	worker/cpu_hello.c worker/cpu_hello.h \
	worker/cpu_reduce.c worker/cpu_reduce.h \
	worker/cpu_ring.c worker/cpu_ring.h \
	worker/cpu_shm.c worker/cpu_shm.h \
	worker/cpu_watch.c worker/cpu_watch.h
worker_libdptcpu_la_CFLAGS = $(AM_CFLAGS) -fPIC $(CRYPTO_CFLAGS)
worker_libdptcpu_la_LIBADD = $(CRYPTO_LIBS)

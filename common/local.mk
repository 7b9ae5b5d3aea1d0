# The internal library shared by every component (errors, logging, parsers,
# buffers, wire messages, the grammar of storage URIs and keys). It is
# linked into the worker library, the coordinator and the plugin; it is
# never installed.
noinst_LTLIBRARIES += common/libdptcommon.la
common_libdptcommon_la_SOURCES = \
	common/error.c \
	common/assertion.h common/clock.h common/cuda_rt.h common/hash.h \
	common/ratelimit.h \
	common/log.c common/log.h \
	common/parse.c common/parse.h \
	common/buf.c common/buf.h \
	common/jsonl.c common/jsonl.h \
	common/event_log.c common/event_log.h \
	common/scalars.c common/scalars.h \
	common/wire.c common/wire.h \
	common/client.c common/client.h \
	common/net.c common/net.h \
	common/file.c common/file.h \
	common/setting_names.c common/setting_names.h common/settings.def \
	common/settings_end.h \
	common/uri.c common/uri.h \
	common/shape.c common/shape.h
common_libdptcommon_la_CFLAGS = $(AM_CFLAGS) -fPIC $(ZMQ_CFLAGS) $(CRYPTO_CFLAGS)
# The wire code's keys and exit report need libzmq and libcrypto; whatever
# links this library gets them too.
common_libdptcommon_la_LIBADD = $(ZMQ_LIBS) $(CRYPTO_LIBS)

# The plugin's copy, without internal assertions (NDEBUG): the plugin runs
# inside srun and slurmstepd, which a broken invariant must not abort
# (common/assertion.h); every other program and the unit tests check them.
noinst_LTLIBRARIES += common/libdptcommon_spank.la
common_libdptcommon_spank_la_SOURCES = $(common_libdptcommon_la_SOURCES)
common_libdptcommon_spank_la_CPPFLAGS = $(AM_CPPFLAGS) -DNDEBUG
common_libdptcommon_spank_la_CFLAGS = $(common_libdptcommon_la_CFLAGS)
common_libdptcommon_spank_la_LIBADD = $(common_libdptcommon_la_LIBADD)

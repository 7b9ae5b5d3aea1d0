# Sharded checkpoints (doc/checkpoint-format.md). libdptckpt holds what
# needs no collectives (manifest codec, planner, shard headers, listing,
# verification, retention) and is shared by libdptrain and the `dptrain`
# tool. The public dpt_ckpt_* API is part of libdptrain: ckpt/ckpt.c (the
# object, registration, the entry points), ckpt/save.c, ckpt/commit.c and
# ckpt/load.c, sharing ckpt/ckpt_priv.h.
noinst_LTLIBRARIES += ckpt/libdptckpt.la
ckpt_libdptckpt_la_SOURCES = \
	ckpt/ckpt_int.h \
	ckpt/cover.c \
	ckpt/interval.c \
	ckpt/manifest.c \
	ckpt/plan.c \
	ckpt/shard.c \
	ckpt/store.c
ckpt_libdptckpt_la_CFLAGS = $(AM_CFLAGS) -fPIC $(JANSSON_CFLAGS) $(XXHASH_CFLAGS)
ckpt_libdptckpt_la_LIBADD = $(JANSSON_LIBS) $(XXHASH_LIBS) -lm

pkginclude_HEADERS += include/dptrain/ckpt.h
worker_libdptrain_la_SOURCES += ckpt/ckpt.c ckpt/ckpt_priv.h ckpt/commit.c \
	ckpt/load.c ckpt/save.c
worker_libdptrain_la_LIBADD += ckpt/libdptckpt.la $(JANSSON_LIBS) $(XXHASH_LIBS)

# Device-memory tensors (doc/checkpoint-format.md, "Device memory"): all
# the CUDA calls of the checkpoints, built only with CUDA; without it
# ckpt/ckpt.c refuses device tensors at registration.
if HAVE_CUDA
worker_libdptrain_la_SOURCES += ckpt/cuda.c
worker_libdptrain_la_CFLAGS += $(CUDA_CFLAGS)
worker_libdptrain_la_LIBADD += $(CUDA_LIBS)
endif

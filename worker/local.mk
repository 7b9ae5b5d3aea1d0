# libdptrain: the library that training programs link.
#
# The collectives run through a backend's operations (worker/coll.h, the
# list in worker/coll.c): worker/cpu.mk builds the CPU backend
# (worker/cpu_comm.h: shared memory within a node, a TCP ring between
# nodes); worker/nccl.c is the NCCL backend, compiled to stubs that report
# DPT_ENOTSUP when configure found no NCCL.
lib_LTLIBRARIES += worker/libdptrain.la
pkginclude_HEADERS += include/dptrain/dptrain.h include/dptrain/error.h \
	include/dptrain/sampler.h
worker_libdptrain_la_SOURCES = \
	worker/version.c worker/abi.c worker/abi.h \
	worker/sampler.c worker/sampler_int.h \
	worker/dptrain.c worker/init.c worker/ctx.h worker/internal.h \
	worker/logger.c \
	worker/agent.c worker/agent.h \
	worker/coll.c worker/coll.h \
	worker/nccl.c worker/nccl.h worker/gpu_probe.c worker/gpu_probe.h
worker_libdptrain_la_CFLAGS = $(AM_CFLAGS) $(ZMQ_CFLAGS)
worker_libdptrain_la_LIBADD = worker/libdptcpu.la common/libdptcommon.la \
	$(ZMQ_LIBS) -lm
# -version-info CURRENT:REVISION:AGE, libtool's rules ("Updating library
# version information" in its manual), applied at each release that
# changes the library:
# - the code changed, no interface did: REVISION + 1;
# - an interface was added, removed or changed: CURRENT + 1, REVISION 0;
# - then, interfaces were added: AGE + 1; interfaces were removed or
#   changed (an old program could break): AGE 0.
# The soname is libdptrain.so.(CURRENT - AGE); the Python binding loads it
# by that name (_SONAME in worker/python/dptrain/__init__.py), and a
# change of a public struct's layout other than an appended field is a
# change of interface (<dptrain/dptrain.h>, "the ABI").
# 1:0:1: the *_sized functions were added, every 0:0:0 symbol is kept.
# 2:0:2: dpt_log and dpt_set_total_steps were added.
# 3:0:3: dpt_ckpt_step_error was added.
# 4:0:4: dpt_set_global_batch was added.
worker_libdptrain_la_LDFLAGS = -version-info 4:0:4 -no-undefined
if HAVE_NCCL
worker_libdptrain_la_CFLAGS += $(CUDA_CFLAGS) $(NCCL_CFLAGS)
worker_libdptrain_la_LIBADD += $(NCCL_LIBS) $(CUDA_LIBS)
endif

include $(srcdir)/worker/cpu.mk

# The Python package: ctypes over libdptrain, no compiled part
# (dptrain, dptrain.torch, dptrain.lightning; doc/python.md).
pythonpkgdir = $(pythonmoddir)/dptrain
dist_pythonpkg_DATA = worker/python/dptrain/__init__.py \
	worker/python/dptrain/torch.py worker/python/dptrain/lightning.py \
	worker/python/dptrain/_settings.py
# The same modules for pip (`pip install worker/python`, into any virtual
# environment), with a build backend that needs nothing from an index.
EXTRA_DIST += worker/python/pyproject.toml worker/python/backend/dptrain_backend.py

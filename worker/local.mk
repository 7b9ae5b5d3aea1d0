# libdptrain: the library that training programs link.
lib_LTLIBRARIES += worker/libdptrain.la
pkginclude_HEADERS += include/dptrain/dptrain.h include/dptrain/error.h
worker_libdptrain_la_SOURCES = worker/version.c
worker_libdptrain_la_LIBADD = worker/libdptcpu.la common/libdptcommon.la
worker_libdptrain_la_LDFLAGS = -version-info 0:0:0 -no-undefined

include $(srcdir)/worker/cpu.mk

# The storage layer behind checkpoints (see storage/storage.h), built as a
# convenience library linked into libdptrain.
noinst_LTLIBRARIES += storage/libdptstorage.la
storage_libdptstorage_la_SOURCES = \
	storage/sigv4.c storage/sigv4.h \
	storage/xml.c storage/xml.h
storage_libdptstorage_la_CFLAGS = $(AM_CFLAGS) -fPIC $(CURL_CFLAGS) $(CRYPTO_CFLAGS)
storage_libdptstorage_la_LIBADD = $(CURL_LIBS) $(CRYPTO_LIBS)
worker_libdptrain_la_LIBADD += storage/libdptstorage.la $(CURL_LIBS) $(CRYPTO_LIBS)

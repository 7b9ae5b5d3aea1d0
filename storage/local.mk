# The storage layer behind checkpoints: one interface (storage/storage.h),
# a posix backend (parallel file systems) and an s3 backend (libcurl,
# our own SigV4 signer). A convenience library linked into libdptrain.
noinst_LTLIBRARIES += storage/libdptstorage.la
storage_libdptstorage_la_SOURCES = \
	storage/storage.c storage/storage.h storage/backend.h \
	storage/posix.c storage/posix.h storage/posix_writer.c \
	storage/posix_append.c \
	storage/posix_tree.c storage/posix_dirs.c \
	storage/s3.c storage/s3.h storage/s3_writer.c storage/s3_request.c \
	storage/s3_outcome.c storage/s3_config.c \
	storage/sigv4.c storage/sigv4.h \
	storage/xml.c storage/xml.h
storage_libdptstorage_la_CFLAGS = $(AM_CFLAGS) -fPIC $(CURL_CFLAGS) $(CRYPTO_CFLAGS)
storage_libdptstorage_la_LIBADD = $(CURL_LIBS) $(CRYPTO_LIBS)
worker_libdptrain_la_LIBADD += storage/libdptstorage.la $(CURL_LIBS) $(CRYPTO_LIBS)
EXTRA_DIST += doc/storage.md

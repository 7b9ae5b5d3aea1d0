/*
 * What a storage backend provides to storage.c, which checks arguments
 * (keys, ranges) and dispatches. Keys reaching a backend are valid
 * (dpt__storage_key_check) and relative to the root.
 *
 * A backend is a row of storage.c's table `backends[]`: its scheme (from
 * common/uri.h, whose grammar parses the URI), its open (below) and its
 * capabilities (storage.h, enum dpt__storage_cap). Its open returns a
 * struct dpt__storage_backend whose OPS are its operations.
 */
#ifndef DPT_STORAGE_BACKEND_H
#define DPT_STORAGE_BACKEND_H

#include "storage.h"

struct dpt__storage_ops;

/* What storage.c sees of a backend and of its writers: each backend embeds
 * these first in its own structs and sets OPS. */
struct dpt__storage_backend {
	const struct dpt__storage_ops *ops;
};
struct dpt__storage_writer {
	const struct dpt__storage_ops *ops;
};

struct dpt__storage_ops {
	const char *name;
	void (*destroy)(struct dpt__storage_backend *b);
	int (*writer_new)(struct dpt__storage_backend *b, const char *key,
			  struct dpt__storage_writer **out);
	int (*write_at)(struct dpt__storage_writer *w, const void *buf,
			size_t len, uint64_t offset);
	/* finish and abort free W */
	int (*finish)(struct dpt__storage_writer *w);
	void (*abort)(struct dpt__storage_writer *w);
	int (*put_if_absent)(struct dpt__storage_backend *b, const char *key,
			     const void *buf, size_t len);
	int (*read)(struct dpt__storage_backend *b, const char *key,
		    uint64_t offset, size_t len, void *buf);
	int (*stat)(struct dpt__storage_backend *b, const char *key,
		    uint64_t *size);
	int (*list)(struct dpt__storage_backend *b, const char *prefix,
		    dpt__storage_list_fn fn, void *ctx);
	int (*delete)(struct dpt__storage_backend *b, const char *const *keys,
		      size_t n);
	/* NULL: delete */
	int (*recycle)(struct dpt__storage_backend *b, const char *const *keys,
		       size_t n);
	int (*gc)(struct dpt__storage_backend *b, const char *prefix,
		  long older_than_s, size_t *removed);
	/* NULL: nothing to prepare */
	int (*reserve)(struct dpt__storage_backend *b, uint64_t bytes);
	/* Appends whole lines to KEY, cheaply (the row's capabilities have
	 * DPT__STORAGE_CAP_APPEND; storage.h says what it must do). NULL
	 * (and no capability): storage.c appends by rewriting the object
	 * whole through a writer. */
	int (*append)(struct dpt__storage_backend *b, const char *key,
		      const void *buf, size_t len);
};

/* The backends get a struct dpt__storage_opts with every default filled
 * in (storage.c, fill_conf): "conf" below. */

/* A backend's open, its table row's: on success *OUT is the backend,
 * released by its ops->destroy. URI (of the row's scheme), OPTS (as the
 * caller gave them: "unset" values are the backend's to default) and
 * CONF are only borrowed. */
typedef int (*dpt__storage_open_fn)(const struct dpt__storage_uri *uri,
				    const struct dpt__storage_opts *opts,
				    const struct dpt__storage_opts *conf,
				    struct dpt__storage_backend **out);

int dpt__posix_open(const struct dpt__storage_uri *uri,
		    const struct dpt__storage_opts *opts,
		    const struct dpt__storage_opts *conf,
		    struct dpt__storage_backend **out);
int dpt__s3_open(const struct dpt__storage_uri *uri,
		 const struct dpt__storage_opts *opts,
		 const struct dpt__storage_opts *conf,
		 struct dpt__storage_backend **out);

/* Maps an errno value to the closest dpt_error (ENOSPC and EDQUOT to
 * DPT_ENOSPC, ENOENT to DPT_ENOENT, ..., anything else to DPT_EIO). */
int dpt__storage_errno(int e);

#endif

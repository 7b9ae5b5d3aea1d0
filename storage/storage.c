#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "assertion.h"
#include "backend.h"
#include "buf.h"
#include "log.h"
#include "storage.h"
#include "uri.h"

#define MIB (1024 * 1024UL)

/*
 * The backends, one row per scheme of common/uri.h's grammar (as curl
 * chooses its TLS backend from a table): a new scheme is a row here, a
 * row of the grammar's table, and the backend's own files
 * (doc/architecture.md, "Adding a storage backend").
 */
static const struct backend_row {
	enum dpt__storage_scheme scheme;
	dpt__storage_open_fn open;
	unsigned caps; /* enum dpt__storage_cap */
} backends[] = {
	{DPT__STORAGE_FILE, dpt__posix_open, DPT__STORAGE_CAP_APPEND},
	{DPT__STORAGE_S3, dpt__s3_open, 0},
};

struct dpt__storage {
	struct dpt__storage_backend *backend;
	const struct backend_row *row;
	char *uri;
};

struct dpt__storage_appender {
	struct dpt__storage *s;
	char *key;
	/* Without DPT__STORAGE_CAP_APPEND: every byte appended so far, which
	 * each append writes whole. */
	struct dpt__buf written;
};

void dpt__storage_opts_init(struct dpt__storage_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->path_style = -1;
}

int dpt__storage_errno(int e)
{
	switch (e) {
	case ENOSPC:
	case EDQUOT:
		return DPT_ENOSPC;
	case ENOENT:
	case ENOTDIR:
		return DPT_ENOENT;
	case EEXIST:
		return DPT_EEXIST;
	case ENOMEM:
		return DPT_ENOMEM;
	case ENAMETOOLONG:
		return DPT_EINVAL;
	default:
		return DPT_EIO;
	}
}

static int fill_conf(const struct dpt__storage_opts *o,
		     struct dpt__storage_opts *c)
{
	*c = *o; /* then the defaults of what was left 0 */
	c->part_size = o->part_size ? o->part_size : 8 * MIB;
	c->max_inflight = o->max_inflight ? o->max_inflight : 4;
	c->retries = o->retries < 0 ? 0 : o->retries ? o->retries : 5;
	c->retry_base_ms = o->retry_base_ms > 0 ? o->retry_base_ms : 200;
	c->retry_max_ms = o->retry_max_ms > 0 ? o->retry_max_ms : 5000;
	c->connect_timeout_ms =
		o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 10000;
	c->stall_timeout_ms =
		o->stall_timeout_ms > 0 ? o->stall_timeout_ms : 60000;
	c->list_page_size = o->list_page_size ? o->list_page_size : 1000;
	if (c->max_inflight < 1 || c->max_inflight > 64) {
		dpt__error("invalid storage option max_inflight %d: it must be "
			   "between 1 and 64",
			   c->max_inflight);
		return DPT_EINVAL;
	}
	if (c->list_page_size < 1 || c->list_page_size > 1000) {
		dpt__error("invalid storage option list_page_size %d: it must "
			   "be between 1 and 1000",
			   c->list_page_size);
		return DPT_EINVAL;
	}
	if (c->retry_max_ms < c->retry_base_ms)
		c->retry_max_ms = c->retry_base_ms;
	return 0;
}

int dpt__storage_open(const char *uri, const struct dpt__storage_opts *opts,
		      struct dpt__storage **out)
{
	struct dpt__storage_opts defaults;
	struct dpt__storage_opts conf;
	struct dpt__storage_uri u;
	struct dpt__storage *s = NULL;
	const char *why;
	int rc;

	*out = NULL;
	if (!opts) {
		dpt__storage_opts_init(&defaults);
		opts = &defaults;
	}
	rc = dpt__storage_uri_parse(uri, &u, &why);
	if (rc) {
		if (rc == DPT_EINVAL)
			dpt__error("invalid storage URI '%s': %s",
				   uri ? uri : "(null)", why);
		return rc;
	}
	rc = fill_conf(opts, &conf);
	if (rc)
		goto out;
	s = calloc(1, sizeof(*s));
	if (!s || !(s->uri = strdup(uri))) {
		rc = DPT_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < sizeof(backends) / sizeof(*backends); i++)
		if (backends[i].scheme == u.scheme)
			s->row = &backends[i];
	DPT_ASSERT(s->row); /* a scheme of the grammar without a backend */
	rc = s->row->open(&u, opts, &conf, &s->backend);
	DPT_ASSERT(rc || !(s->row->caps & DPT__STORAGE_CAP_APPEND) ||
		   s->backend->ops->append);
	if (rc)
		goto out;
	*out = s;
	s = NULL;
out:
	if (s)
		free(s->uri);
	free(s);
	dpt__storage_uri_release(&u);
	return rc;
}

void dpt__storage_destroy(struct dpt__storage **sp)
{
	struct dpt__storage *s = sp ? *sp : NULL;

	if (!s)
		return;
	s->backend->ops->destroy(s->backend);
	free(s->uri);
	free(s);
	*sp = NULL;
}

const char *dpt__storage_uri(const struct dpt__storage *s)
{
	return s->uri;
}

static int check_key(const struct dpt__storage *s, const char *key,
		     bool empty_ok)
{
	int rc = dpt__storage_key_check(key, empty_ok);
	if (rc)
		dpt__error("invalid key '%s' in '%s': keys are '/'-separated "
			   "names of letters, digits, '.', '_', '-' and '~'",
			   key ? key : "(null)", s->uri);
	return rc;
}

int dpt__storage_writer_new(struct dpt__storage *s, const char *key,
			    struct dpt__storage_writer **out)
{
	int rc;

	*out = NULL;
	rc = check_key(s, key, false);
	if (rc)
		return rc;
	return s->backend->ops->writer_new(s->backend, key, out);
}

int dpt__storage_writer_write_at(struct dpt__storage_writer *w, const void *buf,
				 size_t len, uint64_t offset)
{
	if (len == 0)
		return 0;
	if (offset + len < offset)
		return DPT_ERANGE;
	return w->ops->write_at(w, buf, len, offset);
}

int dpt__storage_writer_finish(struct dpt__storage_writer **wp)
{
	struct dpt__storage_writer *w = *wp;

	*wp = NULL;
	return w->ops->finish(w);
}

void dpt__storage_writer_abort(struct dpt__storage_writer **wp)
{
	struct dpt__storage_writer *w = wp ? *wp : NULL;

	if (!w)
		return;
	*wp = NULL;
	w->ops->abort(w);
}

int dpt__storage_put_if_absent(struct dpt__storage *s, const char *key,
			       const void *buf, size_t len)
{
	int rc = check_key(s, key, false);
	if (rc)
		return rc;
	return s->backend->ops->put_if_absent(s->backend, key, buf, len);
}

int dpt__storage_read(struct dpt__storage *s, const char *key, uint64_t offset,
		      size_t len, void *buf)
{
	int rc = check_key(s, key, false);
	if (rc)
		return rc;
	if (len == 0)
		return 0;
	if (offset + len < offset)
		return DPT_ERANGE;
	return s->backend->ops->read(s->backend, key, offset, len, buf);
}

int dpt__storage_stat(struct dpt__storage *s, const char *key, uint64_t *size)
{
	int rc = check_key(s, key, false);
	if (rc)
		return rc;
	return s->backend->ops->stat(s->backend, key, size);
}

int dpt__storage_list(struct dpt__storage *s, const char *prefix,
		      dpt__storage_list_fn fn, void *ctx)
{
	int rc = check_key(s, prefix, true);
	if (rc)
		return rc;
	return s->backend->ops->list(s->backend, prefix, fn, ctx);
}

static int check_keys(struct dpt__storage *s, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int rc = check_key(s, keys[i], false);
		if (rc)
			return rc;
	}
	return 0;
}

int dpt__storage_delete(struct dpt__storage *s, const char *const *keys,
			size_t n)
{
	int rc = check_keys(s, keys, n);

	if (rc || n == 0)
		return rc;
	return s->backend->ops->delete (s->backend, keys, n);
}

int dpt__storage_recycle(struct dpt__storage *s, const char *const *keys,
			 size_t n)
{
	const struct dpt__storage_ops *ops = s->backend->ops;
	int rc = check_keys(s, keys, n);

	if (rc || n == 0)
		return rc;
	return (ops->recycle ? ops->recycle : ops->delete)(s->backend, keys, n);
}

int dpt__storage_reserve(struct dpt__storage *s, uint64_t bytes)
{
	if (!s->backend->ops->reserve)
		return 0;
	return s->backend->ops->reserve(s->backend, bytes);
}

int dpt__storage_gc(struct dpt__storage *s, const char *prefix,
		    long older_than_s, size_t *removed)
{
	size_t dummy;
	int rc = check_key(s, prefix, true);
	if (rc)
		return rc;
	return s->backend->ops->gc(s->backend, prefix, older_than_s,
				   removed ? removed : &dummy);
}

unsigned dpt__storage_caps(const struct dpt__storage *s)
{
	return s->row->caps;
}

int dpt__storage_appender_new(struct dpt__storage *s, const char *key,
			      struct dpt__storage_appender **out)
{
	struct dpt__storage_appender *a;
	int rc = check_key(s, key, false);

	*out = NULL;
	if (rc)
		return rc;
	a = calloc(1, sizeof(*a));
	if (!a || !(a->key = strdup(key))) {
		free(a);
		return DPT_ENOMEM;
	}
	a->s = s;
	dpt__buf_init(&a->written, DPT__STORAGE_REWRITE_MAX);
	*out = a;
	return 0;
}

/* An append without DPT__STORAGE_CAP_APPEND: the whole object again. */
static int rewrite(struct dpt__storage_appender *a, const void *buf, size_t len)
{
	struct dpt__storage_writer *w = NULL;
	size_t before = a->written.len;
	int rc = dpt__buf_append(&a->written, buf, len);

	if (rc) {
		dpt__error("cannot append to '%s/%s': it would pass the %u MiB "
			   "that an appender rewrites whole",
			   a->s->uri, a->key, DPT__STORAGE_REWRITE_MAX >> 20);
		return rc;
	}
	rc = dpt__storage_writer_new(a->s, a->key, &w);
	if (!rc)
		rc = dpt__storage_writer_write_at(w, a->written.data,
						  a->written.len, 0);
	if (!rc)
		rc = dpt__storage_writer_finish(&w);
	else
		dpt__storage_writer_abort(&w);
	if (rc) {
		/* Forgotten: the caller's next try sends them again. */
		a->written.len = before;
		a->written.data[before] = '\0';
	}
	return rc;
}

int dpt__storage_append(struct dpt__storage_appender *a, const void *buf,
			size_t len)
{
	const struct dpt__storage_ops *ops = a->s->backend->ops;

	if (len == 0)
		return 0;
	if (!ops->append)
		return rewrite(a, buf, len);
	return ops->append(a->s->backend, a->key, buf, len);
}

void dpt__storage_appender_destroy(struct dpt__storage_appender **ap)
{
	struct dpt__storage_appender *a = ap ? *ap : NULL;

	if (!a)
		return;
	dpt__buf_release(&a->written);
	free(a->key);
	free(a);
	*ap = NULL;
}

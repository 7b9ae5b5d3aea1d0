/*
 * The posix backend's writer.
 *
 * A writer writes a temporary file next to the object, with pwrite() from
 * the backend's pool of threads so that several writes of one large buffer
 * are in flight (what a parallel file system needs to reach its
 * bandwidth), and finish renames it over the key after fsync: the object
 * appears whole or not at all, and a failed write (ENOSPC, EIO) never
 * touches an object committed before.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "log.h"
#include "posix.h"

/* One writer: a temporary file that finish renames over the key. */
struct dpt__posix_writer {
	struct dpt__storage_writer base; /* first: the ops take it */
	struct dpt__posix *b;
	char *key;
	char *name; /* last component of key */
	char tmp[300];
	int dirfd;
	int fd;
	int fd_direct; /* -1 unless direct_io and the file system accepts it */
	atomic_bool direct_refused;
	atomic_int err;		       /* sticky dpt_error */
	atomic_uint_least64_t written; /* bytes written, summed */
	atomic_uint_least64_t end;     /* furthest end of a write */
	bool recycled; /* written over a recycled file: truncate at finish */
};

/* Writes an aligned range (offset and length multiples of DPT__DIO_ALIGN)
 * through the O_DIRECT descriptor, from BUF or, when BUF is not aligned,
 * through the worker's bounce buffer. Returns EINVAL when the file system
 * refuses the direct write (the caller falls back to the page cache). */
static int write_direct(struct dpt__posix_writer *w,
			struct dpt__posix_io_worker *wk, const char *buf,
			size_t len, uint64_t off)
{
	if (((uintptr_t)buf & (DPT__DIO_ALIGN - 1)) == 0)
		return dpt__posix_pwrite_all(w->fd_direct, buf, len, off);
	if (!dpt__posix_bounce(wk, &w->b->conf))
		return ENOMEM;
	while (len > 0) {
		size_t n = len < wk->bounce_len ? len : wk->bounce_len;
		int err;
		memcpy(wk->bounce, buf, n);
		err = dpt__posix_pwrite_all(w->fd_direct, wk->bounce, n, off);
		if (err)
			return err;
		buf += n;
		len -= n;
		off += n;
	}
	return 0;
}

static int write_job(struct dpt__posix_io_job *job,
		     struct dpt__posix_io_worker *wk)
{
	struct dpt__posix_writer *w = job->w;
	uint64_t a0, a1;
	size_t head, mid;
	int err;

	if (w->fd_direct < 0 || atomic_load(&w->direct_refused))
		return dpt__posix_pwrite_all(w->fd, job->buf, job->len,
					     job->off);
	/* Only whole aligned blocks go direct. The unaligned head and tail
	 * go through the page cache: a block shared with a neighbouring
	 * range is then merged in the cache instead of being overwritten by
	 * a direct write of stale bytes, and fsync flushes both paths. */
	a0 = (job->off + DPT__DIO_ALIGN - 1) & ~(DPT__DIO_ALIGN - 1);
	a1 = (job->off + job->len) & ~(DPT__DIO_ALIGN - 1);
	if (a1 <= a0)
		return dpt__posix_pwrite_all(w->fd, job->buf, job->len,
					     job->off);
	head = (size_t)(a0 - job->off);
	mid = (size_t)(a1 - a0);
	err = dpt__posix_pwrite_all(w->fd, job->buf, head, job->off);
	if (!err) {
		err = write_direct(w, wk, job->buf + head, mid, a0);
		if (err == EINVAL) {
			if (!atomic_exchange(&w->direct_refused, true))
				dpt__info("'%s/%s': the file system refuses "
					  "O_DIRECT writes; writing through "
					  "the page cache",
					  w->b->root_msg, w->key);
			err = dpt__posix_pwrite_all(w->fd, job->buf + head, mid,
						    a0);
		}
	}
	if (!err)
		err = dpt__posix_pwrite_all(w->fd, job->buf + head + mid,
					    job->len - head - mid, a1);
	return err;
}

static void writer_free(struct dpt__posix_writer *w, bool unlink_tmp)
{
	if (w->fd >= 0)
		close(w->fd);
	if (w->fd_direct >= 0)
		close(w->fd_direct);
	if (unlink_tmp && w->tmp[0] && w->dirfd >= 0)
		unlinkat(w->dirfd, w->tmp, 0);
	if (w->dirfd >= 0)
		close(w->dirfd);
	free(w->key);
	free(w);
}

int dpt__posix_writer_new(struct dpt__storage_backend *base, const char *key,
			  struct dpt__storage_writer **out)
{
	struct dpt__posix *b = (struct dpt__posix *)base;
	struct dpt__posix_writer *w;
	const char *name;
	int rc;

	w = calloc(1, sizeof(*w));
	if (!w)
		return DPT_ENOMEM;
	/* The backend's ops serve its writers too. */
	w->base.ops = base->ops;
	w->b = b;
	w->fd = w->fd_direct = w->dirfd = -1;
	w->key = strdup(key);
	if (!w->key) {
		rc = DPT_ENOMEM;
		goto out;
	}
	rc = dpt__posix_open_key_dir(b, key, true, &w->dirfd, &name);
	if (rc)
		goto out;
	w->name = w->key + (name - key);
	w->fd = dpt__posix_claim_recycled(b, w->dirfd, w->name, w->tmp,
					  sizeof(w->tmp));
	w->recycled = w->fd >= 0;
	if (!w->recycled)
		rc = dpt__posix_create_tmp(b, key, w->dirfd, w->name, w->tmp,
					   sizeof(w->tmp), &w->fd);
	if (rc) {
		w->tmp[0] = '\0';
		goto out;
	}
	if (b->conf.direct_io) {
		w->fd_direct = openat(w->dirfd, w->tmp,
				      O_WRONLY | O_DIRECT | O_CLOEXEC);
		if (w->fd_direct < 0)
			dpt__info("'%s/%s': cannot open with O_DIRECT (%s); "
				  "writing through the page cache",
				  b->root_msg, key, strerror(errno));
	}
out:
	if (rc) {
		writer_free(w, true);
		return rc;
	}
	*out = &w->base;
	return 0;
}

static int set_err(struct dpt__posix_writer *w, int err)
{
	int expected = 0, rc = dpt__storage_errno(err);
	if (atomic_compare_exchange_strong(&w->err, &expected, rc))
		dpt__error("cannot write '%s/%s': %s", w->b->root_msg, w->key,
			   strerror(err));
	return atomic_load(&w->err);
}

int dpt__posix_writer_write_at(struct dpt__storage_writer *wb, const void *buf,
			       size_t len, uint64_t offset)
{
	struct dpt__posix_writer *w = (struct dpt__posix_writer *)wb;
	size_t chunk = w->b->conf.part_size, n;
	struct dpt__posix_io_job one, *jobs = &one;
	uint64_t end = offset + len, prev;
	int err, rc = atomic_load(&w->err);

	if (rc)
		return rc;
	if (end > (uint64_t)INT64_MAX)
		return DPT_ERANGE;
	n = (len + chunk - 1) / chunk;
	if (n > 1 && !(jobs = calloc(n, sizeof(*jobs))))
		return DPT_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t o = i * chunk;
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].fn = write_job;
		jobs[i].w = w;
		/* The pool only reads from buf. */
		jobs[i].buf = (char *)(uintptr_t)buf + o;
		jobs[i].len = len - o < chunk ? len - o : chunk;
		jobs[i].off = offset + o;
	}
	/* One small buffered write costs less than a trip to the pool. */
	if (n == 1 && w->fd_direct < 0)
		err = write_job(&jobs[0], NULL);
	else
		err = dpt__posix_pool_run(&w->b->pool, jobs, n);
	if (jobs != &one)
		free(jobs);
	if (err)
		return set_err(w, err);
	atomic_fetch_add(&w->written, len);
	prev = atomic_load(&w->end);
	while (prev < end && !atomic_compare_exchange_weak(&w->end, &prev, end))
		;
	return 0;
}

void dpt__posix_writer_abort(struct dpt__storage_writer *wb)
{
	writer_free((struct dpt__posix_writer *)wb, true);
}

int dpt__posix_writer_finish(struct dpt__storage_writer *wb)
{
	struct dpt__posix_writer *w = (struct dpt__posix_writer *)wb;
	struct dpt__posix *b = w->b;
	uint64_t written = atomic_load(&w->written), end = atomic_load(&w->end);
	int err, rc = atomic_load(&w->err);

	if (rc)
		goto out;
	if (written != end) {
		dpt__error("cannot write '%s/%s': the writes cover %llu bytes "
			   "of %llu (holes or overlapping ranges)",
			   b->root_msg, w->key, (unsigned long long)written,
			   (unsigned long long)end);
		rc = DPT_EINVAL;
		goto out;
	}
	/* A recycled file may be longer than what was written over it. */
	if (w->recycled && ftruncate(w->fd, (off_t)end) < 0) {
		rc = set_err(w, errno);
		goto out;
	}
	err = dpt__posix_fsync(w->fd);
	if (err) {
		/* After a failed fsync the state of the page cache is
		 * unknown: the only safe course is to give the file up. */
		rc = set_err(w, err);
		goto out;
	}
	if (renameat(w->dirfd, w->tmp, w->dirfd, w->name) < 0) {
		err = errno;
		dpt__error("cannot rename '%s' to '%s/%s': %s", w->tmp,
			   b->root_msg, w->key, strerror(err));
		rc = dpt__storage_errno(err);
		goto out;
	}
	w->tmp[0] = '\0';
	err = dpt__posix_fsync(w->dirfd);
	if (err) {
		dpt__error("cannot write '%s/%s': fsync of its directory: %s",
			   b->root_msg, w->key, strerror(err));
		rc = dpt__storage_errno(err);
	}
out:
	writer_free(w, true);
	return rc;
}

/*
 * The posix backend: a directory tree on a local or parallel file system.
 *
 * An object is a regular file. A writer writes a temporary file next to
 * it, with pwrite() from a small pool of threads so that several writes of
 * one large buffer are in flight (what a parallel file system needs to
 * reach its bandwidth), and finish renames it over the key after fsync:
 * the object appears whole or not at all, and a failed write (ENOSPC, EIO)
 * never touches an object committed before. Directories that are created
 * or changed are fsync'ed, or a crash could lose the new names.
 */
#define _GNU_SOURCE /* renameat2, O_DIRECT */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "backend.h"
#include "buf.h"
#include "log.h"

/* O_DIRECT alignment of offsets, lengths and memory: the largest logical
 * block size in use (4 KiB sectors); 512-byte devices accept it too. */
#define DIO_ALIGN 4096UL
#define TMP_TAG ".dpt-tmp."
/* Files that recycle() left in the root for the next writers: '@' is in
 * no key, so no writer's temporary file has this name. */
#define RECYCLED_AS "@recycled"
#define RECYCLED "." RECYCLED_AS TMP_TAG

struct io_job;
struct io_worker {
	char *bounce; /* DIO_ALIGN-aligned, conf.part_size rounded up */
	size_t bounce_len;
};
typedef int (*io_fn)(struct io_job *job, struct io_worker *wk);

struct io_batch {
	int pending;
	int err; /* first errno of the batch's jobs, or 0 */
};

struct io_job {
	io_fn fn;
	struct io_batch *batch;
	struct io_job *next;
	struct posix_writer *w; /* writes */
	int fd;			/* reads */
	int fd_direct;		/* reads: the O_DIRECT descriptor, or -1 */
	struct posix_backend *b; /* reads */
	char *buf;
	size_t len;
	uint64_t off;
};

struct io_pool {
	pthread_mutex_t lock;
	pthread_cond_t work;
	pthread_cond_t done;
	struct io_job *head, *tail;
	pthread_t *threads;
	int nthreads;
	int wanted;
	bool stop;
};

struct posix_backend {
	struct dpt__storage_backend base; /* first: the ops take it */
	char *root;
	const char *root_msg; /* root for messages: "" for "/" */
	int rootfd;
	struct dpt__storage_conf conf;
	struct io_pool pool;
};

struct posix_writer {
	struct dpt__storage_writer base; /* first: the ops take it */
	struct posix_backend *b;
	char *key;
	char *name; /* last component of key */
	char tmp[300];
	int dirfd;
	int fd;
	int fd_direct; /* -1 unless direct_io and the file system accepts it */
	atomic_bool direct_refused;
	atomic_int err;		 /* sticky dpt_error */
	atomic_uint_least64_t written; /* bytes written, summed */
	atomic_uint_least64_t end;     /* furthest end of a write */
	bool recycled; /* written over a recycled file: truncate at finish */
};

static const struct dpt__storage_ops posix_ops;

/* ------------------------------------------------------------ pool */

static void *worker_main(void *arg)
{
	struct io_pool *p = arg;
	struct io_worker wk = {0};

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct io_job *job;
		int err;
		while (!p->head && !p->stop)
			pthread_cond_wait(&p->work, &p->lock);
		if (!p->head)
			break;
		job = p->head;
		p->head = job->next;
		if (!p->head)
			p->tail = NULL;
		pthread_mutex_unlock(&p->lock);
		err = job->fn(job, &wk);
		pthread_mutex_lock(&p->lock);
		if (err && !job->batch->err)
			job->batch->err = err;
		if (--job->batch->pending == 0)
			pthread_cond_broadcast(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	free(wk.bounce);
	return NULL;
}

static void pool_init(struct io_pool *p, int nthreads)
{
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	p->head = p->tail = NULL;
	p->threads = NULL;
	p->nthreads = 0;
	p->wanted = nthreads;
	p->stop = false;
}

static void pool_release(struct io_pool *p)
{
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	free(p->threads);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
}

/* Runs the N jobs on the pool and waits for them; returns the first errno
 * of a failed job, or 0. Threads start on first use; if none can be
 * started, the jobs run in the caller's thread. */
static int pool_run(struct io_pool *p, struct io_job *jobs, size_t n)
{
	struct io_batch batch = {.pending = (int)n, .err = 0};

	pthread_mutex_lock(&p->lock);
	if (!p->threads && p->wanted > 0) {
		p->threads = calloc((size_t)p->wanted, sizeof(pthread_t));
		for (int i = 0; p->threads && i < p->wanted; i++) {
			if (pthread_create(&p->threads[i], NULL, worker_main,
					   p))
				break;
			p->nthreads++;
		}
		p->wanted = 0;
	}
	if (p->nthreads == 0) {
		struct io_worker wk = {0};
		pthread_mutex_unlock(&p->lock);
		for (size_t i = 0; i < n; i++) {
			int err = jobs[i].fn(&jobs[i], &wk);
			if (err && !batch.err)
				batch.err = err;
		}
		free(wk.bounce);
		return batch.err;
	}
	for (size_t i = 0; i < n; i++) {
		jobs[i].batch = &batch;
		jobs[i].next = NULL;
		if (p->tail)
			p->tail->next = &jobs[i];
		else
			p->head = &jobs[i];
		p->tail = &jobs[i];
	}
	pthread_cond_broadcast(&p->work);
	while (batch.pending > 0)
		pthread_cond_wait(&p->done, &p->lock);
	pthread_mutex_unlock(&p->lock);
	return batch.err;
}

/* ------------------------------------------------------------ helpers */

static int pwrite_all(int fd, const char *buf, size_t len, uint64_t off)
{
	while (len > 0) {
		ssize_t n = pwrite(fd, buf, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return EIO;
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Returns 0, an errno, or -1 at an early end of file. */
static int pread_all(int fd, char *buf, size_t len, uint64_t off)
{
	while (len > 0) {
		ssize_t n = pread(fd, buf, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return -1;
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int fsync_retry(int fd)
{
	while (fsync(fd) < 0) {
		if (errno != EINTR)
			return errno;
	}
	return 0;
}

/* The modes of a private run (dpt__storage_opts.private_mode): set with
 * fchmod after creating, since the umask masks what mkdir and open get. */
#define PRIVATE_DIR_MODE 0700
#define PRIVATE_FILE_MODE 0600

/* Makes FD (a file or directory this process created, or the root it
 * owns) MODE exactly; an error is logged, naming WHAT. */
static int make_private(int fd, mode_t mode, const char *what)
{
	if (fchmod(fd, mode) == 0)
		return 0;
	dpt__error("cannot make '%s' private (mode %04o): %s", what,
		   (unsigned)mode, strerror(errno));
	return errno;
}

/*
 * Opens the directory REL (a relative path of '/'-separated components, ""
 * for BASE itself) under BASE, creating missing components when CREATE
 * (mode 0700 exactly when PRIV, else 0777 less the umask);
 * each new directory's parent is fsync'ed so that the name survives a
 * crash. Returns 0 and a descriptor in *OUT, or an errno; *FAILED is the
 * length of REL's prefix that failed (for the message).
 */
static int open_dirs(int base, const char *rel, bool create, bool priv,
		     int *out, size_t *failed)
{
	/* A new open file description, not dup(): a dup shares the
	 * directory offset, and a walk would leave BASE's at its end. */
	int fd = openat(base, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;
	const char *p = rel;

	if (fd < 0)
		return errno;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		char comp[256];
		int next;

		*failed = (size_t)(p - rel) + n;
		if (n == 0) {
			p++;
			continue;
		}
		if (n >= sizeof(comp)) {
			err = ENAMETOOLONG;
			break;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && create) {
			mode_t mode = priv ? PRIVATE_DIR_MODE : 0777;
			bool made = mkdirat(fd, comp, mode) == 0;

			if (!made && errno != EEXIST) {
				err = errno;
				break;
			}
			err = fsync_retry(fd);
			if (err)
				break;
			next = openat(fd, comp,
				      O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			/* Only a directory this call made: one that another
			 * writer made meanwhile is its business. */
			if (next >= 0 && made && priv &&
			    (err = make_private(next, PRIVATE_DIR_MODE, comp))) {
				close(next);
				break;
			}
		}
		if (next < 0) {
			err = errno;
			break;
		}
		close(fd);
		fd = next;
		p += n;
		if (*p == '/')
			p++;
	}
	if (err) {
		close(fd);
		return err;
	}
	*out = fd;
	return 0;
}

/* Splits KEY into its directory (a new string, "" at the root) and its
 * last component (pointing into KEY). */
static int split_key(const char *key, char **dir, const char **name)
{
	const char *slash = strrchr(key, '/');
	*dir = slash ? strndup(key, (size_t)(slash - key)) : strdup("");
	*name = slash ? slash + 1 : key;
	return *dir ? 0 : DPT_ENOMEM;
}

static int open_key_dir(struct posix_backend *b, const char *key,
			bool create, int *dirfd, const char **name)
{
	char *dir;
	size_t failed = 0;
	int err, rc = split_key(key, &dir, name);

	if (rc)
		return rc;
	err = open_dirs(b->rootfd, dir, create, b->conf.private_mode, dirfd,
			&failed);
	if (err) {
		rc = dpt__storage_errno(err);
		if (!(rc == DPT_ENOENT && !create))
			dpt__error("cannot %s '%s/%s': cannot %s directory "
				   "'%s/%.*s': %s",
				   create ? "write" : "reach", b->root_msg, key,
				   create ? "create" : "open", b->root_msg,
				   (int)failed, dir, strerror(err));
	}
	free(dir);
	return rc;
}

static int tmp_name(char *out, size_t size, const char *name)
{
	uint64_t r = 0;
	int n;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^
		    (uint64_t)(uintptr_t)out;
	n = snprintf(out, size, ".%s" TMP_TAG "%016llx", name,
		     (unsigned long long)r);
	return n < 0 || (size_t)n >= size ? DPT_EINVAL : 0;
}

/* Creates a temporary file for NAME in DIRFD; its name goes to TMP. */
static int create_tmp(struct posix_backend *b, const char *key,
		      int dirfd, const char *name, char *tmp, size_t size,
		      int *fd)
{
	for (int tries = 0; tries < 16; tries++) {
		int rc = tmp_name(tmp, size, name);
		if (rc) {
			dpt__error("cannot write '%s/%s': the name is too long",
				   b->root_msg, key);
			return rc;
		}
		*fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			     b->conf.private_mode ? PRIVATE_FILE_MODE : 0666);
		if (*fd >= 0 && b->conf.private_mode &&
		    (rc = make_private(*fd, PRIVATE_FILE_MODE, tmp))) {
			close(*fd);
			unlinkat(dirfd, tmp, 0);
			return dpt__storage_errno(rc);
		}
		if (*fd >= 0)
			return 0;
		if (errno != EEXIST) {
			int err = errno;
			dpt__error("cannot write '%s/%s': %s", b->root_msg, key,
				   strerror(err));
			return dpt__storage_errno(err);
		}
	}
	dpt__error("cannot write '%s/%s': no unused temporary name",
		   b->root_msg, key);
	return DPT_EIO;
}

/* Claims a file left by recycle(): renames it from the root to a new
 * temporary name for NAME in DIRFD, which goes to TMP, and opens it for
 * writing. Returns the descriptor, or -1 when there is none to claim
 * (or claiming failed: the caller creates a file). */
static int claim_recycled(struct posix_backend *b, int dirfd, const char *name,
			  char *tmp, size_t size)
{
	int dfd = openat(b->rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	int fd = -1;
	DIR *d;

	if (dfd < 0)
		return -1;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -1;
	}
	while (fd < 0 && (de = readdir(d))) {
		if (strncmp(de->d_name, RECYCLED, strlen(RECYCLED)) != 0 ||
		    tmp_name(tmp, size, name))
			continue;
		/* Of writers racing for the file, one rename succeeds; the
		 * others find it gone (ENOENT) and try the next. Never
		 * replaces: where NOREPLACE is unknown, nothing is claimed. */
		if (renameat2(b->rootfd, de->d_name, dirfd, tmp,
			      RENAME_NOREPLACE) != 0) {
			if (errno == EINVAL || errno == ENOSYS ||
			    errno == ENOTSUP)
				break;
			continue;
		}
		fd = openat(dirfd, tmp, O_WRONLY | O_CLOEXEC);
		/* A file of an older step keeps its mode: a private run
		 * makes it private (or, failing that, does not use it). */
		if (fd >= 0 && b->conf.private_mode &&
		    fchmod(fd, PRIVATE_FILE_MODE) < 0) {
			close(fd);
			fd = -1;
		}
		if (fd < 0)
			unlinkat(dirfd, tmp, 0);
	}
	closedir(d);
	return fd;
}

/* ------------------------------------------------------------ open */

static void posix_destroy(struct dpt__storage_backend *base)
{
	struct posix_backend *b = (struct posix_backend *)base;
	pool_release(&b->pool);
	if (b->rootfd >= 0)
		close(b->rootfd);
	free(b->root);
	free(b);
}

/* ------------------------------------------------------------ writer */

/* The worker's DIO_ALIGN-aligned bounce buffer of part_size (rounded up),
 * made on first use; NULL when memory is short. */
static char *bounce(struct io_worker *wk, const struct dpt__storage_conf *conf)
{
	if (!wk->bounce) {
		size_t n = (conf->part_size + DIO_ALIGN - 1) & ~(DIO_ALIGN - 1);
		void *p = NULL;
		if (posix_memalign(&p, DIO_ALIGN, n))
			return NULL;
		wk->bounce = p;
		wk->bounce_len = n;
	}
	return wk->bounce;
}

/* Writes an aligned range (offset and length multiples of DIO_ALIGN)
 * through the O_DIRECT descriptor, from BUF or, when BUF is not aligned,
 * through the worker's bounce buffer. Returns EINVAL when the file system
 * refuses the direct write (the caller falls back to the page cache). */
static int write_direct(struct posix_writer *w, struct io_worker *wk,
			const char *buf, size_t len, uint64_t off)
{
	if (((uintptr_t)buf & (DIO_ALIGN - 1)) == 0)
		return pwrite_all(w->fd_direct, buf, len, off);
	if (!bounce(wk, &w->b->conf))
		return ENOMEM;
	while (len > 0) {
		size_t n = len < wk->bounce_len ? len : wk->bounce_len;
		int err;
		memcpy(wk->bounce, buf, n);
		err = pwrite_all(w->fd_direct, wk->bounce, n, off);
		if (err)
			return err;
		buf += n;
		len -= n;
		off += n;
	}
	return 0;
}

static int write_job(struct io_job *job, struct io_worker *wk)
{
	struct posix_writer *w = job->w;
	uint64_t a0, a1;
	size_t head, mid;
	int err;

	if (w->fd_direct < 0 || atomic_load(&w->direct_refused))
		return pwrite_all(w->fd, job->buf, job->len, job->off);
	/* Only whole aligned blocks go direct. The unaligned head and tail
	 * go through the page cache: a block shared with a neighbouring
	 * range is then merged in the cache instead of being overwritten by
	 * a direct write of stale bytes, and fsync flushes both paths. */
	a0 = (job->off + DIO_ALIGN - 1) & ~(DIO_ALIGN - 1);
	a1 = (job->off + job->len) & ~(DIO_ALIGN - 1);
	if (a1 <= a0)
		return pwrite_all(w->fd, job->buf, job->len, job->off);
	head = (size_t)(a0 - job->off);
	mid = (size_t)(a1 - a0);
	err = pwrite_all(w->fd, job->buf, head, job->off);
	if (!err) {
		err = write_direct(w, wk, job->buf + head, mid, a0);
		if (err == EINVAL) {
			if (!atomic_exchange(&w->direct_refused, true))
				dpt__info("'%s/%s': the file system refuses "
					  "O_DIRECT writes; writing through "
					  "the page cache",
					  w->b->root_msg, w->key);
			err = pwrite_all(w->fd, job->buf + head, mid, a0);
		}
	}
	if (!err)
		err = pwrite_all(w->fd, job->buf + head + mid,
				 job->len - head - mid, a1);
	return err;
}

static void writer_free(struct posix_writer *w, bool unlink_tmp)
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

static int posix_writer_new(struct dpt__storage_backend *base, const char *key,
			    struct dpt__storage_writer **out)
{
	struct posix_backend *b = (struct posix_backend *)base;
	struct posix_writer *w;
	const char *name;
	int rc;

	w = calloc(1, sizeof(*w));
	if (!w)
		return DPT_ENOMEM;
	w->base.ops = &posix_ops;
	w->b = b;
	w->fd = w->fd_direct = w->dirfd = -1;
	w->key = strdup(key);
	if (!w->key) {
		rc = DPT_ENOMEM;
		goto out;
	}
	rc = open_key_dir(b, key, true, &w->dirfd, &name);
	if (rc)
		goto out;
	w->name = w->key + (name - key);
	w->fd = claim_recycled(b, w->dirfd, w->name, w->tmp, sizeof(w->tmp));
	w->recycled = w->fd >= 0;
	if (!w->recycled)
		rc = create_tmp(b, key, w->dirfd, w->name, w->tmp,
				sizeof(w->tmp), &w->fd);
	if (rc) {
		w->tmp[0] = '\0';
		goto out;
	}
	if (b->conf.direct_io) {
		w->fd_direct =
			openat(w->dirfd, w->tmp, O_WRONLY | O_DIRECT | O_CLOEXEC);
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

static int set_err(struct posix_writer *w, int err)
{
	int expected = 0, rc = dpt__storage_errno(err);
	if (atomic_compare_exchange_strong(&w->err, &expected, rc))
		dpt__error("cannot write '%s/%s': %s", w->b->root_msg, w->key,
			   strerror(err));
	return atomic_load(&w->err);
}

static int posix_write_at(struct dpt__storage_writer *wb, const void *buf,
			  size_t len, uint64_t offset)
{
	struct posix_writer *w = (struct posix_writer *)wb;
	size_t chunk = w->b->conf.part_size, n;
	struct io_job one, *jobs = &one;
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
		err = pool_run(&w->b->pool, jobs, n);
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

static void posix_abort(struct dpt__storage_writer *wb)
{
	writer_free((struct posix_writer *)wb, true);
}

static int posix_finish(struct dpt__storage_writer *wb)
{
	struct posix_writer *w = (struct posix_writer *)wb;
	struct posix_backend *b = w->b;
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
	err = fsync_retry(w->fd);
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
	err = fsync_retry(w->dirfd);
	if (err) {
		dpt__error("cannot write '%s/%s': fsync of its directory: %s",
			   b->root_msg, w->key, strerror(err));
		rc = dpt__storage_errno(err);
	}
out:
	writer_free(w, true);
	return rc;
}

/* ------------------------------------------------------------ objects */

static int posix_put_if_absent(struct dpt__storage_backend *base,
			       const char *key, const void *buf, size_t len)
{
	struct posix_backend *b = (struct posix_backend *)base;
	struct stat st;
	char tmp[300] = "";
	const char *name;
	int dirfd = -1, fd = -1, err = 0, rc;

	rc = open_key_dir(b, key, true, &dirfd, &name);
	if (rc)
		return rc;
	/* Cheap early answer; the rename below is what decides. */
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		rc = DPT_EEXIST;
		goto out;
	}
	rc = create_tmp(b, key, dirfd, name, tmp, sizeof(tmp), &fd);
	if (rc) {
		tmp[0] = '\0';
		goto out;
	}
	err = pwrite_all(fd, buf, len, 0);
	if (!err)
		err = fsync_retry(fd);
	if (err)
		goto out;
	if (renameat2(dirfd, tmp, dirfd, name, RENAME_NOREPLACE) == 0) {
		tmp[0] = '\0';
	} else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
		/* No RENAME_NOREPLACE here (NFS, older kernels): link() also
		 * fails with EEXIST and never replaces. */
		if (linkat(dirfd, tmp, dirfd, name, 0) < 0)
			err = errno;
	} else {
		err = errno;
	}
	if (err == EEXIST) {
		rc = DPT_EEXIST;
		err = 0;
		goto out;
	}
	if (err)
		goto out;
	err = fsync_retry(dirfd);
out:
	if (err) {
		dpt__error("cannot write '%s/%s': %s", b->root_msg, key,
			   strerror(err));
		rc = dpt__storage_errno(err);
	}
	if (fd >= 0)
		close(fd);
	if (tmp[0])
		unlinkat(dirfd, tmp, 0);
	if (dirfd >= 0)
		close(dirfd);
	return rc;
}

/* Reads an aligned range through the O_DIRECT descriptor FD, into BUF
 * or, when BUF is not aligned, through the worker's bounce buffer. */
static int read_direct(int fd, struct io_worker *wk,
		       const struct dpt__storage_conf *conf, char *buf,
		       size_t len, uint64_t off)
{
	if (((uintptr_t)buf & (DIO_ALIGN - 1)) == 0)
		return pread_all(fd, buf, len, off);
	if (!bounce(wk, conf))
		return ENOMEM;
	while (len > 0) {
		size_t n = len < wk->bounce_len ? len : wk->bounce_len;
		int err = pread_all(fd, wk->bounce, n, off);
		if (err)
			return err;
		memcpy(buf, wk->bounce, n);
		buf += n;
		len -= n;
		off += n;
	}
	return 0;
}

/* Reads one piece: whole aligned blocks through the O_DIRECT descriptor
 * when there is one (no page-cache copy, no readahead competing with the
 * other pieces), the unaligned head and tail through the page cache.
 * Returns 0, an errno, or ERANGE at an early end of file. */
static int read_job(struct io_job *job, struct io_worker *wk)
{
	uint64_t a0 = (job->off + DIO_ALIGN - 1) & ~(DIO_ALIGN - 1);
	uint64_t a1 = (job->off + job->len) & ~(DIO_ALIGN - 1);
	size_t head = (size_t)(a0 - job->off), mid = (size_t)(a1 - a0);
	int err;

	if (job->fd_direct < 0 || a1 <= a0) {
		err = pread_all(job->fd, job->buf, job->len, job->off);
		return err < 0 ? ERANGE : err;
	}
	err = pread_all(job->fd, job->buf, head, job->off);
	if (!err)
		err = read_direct(job->fd_direct, wk, &job->b->conf,
				  job->buf + head, mid, a0);
	if (err == EINVAL) /* refused after all: the page cache then */
		err = pread_all(job->fd, job->buf + head, mid, a0);
	if (!err)
		err = pread_all(job->fd, job->buf + head + mid,
				job->len - head - mid, a1);
	return err < 0 ? ERANGE : err;
}

static int posix_read(struct dpt__storage_backend *base, const char *key,
		      uint64_t offset, size_t len, void *buf)
{
	struct posix_backend *b = (struct posix_backend *)base;
	size_t chunk = b->conf.part_size, n = (len + chunk - 1) / chunk;
	struct io_job one, *jobs = &one;
	struct io_worker wk = {0};
	struct stat st;
	int fd, fd_direct = -1, err = 0, rc = 0;

	fd = openat(b->rootfd, key, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		rc = dpt__storage_errno(err);
		if (rc != DPT_ENOENT)
			dpt__error("cannot read '%s/%s': %s", b->root_msg, key,
				   strerror(err));
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = DPT_ENOENT;
		goto out;
	}
	if (offset + len > (uint64_t)st.st_size) {
		dpt__error("cannot read '%s/%s': bytes %llu to %llu are past "
			   "its end (%llu bytes)",
			   b->root_msg, key, (unsigned long long)offset,
			   (unsigned long long)(offset + len),
			   (unsigned long long)st.st_size);
		rc = DPT_ERANGE;
		goto out;
	}
	if (n > 1 && !(jobs = calloc(n, sizeof(*jobs)))) {
		rc = DPT_ENOMEM;
		goto out;
	}
	/* A file system that refuses O_DIRECT (tmpfs, some FUSE mounts)
	 * is read through the page cache. */
	if (b->conf.direct_io && len >= DIO_ALIGN)
		fd_direct = openat(b->rootfd, key, O_RDONLY | O_DIRECT | O_CLOEXEC);
	for (size_t i = 0; i < n; i++) {
		size_t o = i * chunk;
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].fn = read_job;
		jobs[i].fd = fd;
		jobs[i].fd_direct = fd_direct;
		jobs[i].b = b;
		jobs[i].buf = (char *)buf + o;
		jobs[i].len = len - o < chunk ? len - o : chunk;
		jobs[i].off = offset + o;
	}
	err = n == 1 ? read_job(&jobs[0], &wk) : pool_run(&b->pool, jobs, n);
	free(wk.bounce);
	if (jobs != &one)
		free(jobs);
	if (err == ERANGE) {
		dpt__error("cannot read '%s/%s': it became shorter while "
			   "being read",
			   b->root_msg, key);
		rc = DPT_ERANGE;
	} else if (err) {
		dpt__error("cannot read '%s/%s': %s", b->root_msg, key,
			   strerror(err));
		rc = dpt__storage_errno(err);
	}
out:
	if (fd_direct >= 0)
		close(fd_direct);
	close(fd);
	return rc;
}

static int posix_stat(struct dpt__storage_backend *base, const char *key,
		      uint64_t *size)
{
	struct posix_backend *b = (struct posix_backend *)base;
	struct stat st;
	if (fstatat(b->rootfd, key, &st, 0) < 0) {
		int err = errno, rc = dpt__storage_errno(err);
		if (rc != DPT_ENOENT)
			dpt__error("cannot stat '%s/%s': %s", b->root_msg, key,
				   strerror(err));
		return rc;
	}
	if (!S_ISREG(st.st_mode))
		return DPT_ENOENT;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* ------------------------------------------------------------ walks */

struct entry {
	char *key;
	uint64_t size;
};

struct walk {
	struct posix_backend *b;
	const char *prefix;
	/* list: collect objects; gc: remove temporary files before cutoff */
	bool gc;
	time_t cutoff;
	struct entry *v;
	size_t n, cap;
	size_t removed;
};

static int walk_add(struct walk *wk, const char *key, uint64_t size)
{
	if (wk->n == wk->cap) {
		size_t cap = wk->cap ? 2 * wk->cap : 64;
		struct entry *v = realloc(wk->v, cap * sizeof(*v));
		if (!v)
			return DPT_ENOMEM;
		wk->v = v;
		wk->cap = cap;
	}
	wk->v[wk->n].key = strdup(key);
	if (!wk->v[wk->n].key)
		return DPT_ENOMEM;
	wk->v[wk->n++].size = size;
	return 0;
}

/* Walks directory FD, whose key prefix is DIR ("" or "a/b/"); FILTER is
 * what names in this directory must start with (only at the top). */
static int walk_dir(struct walk *wk, int fd, struct dpt__buf *dir,
		    const char *filter, int depth)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (depth > 64)
		return 0;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return DPT_EIO;
	}
	while (!rc && (de = readdir(d))) {
		const char *nm = de->d_name;
		size_t mark = dir->len;
		struct stat st;
		bool tmp = strstr(nm, TMP_TAG) != NULL;

		if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0)
			continue;
		if (strncmp(nm, filter, strlen(filter)) != 0)
			continue;
		if (fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* removed meanwhile */
		if (S_ISLNK(st.st_mode) &&
		    fstatat(dirfd(d), nm, &st, 0) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub;
			/* Do not follow links to directories: no loops. */
			struct stat lst;
			if (fstatat(dirfd(d), nm, &lst, AT_SYMLINK_NOFOLLOW) <
				    0 ||
			    !S_ISDIR(lst.st_mode))
				continue;
			sub = openat(dirfd(d), nm,
				     O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (sub < 0)
				continue;
			rc = dpt__buf_printf(dir, "%s/", nm);
			if (!rc)
				rc = walk_dir(wk, sub, dir, "", depth + 1);
			else
				close(sub);
		} else if (S_ISREG(st.st_mode)) {
			if (wk->gc) {
				if (tmp && st.st_mtime < wk->cutoff &&
				    unlinkat(dirfd(d), nm, 0) == 0)
					wk->removed++;
				continue;
			}
			if (tmp)
				continue;
			rc = dpt__buf_puts(dir, nm);
			/* Names no key can address are not objects. */
			if (!rc && dpt__storage_key_check(dir->data, false) == 0)
				rc = walk_add(wk, dir->data,
					      (uint64_t)st.st_size);
		}
		dir->len = mark;
		if (dir->data)
			dir->data[mark] = '\0';
		if (rc == DPT_ETOOBIG)
			rc = 0; /* too deep for a key: not an object */
	}
	closedir(d);
	return rc;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->key,
		      ((const struct entry *)b)->key);
}

static int walk(struct walk *wk)
{
	const char *slash = strrchr(wk->prefix, '/');
	const char *filter = slash ? slash + 1 : wk->prefix;
	struct dpt__buf dir;
	size_t failed = 0;
	char *dirpart;
	int fd, err, rc;

	dirpart = strndup(wk->prefix, slash ? (size_t)(slash - wk->prefix) : 0);
	if (!dirpart)
		return DPT_ENOMEM;
	err = open_dirs(wk->b->rootfd, dirpart, false, false, &fd, &failed);
	if (err) {
		free(dirpart);
		if (err == ENOENT || err == ENOTDIR)
			return 0;
		dpt__error("cannot list '%s/%s': %s", wk->b->root_msg,
			   wk->prefix, strerror(err));
		return dpt__storage_errno(err);
	}
	dpt__buf_init(&dir, DPT__STORAGE_KEY_MAX);
	rc = dpt__buf_puts(&dir, dirpart);
	if (!rc && dir.len)
		rc = dpt__buf_puts(&dir, "/");
	if (!rc)
		rc = walk_dir(wk, fd, &dir, filter, 0);
	else
		close(fd);
	if (rc == DPT_EIO)
		dpt__error("cannot list '%s/%s': %s", wk->b->root_msg,
			   wk->prefix, strerror(errno));
	dpt__buf_release(&dir);
	free(dirpart);
	return rc;
}

static void walk_release(struct walk *wk)
{
	for (size_t i = 0; i < wk->n; i++)
		free(wk->v[i].key);
	free(wk->v);
}

static int posix_list(struct dpt__storage_backend *base, const char *prefix,
		      dpt__storage_list_fn fn, void *ctx)
{
	struct posix_backend *b = (struct posix_backend *)base;
	struct walk wk = {.b = b, .prefix = prefix};
	int rc = walk(&wk);

	if (!rc) {
		if (wk.n) /* qsort's array may not be NULL, even empty */
			qsort(wk.v, wk.n, sizeof(*wk.v), cmp_entry);
		for (size_t i = 0; i < wk.n && !rc; i++)
			rc = fn(ctx, wk.v[i].key, wk.v[i].size);
	}
	walk_release(&wk);
	return rc;
}

static int posix_gc(struct dpt__storage_backend *base, const char *prefix,
		    long older_than_s, size_t *removed)
{
	struct posix_backend *b = (struct posix_backend *)base;
	struct walk wk = {.b = b, .prefix = prefix, .gc = true};
	int rc;

	wk.cutoff = time(NULL) - older_than_s;
	rc = walk(&wk);
	*removed = wk.removed;
	walk_release(&wk);
	return rc;
}

/* Removes the directories of KEY that are empty, deepest first; the
 * first one still in use stops it. */
static void remove_empty_dirs(struct posix_backend *b, const char *key)
{
	const char *name;
	char *dir;

	if (split_key(key, &dir, &name))
		return;
	for (;;) {
		char *slash;
		if (!dir[0] || unlinkat(b->rootfd, dir, AT_REMOVEDIR))
			break;
		slash = strrchr(dir, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	free(dir);
}

static int posix_delete(struct dpt__storage_backend *base,
			const char *const *keys, size_t n)
{
	struct posix_backend *b = (struct posix_backend *)base;
	int first = 0;

	for (size_t i = 0; i < n; i++) {
		const char *name;
		int dirfd, rc;

		rc = open_key_dir(b, keys[i], false, &dirfd, &name);
		if (rc == DPT_ENOENT)
			continue;
		if (rc) {
			first = first ? first : rc;
			continue;
		}
		if (unlinkat(dirfd, name, 0) < 0) {
			int err = errno;
			close(dirfd);
			if (err == ENOENT)
				continue;
			dpt__error("cannot delete '%s/%s': %s", b->root_msg,
				   keys[i], strerror(err));
			first = first ? first : dpt__storage_errno(err);
			continue;
		}
		fsync_retry(dirfd);
		close(dirfd);
		remove_empty_dirs(b, keys[i]);
	}
	return first;
}

/* Renames each file to RECYCLED in the root for the next writers, and
 * sets its time, from which gc counts its age; what cannot be recycled is
 * deleted. */
static int posix_recycle(struct dpt__storage_backend *base,
			 const char *const *keys, size_t n)
{
	struct posix_backend *b = (struct posix_backend *)base;
	int first = 0;

	for (size_t i = 0; i < n; i++) {
		char bin[300];
		const char *name;
		int dirfd, rc;

		rc = open_key_dir(b, keys[i], false, &dirfd, &name);
		if (rc == DPT_ENOENT)
			continue;
		if (!rc && tmp_name(bin, sizeof(bin), RECYCLED_AS) == 0 &&
		    renameat2(dirfd, name, b->rootfd, bin, RENAME_NOREPLACE) == 0) {
			if (utimensat(b->rootfd, bin, NULL, 0) < 0)
				unlinkat(b->rootfd, bin, 0);
			fsync_retry(dirfd);
			close(dirfd);
			remove_empty_dirs(b, keys[i]);
			continue;
		}
		if (!rc)
			close(dirfd);
		rc = posix_delete(base, &keys[i], 1);
		if (rc && !first)
			first = rc;
	}
	return first;
}

static const struct dpt__storage_ops posix_ops = {
	.name = "posix",
	.destroy = posix_destroy,
	.writer_new = posix_writer_new,
	.write_at = posix_write_at,
	.finish = posix_finish,
	.abort = posix_abort,
	.put_if_absent = posix_put_if_absent,
	.read = posix_read,
	.stat = posix_stat,
	.list = posix_list,
	.delete = posix_delete,
	.recycle = posix_recycle,
	.gc = posix_gc,
};

/* A private run's root that existed before: made 0700 when it is the
 * user's (what it holds is then out of others' reach, whatever its own
 * modes); another's is left alone, and said. */
static int private_root(struct posix_backend *b)
{
	struct stat st;

	if (fstat(b->rootfd, &st) < 0) {
		dpt__error("cannot stat '%s': %s", b->root, strerror(errno));
		return dpt__storage_errno(errno);
	}
	if ((st.st_mode & 07777) == PRIVATE_DIR_MODE)
		return 0;
	if (st.st_uid != geteuid()) {
		dpt__warn("'%s' belongs to uid %u, not to this user: its "
			  "mode %04o is left as it is (a private run makes "
			  "only its own directories private)",
			  b->root, (unsigned)st.st_uid,
			  (unsigned)(st.st_mode & 07777));
		return 0;
	}
	int err = make_private(b->rootfd, PRIVATE_DIR_MODE, b->root);

	return err ? dpt__storage_errno(err) : 0;
}

int dpt__posix_open(const struct dpt__storage_uri *uri,
		    const struct dpt__storage_conf *conf,
		    struct dpt__storage_backend **out)
{
	struct posix_backend *b;
	size_t failed = 0;
	int fd, err, rc = 0;

	b = calloc(1, sizeof(*b));
	if (!b)
		return DPT_ENOMEM;
	b->base.ops = &posix_ops;
	b->rootfd = -1;
	b->conf = *conf;
	pool_init(&b->pool, conf->max_inflight);
	b->root = strdup(uri->path);
	if (!b->root) {
		rc = DPT_ENOMEM;
		goto out;
	}
	b->root_msg = strcmp(b->root, "/") == 0 ? "" : b->root;
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = DPT_EIO;
		goto out;
	}
	err = open_dirs(fd, b->root + 1, !conf->no_create, conf->private_mode,
			&b->rootfd, &failed);
	close(fd);
	if (err == ENOENT && conf->no_create) {
		rc = DPT_ENOENT; /* the caller says what it looked for */
		goto out;
	}
	if (err) {
		dpt__error("cannot %s directory '/%.*s': %s",
			   conf->no_create ? "open" : "create", (int)failed,
			   b->root + 1, strerror(err));
		rc = dpt__storage_errno(err);
		goto out;
	}
	rc = conf->private_mode ? private_root(b) : 0;
	if (rc)
		goto out;
	*out = &b->base;
out:
	if (rc)
		posix_destroy(&b->base);
	return rc;
}

/*
 * The posix backend: a directory tree on a local or parallel file system.
 *
 * An object is a regular file. This file opens the backend and holds the
 * pool of I/O threads, the directories and temporary files, and the
 * operations on one object (put_if_absent, read, stat); the writer is in
 * posix_writer.c, list, gc, delete and recycle in posix_tree.c.
 * Directories that are created or changed are fsync'ed, or a crash could
 * lose the new names.
 */
#define _GNU_SOURCE /* renameat2, O_DIRECT */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "buf.h"
#include "log.h"
#include "posix.h"

/* Files that recycle() left in the root for the next writers. */
#define RECYCLED "." DPT__POSIX_RECYCLED_AS DPT__POSIX_TMP_TAG

/* ------------------------------------------------------------ pool */

static void *worker_main(void *arg)
{
	struct dpt__posix_io_pool *p = arg;
	struct dpt__posix_io_worker wk = {0};

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct dpt__posix_io_job *job;
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

static void pool_init(struct dpt__posix_io_pool *p, int nthreads)
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

static void pool_release(struct dpt__posix_io_pool *p)
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
int dpt__posix_pool_run(struct dpt__posix_io_pool *p,
			struct dpt__posix_io_job *jobs, size_t n)
{
	struct dpt__posix_io_batch batch = {.pending = (int)n, .err = 0};

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
		struct dpt__posix_io_worker wk = {0};
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

/* The worker's DPT__DIO_ALIGN-aligned bounce buffer of part_size (rounded
 * up), made on first use; NULL when memory is short. */
char *dpt__posix_bounce(struct dpt__posix_io_worker *wk,
			const struct dpt__storage_opts *conf)
{
	if (!wk->bounce) {
		size_t n = (conf->part_size + DPT__DIO_ALIGN - 1) &
			   ~(DPT__DIO_ALIGN - 1);
		void *p = NULL;
		if (posix_memalign(&p, DPT__DIO_ALIGN, n))
			return NULL;
		wk->bounce = p;
		wk->bounce_len = n;
	}
	return wk->bounce;
}

/* ------------------------------------------------------------ helpers */

/* LEN bytes at OFF of FD from WBUF (pwrite) or into RBUF (pread, the
 * other one NULL), through EINTR and short transfers. Returns 0, an
 * errno, or EOF_RC where the file gives no more. */
static int pio_all(int fd, const char *wbuf, char *rbuf, size_t len,
		   uint64_t off, int eof_rc)
{
	while (len > 0) {
		ssize_t n = wbuf ? pwrite(fd, wbuf, len, (off_t)off)
				 : pread(fd, rbuf, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return eof_rc;
		if (wbuf)
			wbuf += n;
		else
			rbuf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

int dpt__posix_pwrite_all(int fd, const char *buf, size_t len, uint64_t off)
{
	return pio_all(fd, buf, NULL, len, off, EIO);
}

/* Returns 0, an errno, or -1 at an early end of file. */
static int pread_all(int fd, char *buf, size_t len, uint64_t off)
{
	return pio_all(fd, NULL, buf, len, off, -1);
}

int dpt__posix_fsync(int fd)
{
	while (fsync(fd) < 0) {
		if (errno != EINTR)
			return errno;
	}
	return 0;
}

int dpt__posix_make_private(int fd, mode_t mode, const char *what)
{
	if (fchmod(fd, mode) == 0)
		return 0;
	dpt__error("cannot make '%s' private (mode %04o): %s", what,
		   (unsigned)mode, strerror(errno));
	return errno;
}

int dpt__posix_tmp_name(char *out, size_t size, const char *name)
{
	uint64_t r = 0;
	int n;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^
		    (uint64_t)(uintptr_t)out;
	n = snprintf(out, size, ".%s" DPT__POSIX_TMP_TAG "%016llx", name,
		     (unsigned long long)r);
	return n < 0 || (size_t)n >= size ? DPT_EINVAL : 0;
}

/* Creates a temporary file for NAME in DIRFD; its name goes to TMP. */
int dpt__posix_create_tmp(struct dpt__posix *b, const char *key, int dirfd,
			  const char *name, char *tmp, size_t size, int *fd)
{
	for (int tries = 0; tries < 16; tries++) {
		int rc = dpt__posix_tmp_name(tmp, size, name);
		if (rc) {
			dpt__error("cannot write '%s/%s': the name is too long",
				   b->root_msg, key);
			return rc;
		}
		*fd = openat(dirfd, tmp,
			     O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			     b->conf.private_mode ? DPT__POSIX_PRIVATE_FILE_MODE
						  : 0666);
		if (*fd >= 0 && b->conf.private_mode &&
		    (rc = dpt__posix_make_private(
			     *fd, DPT__POSIX_PRIVATE_FILE_MODE, tmp))) {
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

/* Whether ST is a file recycle() may have left for this process: a
 * regular file of its own user with one link. Anything else under a
 * recycled name (a link, a hard link or a file of another user's, planted
 * where others can write the root) would have its target overwritten. */
static bool claimable(const struct stat *st)
{
	return S_ISREG(st->st_mode) && st->st_uid == geteuid() &&
	       st->st_nlink == 1;
}

/* Claims a file left by recycle(): renames it from the root to a new
 * temporary name for NAME in DIRFD, which goes to TMP, and opens it for
 * writing. Returns the descriptor, or -1 when there is none to claim
 * (or claiming failed: the caller creates a file). */
int dpt__posix_claim_recycled(struct dpt__posix *b, int dirfd, const char *name,
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
		struct stat st;

		if (strncmp(de->d_name, RECYCLED, strlen(RECYCLED)) != 0 ||
		    fstatat(b->rootfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !claimable(&st) || dpt__posix_tmp_name(tmp, size, name))
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
		/* Checked again on what was opened: it may have been swapped
		 * between the check and the rename. */
		fd = openat(dirfd, tmp, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && (fstat(fd, &st) || !claimable(&st))) {
			close(fd);
			fd = -1;
		}
		/* A file of an older step keeps its mode: a private run
		 * makes it private (or, failing that, does not use it). */
		if (fd >= 0 && b->conf.private_mode &&
		    fchmod(fd, DPT__POSIX_PRIVATE_FILE_MODE) < 0) {
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
	struct dpt__posix *b = (struct dpt__posix *)base;
	pool_release(&b->pool);
	if (b->rootfd >= 0)
		close(b->rootfd);
	free(b->root);
	free(b);
}

/* ------------------------------------------------------------ objects */

static int posix_put_if_absent(struct dpt__storage_backend *base,
			       const char *key, const void *buf, size_t len)
{
	struct dpt__posix *b = (struct dpt__posix *)base;
	struct stat st;
	char tmp[300] = "";
	const char *name;
	int dirfd = -1, fd = -1, err = 0, rc;

	rc = dpt__posix_open_key_dir(b, key, true, &dirfd, &name);
	if (rc)
		return rc;
	/* Cheap early answer; the rename below is what decides. */
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		rc = DPT_EEXIST;
		goto out;
	}
	rc = dpt__posix_create_tmp(b, key, dirfd, name, tmp, sizeof(tmp), &fd);
	if (rc) {
		tmp[0] = '\0';
		goto out;
	}
	err = dpt__posix_pwrite_all(fd, buf, len, 0);
	if (!err)
		err = dpt__posix_fsync(fd);
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
	err = dpt__posix_fsync(dirfd);
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

/* Reads one piece through the page cache. Returns 0, an errno, or ERANGE
 * at an early end of file. */
static int read_job(struct dpt__posix_io_job *job,
		    struct dpt__posix_io_worker *wk)
{
	int err = pread_all(job->fd, job->buf, job->len, job->off);

	(void)wk;
	return err < 0 ? ERANGE : err;
}

/* Opens object KEY for reading, with no symbolic link on its way below
 * the root. Returns the descriptor, or a dpt_error: DPT_ENOENT (not
 * logged) when it does not exist, else logged as the failure to DO. */
static int open_object(struct dpt__posix *b, const char *key, const char *what)
{
	const char *name;
	int dirfd, fd, err;
	int rc = dpt__posix_open_key_dir(b, key, false, &dirfd, &name);

	if (rc)
		return rc;
	fd = openat(dirfd, name,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	err = errno;
	close(dirfd);
	if (fd >= 0)
		return fd;
	rc = dpt__storage_errno(err);
	if (rc != DPT_ENOENT)
		dpt__error("cannot %s '%s/%s': %s", what, b->root_msg, key,
			   err == ELOOP ? DPT__POSIX_LINK_REFUSED
					: strerror(err));
	return rc;
}

static int posix_read(struct dpt__storage_backend *base, const char *key,
		      uint64_t offset, size_t len, void *buf)
{
	struct dpt__posix *b = (struct dpt__posix *)base;
	size_t chunk = b->conf.part_size, n = (len + chunk - 1) / chunk;
	struct dpt__posix_io_job one, *jobs = &one;
	struct dpt__posix_io_worker wk = {0};
	struct stat st;
	int fd, err = 0, rc = 0;

	fd = open_object(b, key, "read");
	if (fd < 0)
		return fd;
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
	for (size_t i = 0; i < n; i++) {
		size_t o = i * chunk;
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].fn = read_job;
		jobs[i].fd = fd;
		jobs[i].buf = (char *)buf + o;
		jobs[i].len = len - o < chunk ? len - o : chunk;
		jobs[i].off = offset + o;
	}
	err = n == 1 ? read_job(&jobs[0], &wk)
		     : dpt__posix_pool_run(&b->pool, jobs, n);
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
	close(fd);
	return rc;
}

static int posix_stat(struct dpt__storage_backend *base, const char *key,
		      uint64_t *size)
{
	struct dpt__posix *b = (struct dpt__posix *)base;
	struct stat st;
	int fd = open_object(b, key, "stat"), rc = 0;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		rc = DPT_ENOENT;
	close(fd);
	if (rc)
		return rc;
	*size = (uint64_t)st.st_size;
	return 0;
}

static const struct dpt__storage_ops posix_ops = {
	.name = "posix",
	.destroy = posix_destroy,
	.writer_new = dpt__posix_writer_new,
	.write_at = dpt__posix_writer_write_at,
	.finish = dpt__posix_writer_finish,
	.abort = dpt__posix_writer_abort,
	.put_if_absent = posix_put_if_absent,
	.read = posix_read,
	.stat = posix_stat,
	.list = dpt__posix_list,
	.delete = dpt__posix_delete,
	.recycle = dpt__posix_recycle,
	.gc = dpt__posix_gc,
	.append = dpt__posix_append,
};

/* A private run's root that existed before: made 0700 when it is the
 * user's (what it holds is then out of others' reach, whatever its own
 * modes); another's is left alone, and said. */
static int private_root(struct dpt__posix *b)
{
	struct stat st;

	if (fstat(b->rootfd, &st) < 0) {
		dpt__error("cannot stat '%s': %s", b->root, strerror(errno));
		return dpt__storage_errno(errno);
	}
	if ((st.st_mode & 07777) == DPT__POSIX_PRIVATE_DIR_MODE)
		return 0;
	if (st.st_uid != geteuid()) {
		dpt__warn("'%s' belongs to uid %u, not to this user: its "
			  "mode %04o is left as it is (a private run makes "
			  "only its own directories private)",
			  b->root, (unsigned)st.st_uid,
			  (unsigned)(st.st_mode & 07777));
		return 0;
	}
	int err = dpt__posix_make_private(b->rootfd,
					  DPT__POSIX_PRIVATE_DIR_MODE, b->root);

	return err ? dpt__storage_errno(err) : 0;
}

int dpt__posix_open(const struct dpt__storage_uri *uri,
		    const struct dpt__storage_opts *opts,
		    const struct dpt__storage_opts *conf,
		    struct dpt__storage_backend **out)
{
	struct dpt__posix *b;
	struct stat refused;
	size_t failed = 0;
	int fd, err, rc = 0;

	(void)opts; /* CONF has every default */
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
	/* The path to the root as the URI gives it, links included; what
	 * this makes on the way is the user's alone. */
	err = dpt__posix_open_dirs(
		fd, b->root + 1,
		&(struct dpt__posix_walk){.create = !conf->no_create,
					  .priv = true,
					  .any_owner = conf->no_create &&
						       geteuid() == 0},
		&b->rootfd, &failed, &refused);
	close(fd);
	if (err == ENOENT && conf->no_create) {
		rc = DPT_ENOENT; /* the caller says what it looked for */
		goto out;
	}
	if (err) {
		char why[400];

		dpt__posix_shared_refusal(err, &refused, why, sizeof(why));
		dpt__error("cannot %s directory '/%.*s': %s",
			   conf->no_create ? "open" : "create", (int)failed,
			   b->root + 1, why);
		rc = err == DPT__POSIX_UNTRUSTED ? DPT_ECONFIG
						 : dpt__storage_errno(err);
		goto out;
	}
	rc = dpt__posix_trust_root(b);
	if (!rc && conf->private_mode)
		rc = private_root(b);
	if (rc)
		goto out;
	*out = &b->base;
out:
	if (rc)
		posix_destroy(&b->base);
	return rc;
}

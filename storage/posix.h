/*
 * Internals of the posix backend shared by posix.c (open, the pool of I/O
 * threads, temporary files, the operations on one object), posix_dirs.c
 * (the walks to and below the root), posix_writer.c (the writer),
 * posix_append.c (append) and posix_tree.c (list, gc, delete, recycle).
 */
#ifndef DPT_STORAGE_POSIX_H
#define DPT_STORAGE_POSIX_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "backend.h"

/* O_DIRECT alignment of offsets, lengths and memory: the largest logical
 * block size in use (4 KiB sectors); 512-byte devices accept it too. */
#define DPT__DIO_ALIGN 4096UL
/* In the name of every temporary file, which list skips and gc removes. */
#define DPT__POSIX_TMP_TAG ".dpt-tmp."
/* Files that recycle() left in the root for the next writers: '@' is in
 * no key, so no writer's temporary file has this name. */
#define DPT__POSIX_RECYCLED_AS "@recycled"
/* The modes of a private run (dpt__storage_opts.private_mode), and of the
 * directories made on the way to a new root: set with fchmod after
 * creating, since the umask masks what mkdir and open get. */
#define DPT__POSIX_PRIVATE_DIR_MODE  0700
#define DPT__POSIX_PRIVATE_FILE_MODE 0600
/* Why a symbolic link below the root is refused, for messages. */
#define DPT__POSIX_LINK_REFUSED                                                \
	"it is a symbolic link, and dptrain follows none below the "           \
	"checkpoint root (another user who can write there may have made "     \
	"it): remove it, or point the root itself at the real directory"
/* dpt__posix_open_dirs's error for a directory below the root that is not
 * trusted: no errno has this value. */
#define DPT__POSIX_UNTRUSTED 0x10000

struct dpt__posix_io_job;
struct dpt__posix_writer; /* posix_writer.c's */

/* What a thread of the pool keeps between its jobs. */
struct dpt__posix_io_worker {
	char *bounce; /* DPT__DIO_ALIGN-aligned, conf.part_size rounded up */
	size_t bounce_len;
};
/* A job: returns 0 or an errno. */
typedef int (*dpt__posix_io_fn)(struct dpt__posix_io_job *job,
				struct dpt__posix_io_worker *wk);

/* The jobs of one dpt__posix_pool_run call. */
struct dpt__posix_io_batch {
	int pending;
	int err; /* first errno of the batch's jobs, or 0 */
};

/* One piece of a read or a write, run by a thread of the pool. */
struct dpt__posix_io_job {
	dpt__posix_io_fn fn;
	struct dpt__posix_io_batch *batch;
	struct dpt__posix_io_job *next;
	struct dpt__posix_writer *w; /* writes */
	int fd;			     /* reads */
	char *buf;
	size_t len;
	uint64_t off;
};

/* The backend's I/O threads, started on first use. */
struct dpt__posix_io_pool {
	pthread_mutex_t lock;
	pthread_cond_t work;
	pthread_cond_t done;
	struct dpt__posix_io_job *head, *tail;
	pthread_t *threads;
	int nthreads;
	int wanted;
	bool stop;
};

/* The backend: a root directory. */
struct dpt__posix {
	struct dpt__storage_backend base; /* first: the ops take it */
	char *root;
	const char *root_msg; /* root for messages: "" for "/" */
	int rootfd;
	uid_t owner; /* whose tree it is (dpt__posix_trust_root) */
	struct dpt__storage_opts conf;
	struct dpt__posix_io_pool pool;
};

/* ------------------------------------------------------------ posix.c */

/* Runs the N jobs on the pool and waits; returns the first errno, or 0. */
int dpt__posix_pool_run(struct dpt__posix_io_pool *p,
			struct dpt__posix_io_job *jobs, size_t n);
/* WK's aligned bounce buffer of part_size (rounded up); NULL: no memory. */
char *dpt__posix_bounce(struct dpt__posix_io_worker *wk,
			const struct dpt__storage_opts *conf);
/* pwrite() of all LEN bytes, EINTR retried; returns 0 or an errno. */
int dpt__posix_pwrite_all(int fd, const char *buf, size_t len, uint64_t off);
/* fsync(), EINTR retried; returns 0 or an errno. */
int dpt__posix_fsync(int fd);
/* Makes FD (a file or directory this process created, or the root it
 * owns) MODE exactly; an error is logged, naming WHAT. Returns an errno. */
int dpt__posix_make_private(int fd, mode_t mode, const char *what);

/* ------------------------------------------------------- posix_dirs.c */

/* How dpt__posix_open_dirs walks. */
struct dpt__posix_walk {
	bool create;	 /* make missing directories */
	bool priv;	 /* ... of mode 0700 exactly (else 0755 less umask) */
	bool below_root; /* follow no link; refuse directories that are not
			  * OWNER's (or root's) or that others can write */
	uid_t owner;
	/* On the way to the root, in a directory that others may write: a
	 * link is refused always, a directory of another user unless this
	 * is set (root reading or cleaning that user's tree). */
	bool any_owner;
};
/* Opens directory REL ('/'-separated, "" for BASE) under BASE as HOW says.
 * Returns 0 and the descriptor in *OUT, or an errno, or
 * DPT__POSIX_UNTRUSTED (with the directory's status in *REFUSED when not
 * NULL); *FAILED is the length of REL's prefix that failed. */
int dpt__posix_open_dirs(int base, const char *rel,
			 const struct dpt__posix_walk *how, int *out,
			 size_t *failed, struct stat *refused);
/* Whether directory FD, below the root of a tree that OWNER owns, may be
 * used: it is OWNER's or root's, and its group and others cannot write
 * it. Its status goes to *ST. */
bool dpt__posix_trusted(int fd, uid_t owner, struct stat *st);
/* KEY's directory (a new string) and last component (into KEY). */
int dpt__posix_split_key(const char *key, char **dir, const char **name);
/* Opens KEY's directory (created when CREATE), logs; returns a dpt_error. */
int dpt__posix_open_key_dir(struct dpt__posix *b, const char *key, bool create,
			    int *dirfd, const char **name);
/* Why the walk to a root failed with ERR (DPT__POSIX_UNTRUSTED: REFUSED
 * is the directory's status), for a message, into BUF. */
void dpt__posix_shared_refusal(int err, const struct stat *refused, char *buf,
			       size_t size);
/* Checks the root just opened (the user's or root's, or for root
 * reading or cleaning, no_create, anyone's; writable by others only with
 * the sticky bit) and sets B->owner; logs what is wrong and returns
 * DPT_ECONFIG, or 0. */
int dpt__posix_trust_root(struct dpt__posix *b);
/* A new random temporary name for NAME in OUT; DPT_EINVAL: too long. */
int dpt__posix_tmp_name(char *out, size_t size, const char *name);
/* Creates a temporary file for NAME in DIRFD, logs; returns a dpt_error. */
int dpt__posix_create_tmp(struct dpt__posix *b, const char *key, int dirfd,
			  const char *name, char *tmp, size_t size, int *fd);
/* A recycled file renamed to a temporary name TMP; -1: none. */
int dpt__posix_claim_recycled(struct dpt__posix *b, int dirfd, const char *name,
			      char *tmp, size_t size);

/* ------------------------------------------------------------ ops */

/* The writer's operations (posix_writer.c), for the backend's ops table. */

/* ops->writer_new: a writer of KEY, on a new or recycled temporary file. */
int dpt__posix_writer_new(struct dpt__storage_backend *base, const char *key,
			  struct dpt__storage_writer **out);
/* ops->write_at: pwrite()s BUF in part_size pieces on the pool. */
int dpt__posix_writer_write_at(struct dpt__storage_writer *wb, const void *buf,
			       size_t len, uint64_t offset);
/* ops->finish: fsync, rename over the key; frees the writer. */
int dpt__posix_writer_finish(struct dpt__storage_writer *wb);
/* ops->abort: removes the temporary file; frees the writer. */
void dpt__posix_writer_abort(struct dpt__storage_writer *wb);

/* ops->append (posix_append.c): O_APPEND writes of whole lines to a
 * regular file of this user's with one link. */
int dpt__posix_append(struct dpt__storage_backend *base, const char *key,
		      const void *buf, size_t len);

/* The operations on the tree (posix_tree.c). */

/* ops->list: the objects under PREFIX, in key order. */
int dpt__posix_list(struct dpt__storage_backend *base, const char *prefix,
		    dpt__storage_list_fn fn, void *ctx);
/* ops->gc: removes temporary files under PREFIX older than OLDER_THAN_S. */
int dpt__posix_gc(struct dpt__storage_backend *base, const char *prefix,
		  long older_than_s, size_t *removed);
/* ops->delete: unlinks the KEYS, then their empty directories. */
int dpt__posix_delete(struct dpt__storage_backend *base,
		      const char *const *keys, size_t n);
/* ops->recycle: moves the KEYS' files to the root for the next writers. */
int dpt__posix_recycle(struct dpt__storage_backend *base,
		       const char *const *keys, size_t n);

#endif

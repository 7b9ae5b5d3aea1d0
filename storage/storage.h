/*
 * Checkpoint storage: one interface, a backend per URI scheme.
 *
 * A storage is opened on a root URI (common/uri.h, the grammar shared with
 * the plugin): `file:///abs/path` (posix backend: a local or parallel file
 * system) or `s3://bucket[/prefix]` (s3 backend). storage.c picks the
 * backend from its table of schemes (a row: the scheme, the backend's
 * open, its capabilities; doc/architecture.md, "Adding a storage
 * backend"); nothing outside storage/ knows which one it got, and asks
 * dpt__storage_caps() where the cost of an operation differs.
 * Everything below the root is addressed by a key relative to it:
 * '/'-separated components of [A-Za-z0-9._~-], no empty, "." or ".."
 * component, no leading '/', at most DPT__STORAGE_KEY_MAX bytes
 * (dpt__storage_key_check). The narrow alphabet is on purpose: such keys
 * need no escaping in URLs, in SigV4 canonical requests (where servers
 * disagree about what to escape) nor in file names, so a key is the same
 * object on every backend.
 *
 * What the checkpoint writer builds on:
 * - Objects are written by a writer: positional writes from several
 *   threads at once (different ranges), several transfers in flight, then
 *   finish (durable and visible under its key, atomically: a reader sees
 *   the whole object or none of it) or abort (nothing visible, nothing
 *   left behind). Finishing over an existing key replaces it.
 * - put_if_absent is the commit primitive: it creates a small object only
 *   if the key does not exist, atomically, and fails with DPT_EEXIST
 *   otherwise. A step is committed by its manifest being put this way,
 *   after every shard has finished.
 * - Readers read byte ranges (read), sizes (stat), listings by prefix
 *   (list), and delete old steps (delete). gc removes what crashed writers
 *   left behind (temporary files, multipart uploads).
 * - Logs (the coordinator's events of a run) grow by appends of whole
 *   lines through an appender; the capability DPT__STORAGE_CAP_APPEND
 *   says whether an append is cheap and shared, or a rewrite of the whole
 *   object that its appender owns.
 *
 * Unless said otherwise, functions return 0 or a negative dpt_error code,
 * and log one message naming the object (its URI) and the cause with
 * dpt__error() before returning an error. A `struct dpt__storage` may be
 * used by several threads at once; a writer by several threads for its
 * write_at calls; an appender by one thread at a time.
 */
#ifndef DPT_STORAGE_STORAGE_H
#define DPT_STORAGE_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "uri.h" /* DPT__STORAGE_KEY_MAX, dpt__storage_key_check */

struct dpt__storage;
struct dpt__storage_writer;

/*
 * Options of dpt__storage_open(). Initialise them with
 * dpt__storage_opts_init(); NULL strings and zero numbers mean "the
 * default", and the defaults for S3 come from the environment as the AWS
 * tools read it. Strings are copied by dpt__storage_open().
 */
struct dpt__storage_opts {
	/* s3: "http(s)://host[:port]". Default: DPTRAIN_S3_ENDPOINT, then
	 * AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL, then
	 * https://s3.REGION.amazonaws.com. */
	const char *endpoint;
	/* s3: signing region. Default: AWS_REGION, then AWS_DEFAULT_REGION,
	 * then us-east-1. */
	const char *region;
	/* s3: 1 for path-style URLs (endpoint/bucket/key), 0 for
	 * virtual-hosted (bucket.endpoint/key), -1 (default):
	 * DPTRAIN_S3_PATH_STYLE (1 or 0) when set, otherwise path-style
	 * with an explicit endpoint (what S3-compatible servers expect),
	 * virtual-hosted on AWS. */
	int path_style;
	/* s3: credentials. Default: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
	 * and AWS_SESSION_TOKEN, then the profile AWS_PROFILE (or "default")
	 * of AWS_SHARED_CREDENTIALS_FILE (or ~/.aws/credentials). */
	const char *access_key;
	const char *secret_key;
	const char *session_token;
	/* s3: multipart part size, 5 MiB to 5 GiB (default 8 MiB); objects
	 * smaller than one part are sent with one PUT. posix: the size of each
	 * pwrite/pread issued in parallel. */
	size_t part_size;
	/* Transfers in flight per operation: parts uploading, ranges being
	 * fetched, pwrites of a writer (default 4, at most 64). */
	int max_inflight;
	/* s3: attempts per request after the first (default 5) for 5xx,
	 * SlowDown, connection errors and timeouts; -1 for none. */
	int retries;
	/* s3: backoff before retry n is a random time in [d/2, d], d =
	 * min(retry_max_ms, retry_base_ms * 2^n) (defaults 200 ms, 5 s). */
	long retry_base_ms;
	long retry_max_ms;
	/* s3: connect timeout (default 10 s); a transfer that moves no byte,
	 * either way, during stall_timeout_ms (default 60 s; checked about
	 * once a second) is aborted and retried. */
	long connect_timeout_ms;
	long stall_timeout_ms;
	/* s3: send the SHA-256 of each payload in x-amz-content-sha256, so
	 * that the server checks it (default), or UNSIGNED-PAYLOAD, which
	 * saves the hashing CPU time (about 2 ms per MiB without SHA
	 * instructions) where TLS already protects the bytes. */
	bool unsigned_payload;
	/* s3: ListObjectsV2 max-keys per page (default 1000). */
	int list_page_size;
	/* posix: write with O_DIRECT (aligned bounce buffers for unaligned
	 * memory; unaligned heads and tails of a write, and file systems that
	 * refuse O_DIRECT, go through the page cache). */
	bool direct_io;
	/* posix: open an existing root only, for reading and maintenance
	 * (the `dptrain` tool): a missing root is DPT_ENOENT, not logged,
	 * instead of being created. */
	bool no_create;
	/* posix: a private run (srun --dp-private, DPTRAIN_PRIVATE): every
	 * directory created (parents included) is made 0700 and every file
	 * 0600, whatever the umask, and so is the root when it exists and
	 * is the user's. s3: no effect (objects are private to the bucket's
	 * account unless the bucket's policy says otherwise). */
	bool private_mode;
};

/* Fills OPTS with the defaults (all "unset"). */
void dpt__storage_opts_init(struct dpt__storage_opts *opts);

/*
 * dpt__storage_open - open the storage at URI.
 * posix: the root directory is created (with its parents) when missing,
 * unless OPTS->no_create (then DPT_ENOENT).
 * s3: the configuration is resolved (endpoint, region, credentials) but no
 * request is sent; the first operation finds out whether the bucket is
 * there and the credentials are good.
 * OPTS may be NULL (all defaults). On success *OUT is a new storage that
 * the caller releases with dpt__storage_destroy().
 * Returns DPT_EINVAL for an unusable URI or option, DPT_EAUTH when no S3
 * credentials can be found, or the error of creating the root directory.
 */
int dpt__storage_open(const char *uri, const struct dpt__storage_opts *opts,
		      struct dpt__storage **out);

/* Releases a storage and its connections and threads; nulls *S, accepts
 * NULL. Writers of S must have been finished or aborted before. */
void dpt__storage_destroy(struct dpt__storage **s);

/* The root URI as opened ("s3://ckpt/runs/a"), for messages; owned by S. */
const char *dpt__storage_uri(const struct dpt__storage *s);

/*
 * dpt__storage_writer_new - start writing the object KEY.
 * Nothing is visible under KEY until dpt__storage_writer_finish().
 * posix: a temporary file next to the object (".NAME.dpt-tmp.XXXX"),
 * parent directories created as needed. s3: nothing is sent until the
 * first part is complete.
 * On success *OUT is a writer owned by the caller, to be passed to
 * exactly one of dpt__storage_writer_finish() or _abort().
 */
int dpt__storage_writer_new(struct dpt__storage *s, const char *key,
			    struct dpt__storage_writer **out);

/*
 * dpt__storage_writer_write_at - write LEN bytes of BUF at OFFSET.
 * Several threads may call it at once for ranges that do not overlap; the
 * ranges must tile the object without holes by the time of finish, in any
 * order. Large writes are split and sent in parallel (max_inflight).
 * The call returns once BUF may be reused: posix: the bytes are written
 * (not yet durable); s3: the bytes are copied into part buffers, and it
 * blocks while max_inflight parts are already uploading and as many wait
 * (the memory of a writer stays near 2 * max_inflight * part_size; the
 * storage keeps that many part buffers for later writers until it is
 * destroyed, so that saves after the first fault no memory in).
 * Errors are sticky: after one, every call returns it, and finish aborts.
 * Returns DPT_ENOSPC or DPT_EIO (posix), DPT_ES3, DPT_EAUTH or
 * DPT_ETIMEDOUT (s3, from an earlier part that failed for good), or
 * DPT_ETOOBIG when the object would need more than 10000 parts.
 */
int dpt__storage_writer_write_at(struct dpt__storage_writer *w, const void *buf,
				 size_t len, uint64_t offset);

/*
 * dpt__storage_writer_finish - make the object durable and visible.
 * The object's size is the end of the furthest write. posix: fsync of the
 * file, rename over KEY, fsync of the directory. s3: one PUT for an object
 * smaller than a part, otherwise the last part and CompleteMultipartUpload.
 * On failure the writer is aborted (see _abort) and KEY is untouched.
 * Consumes the writer: *W is NULL on return, whatever the result.
 * Returns DPT_EINVAL if the writes left a hole, or the error of the I/O.
 */
int dpt__storage_writer_finish(struct dpt__storage_writer **w);

/*
 * dpt__storage_writer_abort - drop everything written.
 * posix: the temporary file is removed. s3: transfers in flight are
 * stopped and the multipart upload is aborted (a failure to abort is
 * logged as a warning; dpt__storage_gc() removes such uploads later).
 * Consumes the writer: *W is NULL on return; accepts NULL.
 */
void dpt__storage_writer_abort(struct dpt__storage_writer **w);

/*
 * dpt__storage_put_if_absent - create KEY with LEN bytes of BUF, only if
 * KEY does not exist: the commit of a checkpoint step.
 * posix: temporary file, fsync, renameat2(RENAME_NOREPLACE) (or link()
 * where the file system lacks it), fsync of the directory. s3: PUT with
 * If-None-Match: *. If the S3 PUT finds the object present (412), the
 * object is read back: identical bytes mean that an earlier attempt of
 * this call created it (its response was lost; curl may even have resent
 * the request by itself) or an identical commit did, and 0 is returned.
 * Returns DPT_EEXIST, without logging, when KEY exists: the caller decides
 * whether that is an error (a step committed twice) or expected.
 */
int dpt__storage_put_if_absent(struct dpt__storage *s, const char *key,
			       const void *buf, size_t len);

/*
 * dpt__storage_read - read LEN bytes of KEY at OFFSET into BUF.
 * Ranges larger than a part are fetched in parallel (s3: ranged GETs on
 * several connections; posix: preads). LEN 0 reads nothing and returns 0
 * without checking that KEY exists.
 * Returns DPT_ENOENT, without logging, when KEY does not exist, DPT_ERANGE
 * when the range goes past the end of the object.
 */
int dpt__storage_read(struct dpt__storage *s, const char *key, uint64_t offset,
		      size_t len, void *buf);

/*
 * dpt__storage_stat - the size of KEY in *SIZE.
 * Returns DPT_ENOENT, without logging, when KEY does not exist.
 */
int dpt__storage_stat(struct dpt__storage *s, const char *key, uint64_t *size);

/*
 * Called by dpt__storage_list() for each object, in byte order of the keys.
 * KEY is relative to the root and valid during the call only. A non-zero
 * return stops the listing and is returned by dpt__storage_list().
 */
typedef int (*dpt__storage_list_fn)(void *ctx, const char *key, uint64_t size);

/*
 * dpt__storage_list - every object whose key starts with PREFIX (a string
 * prefix, "" for all, "step-1" matches "step-10/x"). Objects being written
 * are not listed. s3: ListObjectsV2 pages of list_page_size keys, followed
 * through continuation tokens. posix: a walk of the directories under
 * PREFIX.
 */
int dpt__storage_list(struct dpt__storage *s, const char *prefix,
		      dpt__storage_list_fn fn, void *ctx);

/*
 * dpt__storage_delete - delete the N objects KEYS. Keys that do not exist
 * are not an error. s3: DeleteObjects, 1000 keys per request. posix:
 * unlink, fsync of the directories, and removal of directories left empty
 * (up to the root).
 * Returns the first error; the other keys are still tried.
 */
int dpt__storage_delete(struct dpt__storage *s, const char *const *keys,
			size_t n);

/*
 * dpt__storage_recycle - delete the N objects KEYS like
 * dpt__storage_delete, but let the storage reuse their space for the next
 * writers. posix: each file is renamed into the root as a temporary file
 * that the next writer claims and writes over (no freeing, no
 * allocation) and that dpt__storage_gc removes when unclaimed for its
 * age; a file that cannot be renamed is deleted. s3: a delete.
 */
int dpt__storage_recycle(struct dpt__storage *s, const char *const *keys,
			 size_t n);

/*
 * dpt__storage_gc - remove what writers that crashed left behind under
 * PREFIX, when older than OLDER_THAN_S seconds: s3: incomplete multipart
 * uploads (ListMultipartUploads, AbortMultipartUpload); posix: temporary
 * files. Never touches finished objects. *REMOVED (may be NULL) receives
 * the number removed.
 */
int dpt__storage_gc(struct dpt__storage *s, const char *prefix,
		    long older_than_s, size_t *removed);

/*
 * dpt__storage_reserve - make ready now, rather than in the next writer,
 * the memory that writing an object of up to BYTES bytes takes: s3: the
 * part buffers (at most as many as a writer holds), mapped, kept for the
 * writers until the storage is destroyed; posix: nothing. For start-up
 * (dpt_ckpt_prepare), where seconds of page faults cost no training time.
 * Returns 0 or DPT_ENOMEM.
 */
int dpt__storage_reserve(struct dpt__storage *s, uint64_t bytes);

/* What a backend does cheaply: bits of dpt__storage_caps(). */
enum dpt__storage_cap {
	/*
	 * An append costs about the bytes it appends, whatever the object's
	 * size, and appends to one key from several appenders (several
	 * processes, several hosts) all land, each line whole: a log shared
	 * by several writers may be one object (posix: O_APPEND).
	 * Without it an append rewrites the whole object from what its
	 * appender appended so far (s3: a PUT of the object): its cost grows
	 * with the object, and what another appender wrote to the key is
	 * replaced. The caller then gives each writer a key of its own,
	 * appends in batches, and starts a new key before the object grows
	 * large.
	 */
	DPT__STORAGE_CAP_APPEND = 1u << 0,
};

/* The dpt__storage_cap bits of S's backend. */
unsigned dpt__storage_caps(const struct dpt__storage *s);

/* An appender rewrites at most this many bytes (without
 * DPT__STORAGE_CAP_APPEND): appends past it fail with DPT_ETOOBIG. */
#define DPT__STORAGE_REWRITE_MAX (64u << 20)

struct dpt__storage_appender;

/*
 * dpt__storage_appender_new - an appender to the object KEY of S, which
 * the caller releases with dpt__storage_appender_destroy() before S.
 * Nothing is sent or created until the first append. Returns DPT_EINVAL
 * for an invalid key, DPT_ENOMEM.
 */
int dpt__storage_appender_new(struct dpt__storage *s, const char *key,
			      struct dpt__storage_appender **out);

/*
 * dpt__storage_append - append the LEN bytes of BUF, whole lines each
 * ending in '\n', to the appender's object, durably.
 * posix (DPT__STORAGE_CAP_APPEND): the file is opened with O_APPEND (and
 * created, 0600 in a private run or a directory only its owner may
 * enter, else 0644 less the umask), each line written with one write(2),
 * so that lines of other appenders interleave with these, never bytes of
 * a line, then fdatasync'ed. Because others may write the directory (a
 * team's run), only a regular file of this user's with one link is
 * written: a symbolic link, a FIFO (never waited for), another user's
 * file or a hard link is refused (DPT_EIO) with a message that says what
 * it is. A failure may leave the first lines of BUF appended.
 * Without DPT__STORAGE_CAP_APPEND (s3): the object is written whole (a
 * writer, finished) with every byte this appender appended, these last;
 * on failure the appender forgets BUF and the object keeps what it had.
 * Returns the error of the I/O, or DPT_ETOOBIG past
 * DPT__STORAGE_REWRITE_MAX.
 */
int dpt__storage_append(struct dpt__storage_appender *a, const void *buf,
			size_t len);

/* Releases an appender (what was appended stays); nulls *A, accepts NULL. */
void dpt__storage_appender_destroy(struct dpt__storage_appender **a);

#endif

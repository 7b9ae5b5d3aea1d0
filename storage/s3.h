/*
 * Internals of the s3 backend shared by s3.c (open and the operations on
 * whole objects), s3_writer.c (the writer, a multipart upload),
 * s3_request.c (signed requests driven by libcurl's multi interface, with
 * retries), s3_outcome.c (what an attempt's outcome means) and
 * s3_config.c (endpoint, region and credentials).
 */
#ifndef DPT_STORAGE_S3_H
#define DPT_STORAGE_S3_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>

#include "backend.h"
#include "buf.h"
#include "sigv4.h"

#define DPT__S3_MULTI_POOL 8
/* The type of every object: binary. Never a form type, which some servers
 * (moto) take as a form to decode, storing an empty object. */
#define DPT__S3_OBJECT_TYPE "application/octet-stream"

/* Where to send requests and how to sign them, resolved once at open. */
struct dpt__s3_config {
	bool https;
	char *host; /* "127.0.0.1:5055", the Host header of path-style URLs */
	bool path_style;
	char *region;
	char *access_key;
	char *secret_key;
	char *session_token; /* NULL when none */
	/* Where the keys come from, for messages: "AWS_ACCESS_KEY_ID",
	 * "profile 'default' of /root/.aws/credentials", ... */
	char *cred_source;
};

struct dpt__s3 {
	struct dpt__storage_backend base; /* first: the ops take it */
	struct dpt__storage_opts conf;
	struct dpt__s3_config cfg;
	char *bucket;
	char *prefix;	    /* "" or "runs/a/" */
	char *endpoint_msg; /* "http://127.0.0.1:5055", for messages */
	/* Idle multi handles and their connections, kept for the next
	 * operation: sequential reads then reuse connections (and TLS
	 * sessions) instead of opening new ones. */
	pthread_mutex_t lock;
	CURLM *idle[DPT__S3_MULTI_POOL];
	int nidle;
	/* Part buffers (part_size bytes) of writers that ended, for the next
	 * writers, under the same lock: a checkpoint writes the same sizes
	 * at every save, and memory mapped already costs no page faults
	 * (on the development VM, faulting in 64 MiB took 0.35 s, as long as
	 * sending it). At most pool_max, released by destroy. */
	char **pool;
	size_t npool, pool_max;
	/* The server canonicalises '/' in query values unencoded (moto):
	 * learnt from its first SignatureDoesNotMatch on such a query. */
	atomic_bool query_slash_raw;
	/* gc found that the server has no ListMultipartUploads (501): said
	 * once per storage, not at every retention. */
	atomic_bool no_upload_listing;
};

/*
 * dpt__s3_config_resolve - fill *CFG from OPTS, then the environment
 * (DPTRAIN_S3_ENDPOINT, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL,
 * DPTRAIN_S3_PATH_STYLE, AWS_REGION, AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), then the shared credentials
 * file. BUCKET decides the
 * automatic addressing style. Logs and returns DPT_EINVAL for a bad
 * endpoint, DPT_EAUTH when there are no credentials; *CFG is released by
 * dpt__s3_config_release() in every case.
 */
int dpt__s3_config_resolve(const struct dpt__storage_opts *opts,
			   const char *bucket, struct dpt__s3_config *cfg);
void dpt__s3_config_release(struct dpt__s3_config *cfg);

/*
 * dpt__storage_endpoint_parse - split an S3 endpoint "http(s)://host[:port]"
 * (an optional trailing '/', no path) into *HTTPS and *HOST ("host:port"
 * as written, the value of the Host header), a new string the caller
 * frees. Returns DPT_EINVAL, without logging, for anything else.
 */
int dpt__storage_endpoint_parse(const char *endpoint, bool *https, char **host);

/*
 * dpt__aws_credentials_read - the keys of PROFILE in the AWS shared
 * credentials file PATH (an INI file: "[profile]" sections of "key = value"
 * lines, '#' and ';' comments). *AK, *SK and *TOKEN (NULL when the profile
 * has no aws_session_token) are new strings for the caller to free.
 * Returns DPT_ENOENT, without logging, when the file or the profile or its
 * two keys are missing; DPT_ECONFIG (logged, with the line) for a line
 * that is not INI.
 */
int dpt__aws_credentials_read(const char *path, const char *profile, char **ak,
			      char **sk, char **token);

/* ------------------------------------------------------------ requests */

/*
 * One S3 request. The caller fills the first block (borrowed strings that
 * must outlive the request), runs it, reads the results, and releases it
 * with dpt__s3_req_release().
 */
struct dpt__s3_req {
	const char *method; /* GET PUT POST HEAD DELETE */
	const char *key;    /* full object key, prefix included; NULL:
			       a request on the bucket */
	struct dpt__sigv4_pair query[5];
	size_t nquery;
	/* Extra headers, signed and sent: range, if-none-match, ... */
	struct dpt__sigv4_pair hdrs[4];
	size_t nhdrs;
	const char *body; /* payload (PUT, POST) */
	size_t body_len;
	char *dst; /* GET: a 2xx body goes here, at most dst_len */
	size_t dst_len;
	/* Messages: "cannot WHAT 'URI': cause", logged by the engine when
	 * the request fails for good, unless the status is QUIET_STATUS
	 * (-1: never; the caller logs). */
	const char *what;
	const char *uri;
	long quiet_status;
	/* 200 responses may carry <Error> (CompleteMultipartUpload). */
	bool error_in_200;
	void *user;

	/* Results. */
	int rc;			/* 0 or the dpt_error of the final outcome */
	long status;		/* HTTP status of the last attempt, 0: none */
	struct dpt__buf resp;	/* body when there is no dst, or an error */
	size_t got;		/* bytes stored into dst */
	char etag[80];		/* ETag header, quotes kept */
	int64_t content_length; /* -1 when unknown */
	int attempts;
	/* An attempt failed after the server may have acted on it (a lost
	 * response, a 5xx): a retry may find its effect already there. */
	bool ambiguous;
	/* Signed again with the other form of '/' in the query (see
	 * dpt__s3.query_slash_raw). */
	bool resigned;

	/* The engine's. */
	char payload_hash[65];
	CURL *easy;
	struct curl_slist *slist;
	size_t sent;
	bool overflow;
	bool running;
	bool stalled; /* aborted by the stall detector */
	long stall_ms;
	int64_t progress_ms;	/* when bytes last moved */
	int64_t progress_bytes; /* bytes moved by then, both ways */
	int64_t due_ms;
	struct dpt__s3_req *next;  /* waiting or done list */
	struct dpt__s3_req *anext; /* the engine's running list */
	char errbuf[CURL_ERROR_SIZE];
};

/* Empties REQ before the caller fills it in. */
void dpt__s3_req_init(struct dpt__s3_req *req);
void dpt__s3_req_release(struct dpt__s3_req *req);

/* curl_global_init, once per process (thread-safe). */
int dpt__s3_curl_init(void);

/* An engine drives requests on one multi handle borrowed from the
 * backend's pool; it is used by one thread at a time. */
struct dpt__s3_engine {
	struct dpt__s3 *s3;
	CURLM *multi;
	struct dpt__s3_req *waiting; /* backing off before a retry */
	struct dpt__s3_req *active;  /* running */
	int running;
	uint64_t rng;
};

int dpt__s3_engine_init(struct dpt__s3_engine *e, struct dpt__s3 *s3);
/* Stops what still runs (those requests end with DPT_EIO) and gives the
 * multi handle back to the pool. */
void dpt__s3_engine_release(struct dpt__s3_engine *e);
/* Starts REQ. Returns 0 or an error (REQ is then done, rc set). */
int dpt__s3_engine_add(struct dpt__s3_engine *e, struct dpt__s3_req *req);
/* Drives the transfers for at most TIMEOUT_MS (less when one ends or
 * dpt__s3_engine_wakeup is called) and prepends the requests that are
 * done for good, successful or not, to *DONE. */
void dpt__s3_engine_step(struct dpt__s3_engine *e, int timeout_ms,
			 struct dpt__s3_req **done);
/* Requests started and not done yet. */
int dpt__s3_engine_pending(const struct dpt__s3_engine *e);
/* Interrupts dpt__s3_engine_step from another thread. */
void dpt__s3_engine_wakeup(struct dpt__s3_engine *e);

/* What the outcome of an attempt means (dpt__s3_classify). */
enum dpt__s3_verdict {
	DPT__S3_DONE,	/* final: success or failure */
	DPT__S3_RETRY,	/* worth another attempt after a backoff */
	DPT__S3_RESIGN, /* sign again at once (see query_slash_raw) */
};

/*
 * dpt__s3_classify (s3_outcome.c) - what the attempt of R that ended with
 * CC (and, when CURLE_OK, with R's status and body) means: sets *RC (0 or
 * a dpt_error), appends the explanation for a message to CAUSE, may set
 * r->ambiguous and r->resigned and change s3->query_slash_raw; returns
 * the verdict.
 */
enum dpt__s3_verdict dpt__s3_classify(struct dpt__s3 *s3, struct dpt__s3_req *r,
				      CURLcode cc, int *rc,
				      struct dpt__buf *cause);

/* Runs one request to its end, retries included. Returns req->rc. */
int dpt__s3_perform(struct dpt__s3 *s3, struct dpt__s3_req *req);
/* Runs N requests, at most PARALLEL at a time; after the first failure
 * the others are stopped. Returns the first failure's rc, or 0. */
int dpt__s3_perform_all(struct dpt__s3 *s3, struct dpt__s3_req *reqs, size_t n,
			int parallel);

/* ------------------------------------------------------------ objects */

/* An object's full key and its URI, the two names every request needs. */
struct dpt__s3_names {
	char *key; /* prefix included */
	char *uri; /* "s3://bucket/prefix/key", for messages */
};

/* Fills *N for KEY (relative to the prefix); released by
 * dpt__s3_names_release() whatever this returns. */
int dpt__s3_names_init(const struct dpt__s3 *s3, const char *key,
		       struct dpt__s3_names *n);
/* Frees the two strings of *N. */
void dpt__s3_names_release(struct dpt__s3_names *n);
/* Initialises R: METHOD on the object N (borrowed); "cannot WHAT" fails. */
void dpt__s3_req_object(struct dpt__s3_req *r, const char *method,
			const struct dpt__s3_names *n, const char *what);
/* Adds a query parameter (VALUE NULL: none) to R; both strings borrowed. */
void dpt__s3_req_query(struct dpt__s3_req *r, const char *name,
		       const char *value);
/* Adds a signed header to R; both strings borrowed. */
void dpt__s3_req_header(struct dpt__s3_req *r, const char *name,
			const char *value);

/* ------------------------------------------------------------ writer */

/* The writer's operations (s3_writer.c), for the backend's ops table. */

/* ops->writer_new: a writer of KEY; nothing is sent before the first part. */
int dpt__s3_writer_new(struct dpt__storage_backend *base, const char *key,
		       struct dpt__storage_writer **out);
/* ops->write_at: copies BUF into part buffers, uploads the full parts. */
int dpt__s3_writer_write_at(struct dpt__storage_writer *wb, const void *buf,
			    size_t len, uint64_t offset);
/* ops->finish: completes the upload (or one PUT) and frees the writer. */
int dpt__s3_writer_finish(struct dpt__storage_writer *wb);
/* ops->abort: aborts the multipart upload and frees the writer. */
void dpt__s3_writer_abort(struct dpt__storage_writer *wb);
/* ops->reserve: fills the backend's pool of part buffers for BYTES. */
int dpt__s3_reserve(struct dpt__storage_backend *base, uint64_t bytes);

#endif

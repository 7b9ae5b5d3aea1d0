/*
 * AWS Signature Version 4 for S3 requests (header-based authentication),
 * with OpenSSL's HMAC and SHA-256. We sign ourselves rather than use
 * CURLOPT_AWS_SIGV4: curl 7.88 neither sorts the query parameters of the
 * canonical request (curl#9717) nor sends x-amz-content-sha256, and both
 * matter for ListObjectsV2, multipart uploads and DeleteObjects.
 */
#ifndef DPT_STORAGE_SIGV4_H
#define DPT_STORAGE_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "buf.h"

/* An unencoded query parameter or a header, borrowed strings. */
struct dpt__sigv4_pair {
	const char *name;
	const char *value;
};

struct dpt__sigv4_request {
	const char *method; /* "GET" */
	/* The absolute path, unencoded ("/bucket/a$b"): each byte except
	 * unreserved ones and '/' is percent-encoded once, as S3 wants. */
	const char *path;
	/* Query parameters, unencoded and in any order; a NULL value is sent
	 * as an empty one ("uploads="). */
	const struct dpt__sigv4_pair *query;
	size_t nquery;
	/* The headers to sign, names in any case, values as sent. They must
	 * include host, x-amz-date and x-amz-content-sha256 for S3. */
	const struct dpt__sigv4_pair *headers;
	size_t nheaders;
	/* The payload's SHA-256 in hex, or "UNSIGNED-PAYLOAD". */
	const char *payload_hash;
	/* Leave '/' unencoded in canonical query values. SigV4 encodes it
	 * (%2F), and AWS wants that; moto decodes the query before it
	 * canonicalises it and so wants '/'. */
	bool query_slash_raw;
};

struct dpt__sigv4_key {
	const char *access_key;
	const char *secret_key;
	const char *region;  /* "us-east-1" */
	const char *service; /* "s3" */
};

/*
 * dpt__sigv4_authorization - append to OUT the value of the Authorization
 * header for REQ, made at AMZ_DATE ("20130524T000000Z", the value of the
 * x-amz-date header). When CANONICAL is not NULL the canonical request is
 * appended to it too (for tests and debugging).
 * Returns 0, DPT_EINVAL (bad date, no headers), DPT_ENOMEM, DPT_ETOOBIG.
 */
int dpt__sigv4_authorization(const struct dpt__sigv4_key *key,
			     const char *amz_date,
			     const struct dpt__sigv4_request *req,
			     struct dpt__buf *out, struct dpt__buf *canonical);

/*
 * Appends S to OUT percent-encoded as RFC 3986 (and SigV4) want: every byte
 * but A-Z a-z 0-9 - . _ ~ becomes %XX (upper-case hex), and '/' too unless
 * KEEP_SLASH.
 */
int dpt__sigv4_uri_encode(struct dpt__buf *out, const char *s, bool keep_slash);

/* SHA-256 of DATA in lower-case hex, NUL-terminated, into HEX. */
void dpt__sha256_hex(const void *data, size_t len, char hex[65]);

/* T as "YYYYMMDDTHHMMSSZ" (UTC) into OUT. */
void dpt__sigv4_date(time_t t, char out[17]);

#endif

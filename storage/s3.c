/*
 * The s3 backend: objects in a bucket under a key prefix.
 *
 * This file opens the backend and holds the operations on whole objects
 * (read, stat, put_if_absent, list, delete, gc); the writer, a multipart
 * upload, is in s3_writer.c, the requests in s3_request.c and
 * s3_outcome.c.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include <dptrain/error.h>

#include "log.h"
#include "s3.h"
#include "xml.h"

#define MIB	     (1024 * 1024UL)
#define MIN_PART     (5 * MIB)
#define MAX_PART     (5 * 1024 * MIB)
#define MAX_PUT	     (5 * 1024 * MIB)
#define DELETE_BATCH 1000
/* More ListObjectsV2 pages than a run has objects (a run has thousands):
 * a server that sends new tokens without end. */
#define LIST_PAGES_MAX 1000000

/* ------------------------------------------------------------ names */

static int full_key(const struct dpt__s3 *s3, const char *key, char **out)
{
	struct dpt__buf b;
	int rc;

	dpt__buf_init(&b, 2 * DPT__STORAGE_KEY_MAX);
	rc = dpt__buf_printf(&b, "%s%s", s3->prefix, key);
	if (!rc && !(*out = dpt__buf_steal(&b)))
		rc = DPT_ENOMEM;
	dpt__buf_release(&b);
	return rc;
}

/* "s3://bucket/prefix/key" for messages */
static int key_uri(const struct dpt__s3 *s3, const char *key, char **out)
{
	struct dpt__buf b;
	int rc;

	dpt__buf_init(&b, 3 * DPT__STORAGE_KEY_MAX);
	rc = dpt__buf_printf(&b, "s3://%s/%s%s", s3->bucket, s3->prefix, key);
	if (!rc && !(*out = dpt__buf_steal(&b)))
		rc = DPT_ENOMEM;
	dpt__buf_release(&b);
	return rc;
}

int dpt__s3_names_init(const struct dpt__s3 *s3, const char *key,
		       struct dpt__s3_names *n)
{
	int rc;
	n->key = n->uri = NULL;
	rc = full_key(s3, key, &n->key);
	if (!rc)
		rc = key_uri(s3, key, &n->uri);
	return rc;
}

void dpt__s3_names_release(struct dpt__s3_names *n)
{
	free(n->key);
	free(n->uri);
}

void dpt__s3_req_object(struct dpt__s3_req *r, const char *method,
			const struct dpt__s3_names *n, const char *what)
{
	dpt__s3_req_init(r);
	r->method = method;
	r->key = n->key;
	r->uri = n->uri;
	r->what = what;
}

void dpt__s3_req_query(struct dpt__s3_req *r, const char *name,
		       const char *value)
{
	r->query[r->nquery++] = (struct dpt__sigv4_pair){name, value};
}

void dpt__s3_req_header(struct dpt__s3_req *r, const char *name,
			const char *value)
{
	r->hdrs[r->nhdrs++] = (struct dpt__sigv4_pair){name, value};
}

/* ------------------------------------------------------------ objects */

static int s3_read(struct dpt__storage_backend *base, const char *key,
		   uint64_t offset, size_t len, void *buf)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	size_t psz = s3->conf.part_size, n = (len + psz - 1) / psz;
	struct dpt__s3_req *reqs = NULL;
	char(*ranges)[48] = NULL;
	struct dpt__s3_names nm;
	int rc;

	rc = dpt__s3_names_init(s3, key, &nm);
	if (rc)
		goto out;
	reqs = calloc(n, sizeof(*reqs));
	ranges = calloc(n, sizeof(*ranges));
	if (!reqs || !ranges) {
		rc = DPT_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		size_t o = i * psz, l = len - o < psz ? len - o : psz;
		struct dpt__s3_req *r = &reqs[i];
		snprintf(ranges[i], sizeof(ranges[i]), "bytes=%llu-%llu",
			 (unsigned long long)(offset + o),
			 (unsigned long long)(offset + o + l - 1));
		dpt__s3_req_object(r, "GET", &nm, "read");
		dpt__s3_req_header(r, "range", ranges[i]);
		r->dst = (char *)buf + o;
		r->dst_len = l;
		r->quiet_status = 404;
	}
	rc = dpt__s3_perform_all(s3, reqs, n, s3->conf.max_inflight);
	for (size_t i = 0; i < n && !rc; i++) {
		if (reqs[i].got != reqs[i].dst_len) {
			dpt__error("cannot read '%s': bytes %llu to %llu are "
				   "past its end",
				   nm.uri, (unsigned long long)offset,
				   (unsigned long long)(offset + len));
			rc = DPT_ERANGE;
		}
	}
out:
	for (size_t i = 0; reqs && i < n; i++)
		dpt__s3_req_release(&reqs[i]);
	free(reqs);
	free(ranges);
	dpt__s3_names_release(&nm);
	return rc;
}

static int s3_stat(struct dpt__storage_backend *base, const char *key,
		   uint64_t *size)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	struct dpt__s3_req r;
	struct dpt__s3_names nm;
	int rc;

	rc = dpt__s3_names_init(s3, key, &nm);
	if (rc)
		goto out;
	dpt__s3_req_object(&r, "HEAD", &nm, "stat");
	r.quiet_status = 404;
	rc = dpt__s3_perform(s3, &r);
	if (!rc && r.content_length < 0) {
		dpt__error("cannot stat '%s': no Content-Length", nm.uri);
		rc = DPT_ES3;
	}
	if (!rc)
		*size = (uint64_t)r.content_length;
	dpt__s3_req_release(&r);
out:
	dpt__s3_names_release(&nm);
	return rc;
}

static int s3_put_if_absent(struct dpt__storage_backend *base, const char *key,
			    const void *buf, size_t len)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	struct dpt__s3_req r;
	struct dpt__s3_names nm;
	int rc;

	if (len > MAX_PUT) {
		dpt__error("cannot commit 's3://%s/%s%s': %zu bytes is more "
			   "than one PUT takes (5 GiB)",
			   s3->bucket, s3->prefix, key, len);
		return DPT_ETOOBIG;
	}
	rc = dpt__s3_names_init(s3, key, &nm);
	if (rc)
		goto out;
	dpt__s3_req_object(&r, "PUT", &nm, "write");
	dpt__s3_req_header(&r, "if-none-match", "*");
	dpt__s3_req_header(&r, "content-type", DPT__S3_OBJECT_TYPE);
	r.body = buf;
	r.body_len = len;
	r.quiet_status = 412;
	rc = dpt__s3_perform(s3, &r);
	if (rc == DPT_EEXIST) {
		/* 412: an earlier attempt whose answer was lost may be the
		 * one that created the object, and that attempt need not be
		 * one of ours (curl sends a request again, silently, when a
		 * reused connection closes before any answer). Same bytes:
		 * it is ours, or equal to ours, which commits the same. */
		uint64_t size;
		char *copy = NULL;
		if (s3_stat(base, key, &size) == 0 && size == len &&
		    (copy = malloc(len ? len : 1)) &&
		    (len == 0 || s3_read(base, key, 0, len, copy) == 0) &&
		    memcmp(copy, buf, len) == 0) {
			dpt__info("'%s': created by an earlier attempt whose "
				  "answer was lost",
				  nm.uri);
			rc = 0;
		}
		free(copy);
	}
	dpt__s3_req_release(&r);
out:
	dpt__s3_names_release(&nm);
	return rc;
}

/* Whether the listing page DOC says that more pages follow. */
static bool page_truncated(struct dpt__xml_span doc)
{
	struct dpt__xml_span v;

	return dpt__xml_find(doc, "IsTruncated", &v) && v.len == 4 &&
	       memcmp(v.p, "true", 4) == 0;
}

/* Release R, the request of one listing page of URI, after logging a page
 * that did not parse (RC DPT_EPROTO) as a malformed answer to ACTION. */
static void page_release(struct dpt__s3_req *r, int rc, const char *uri,
			 const char *action)
{
	if (rc == DPT_EPROTO)
		dpt__error("cannot %s '%s': malformed %s answer", r->what, uri,
			   action);
	dpt__s3_req_release(r);
}

static int s3_list(struct dpt__storage_backend *base, const char *prefix,
		   dpt__storage_list_fn fn, void *ctx)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	struct dpt__buf token, k, full;
	char max_keys[16];
	char *uri = NULL, *token_copy = NULL;
	size_t plen = strlen(s3->prefix), pages = 0;
	bool more = true;
	int rc;

	dpt__buf_init(&token, 4096);
	dpt__buf_init(&k, 4 * DPT__STORAGE_KEY_MAX);
	dpt__buf_init(&full, 2 * DPT__STORAGE_KEY_MAX);
	snprintf(max_keys, sizeof(max_keys), "%d", s3->conf.list_page_size);
	rc = dpt__buf_printf(&full, "%s%s", s3->prefix, prefix);
	if (!rc)
		rc = key_uri(s3, prefix, &uri);
	while (!rc && more) {
		struct dpt__s3_req r;
		struct dpt__xml_span doc, c, v;
		size_t cursor = 0;

		dpt__s3_req_init(&r);
		r.method = "GET";
		r.uri = uri;
		r.what = "list";
		dpt__s3_req_query(&r, "list-type", "2");
		dpt__s3_req_query(&r, "prefix", full.data);
		dpt__s3_req_query(&r, "max-keys", max_keys);
		if (token_copy)
			dpt__s3_req_query(&r, "continuation-token", token_copy);
		rc = dpt__s3_perform(s3, &r);
		doc = (struct dpt__xml_span){r.resp.data, r.resp.len};
		while (!rc && dpt__xml_next(doc, "Contents", &cursor, &c)) {
			unsigned long long size;
			char *end;
			dpt__buf_reset(&k);
			if (!dpt__xml_find(c, "Key", &v) ||
			    dpt__xml_text(&k, v) ||
			    !dpt__xml_find(c, "Size", &v)) {
				rc = DPT_EPROTO;
				break;
			}
			size = strtoull(v.p, &end, 10);
			if (end != v.p + v.len) {
				rc = DPT_EPROTO;
				break;
			}
			/* Keys outside the prefix, or that no key can name,
			 * are not this storage's objects. */
			if (k.len <= plen || memcmp(k.data, s3->prefix, plen) ||
			    dpt__storage_key_check(k.data + plen, false))
				continue;
			rc = fn(ctx, k.data + plen, size);
		}
		more = !rc && page_truncated(doc);
		if (more) {
			dpt__buf_reset(&token);
			if (!dpt__xml_find(doc, "NextContinuationToken", &v) ||
			    dpt__xml_text(&token, v) || token.len == 0) {
				rc = DPT_EPROTO;
			} else if ((token_copy &&
				    strcmp(token_copy, token.data) == 0) ||
				   ++pages > LIST_PAGES_MAX) {
				/* A server that never ends IsTruncated
				 * would keep the caller listing forever. */
				dpt__error("cannot list '%s': the server %s",
					   uri,
					   pages > LIST_PAGES_MAX
						   ? "sent more pages than any "
						     "run has"
						   : "repeats its continuation "
						     "token: IsTruncated never "
						     "ends");
				rc = DPT_EIO;
			} else {
				free(token_copy);
				token_copy = strdup(token.data);
				if (!token_copy)
					rc = DPT_ENOMEM;
			}
		}
		page_release(&r, rc, uri, "ListObjectsV2");
	}
	free(token_copy);
	free(uri);
	dpt__buf_release(&token);
	dpt__buf_release(&k);
	dpt__buf_release(&full);
	return rc;
}

static int content_md5(const char *data, size_t len, char out[32])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	if (!EVP_Digest(data, len, md, &n, EVP_md5(), NULL) || n != 16)
		return DPT_ENOMEM;
	EVP_EncodeBlock((unsigned char *)out, md, 16);
	return 0;
}

static int delete_batch(struct dpt__s3 *s3, const char *const *keys, size_t n)
{
	struct dpt__s3_req r;
	struct dpt__buf body, k, code;
	struct dpt__xml_span doc, e, v;
	size_t cursor = 0;
	char md5[32], *uri = NULL;
	int rc, first = 0;

	dpt__buf_init(&body, 4 * DPT__STORAGE_KEY_MAX * DELETE_BATCH);
	dpt__buf_init(&k, 4 * DPT__STORAGE_KEY_MAX);
	dpt__buf_init(&code, 256);
	dpt__s3_req_init(&r);
	rc = dpt__buf_puts(&body, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
				  "<Delete xmlns=\"http://s3.amazonaws.com/"
				  "doc/2006-03-01/\"><Quiet>true</Quiet>");
	for (size_t i = 0; i < n && !rc; i++) {
		rc = dpt__buf_printf(&body, "<Object><Key>%s", s3->prefix);
		if (!rc)
			rc = dpt__xml_escape(&body, keys[i]);
		if (!rc)
			rc = dpt__buf_puts(&body, "</Key></Object>");
	}
	if (!rc)
		rc = dpt__buf_puts(&body, "</Delete>");
	if (!rc)
		rc = content_md5(body.data, body.len, md5);
	if (!rc)
		rc = key_uri(s3, keys[0], &uri);
	if (rc)
		goto out;
	/* DeleteObjects requires Content-MD5 (or an x-amz-checksum). */
	r.method = "POST";
	r.uri = uri;
	r.what = "delete";
	dpt__s3_req_query(&r, "delete", NULL);
	dpt__s3_req_header(&r, "content-md5", md5);
	dpt__s3_req_header(&r, "content-type", "application/xml");
	r.body = body.data;
	r.body_len = body.len;
	rc = dpt__s3_perform(s3, &r);
	if (rc)
		goto out;
	/* Quiet mode: the answer lists the keys that failed. */
	doc = (struct dpt__xml_span){r.resp.data, r.resp.len};
	while (dpt__xml_next(doc, "Error", &cursor, &e)) {
		dpt__buf_reset(&k);
		dpt__buf_reset(&code);
		if (dpt__xml_find(e, "Key", &v))
			dpt__xml_text(&k, v);
		if (dpt__xml_find(e, "Code", &v))
			dpt__xml_text(&code, v);
		dpt__error("cannot delete 's3://%s/%s': %s", s3->bucket,
			   k.len ? k.data : "?",
			   code.len ? code.data : "error");
		if (!first)
			first = code.len && strcmp(code.data, "AccessDenied") ==
							0
					? DPT_EAUTH
					: DPT_ES3;
	}
	rc = first;
out:
	dpt__s3_req_release(&r);
	free(uri);
	dpt__buf_release(&body);
	dpt__buf_release(&k);
	dpt__buf_release(&code);
	return rc;
}

static int s3_delete(struct dpt__storage_backend *base, const char *const *keys,
		     size_t n)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	int first = 0;
	for (size_t i = 0; i < n; i += DELETE_BATCH) {
		size_t m = n - i < DELETE_BATCH ? n - i : DELETE_BATCH;
		int rc = delete_batch(s3, keys + i, m);
		if (rc && !first)
			first = rc;
	}
	return first;
}

static bool parse_time(struct dpt__xml_span v, time_t *out)
{
	char s[32];
	struct tm tm;
	int n = 0;

	if (v.len >= sizeof(s))
		return false;
	memcpy(s, v.p, v.len);
	s[v.len] = '\0';
	memset(&tm, 0, sizeof(tm));
	/* 2024-05-24T00:00:00.000Z */
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
		   &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
		return false;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*out = timegm(&tm);
	return *out != (time_t)-1;
}

/* Abort the uploads of one ListMultipartUploads page DOC (under URI)
 * begun before CUTOFF, counting them in *REMOVED and keeping the first
 * failure in *FIRST; K and ID are the caller's scratch buffers. 0, or
 * DPT_EPROTO for a page that does not parse. */
static int abort_page(struct dpt__s3 *s3, struct dpt__xml_span doc,
		      const char *uri, time_t cutoff, struct dpt__buf *k,
		      struct dpt__buf *id, size_t *removed, int *first)
{
	struct dpt__xml_span u, v;
	size_t cursor = 0;
	int rc = 0;

	while (!rc && dpt__xml_next(doc, "Upload", &cursor, &u)) {
		struct dpt__s3_req a;
		time_t t;
		dpt__buf_reset(k);
		dpt__buf_reset(id);
		if (!dpt__xml_find(u, "Key", &v) || dpt__xml_text(k, v) ||
		    !dpt__xml_find(u, "UploadId", &v) || dpt__xml_text(id, v) ||
		    !dpt__xml_find(u, "Initiated", &v) || !parse_time(v, &t)) {
			rc = DPT_EPROTO;
			break;
		}
		if (t >= cutoff)
			continue;
		dpt__s3_req_init(&a);
		a.method = "DELETE";
		a.key = k->data;
		a.uri = uri;
		a.what = "abort an upload under";
		dpt__s3_req_query(&a, "uploadId", id->data);
		if (dpt__s3_perform(s3, &a) == 0 || a.status == 404)
			(*removed)++;
		else if (!*first)
			*first = a.rc;
		dpt__s3_req_release(&a);
	}
	return rc;
}

static int s3_gc(struct dpt__storage_backend *base, const char *prefix,
		 long older_than_s, size_t *removed)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	struct dpt__buf full, kmark, umark, k, id;
	char *uri = NULL;
	time_t cutoff = time(NULL) - older_than_s;
	bool more = true;
	int rc, first = 0;

	*removed = 0;
	dpt__buf_init(&full, 2 * DPT__STORAGE_KEY_MAX);
	dpt__buf_init(&kmark, 4 * DPT__STORAGE_KEY_MAX);
	dpt__buf_init(&umark, 4096);
	dpt__buf_init(&k, 4 * DPT__STORAGE_KEY_MAX);
	dpt__buf_init(&id, 4096);
	rc = dpt__buf_printf(&full, "%s%s", s3->prefix, prefix);
	if (!rc)
		rc = key_uri(s3, prefix, &uri);
	while (!rc && more) {
		struct dpt__s3_req r;
		struct dpt__xml_span doc, v;
		char *km = kmark.len ? strdup(kmark.data) : NULL;
		char *um = umark.len ? strdup(umark.data) : NULL;

		dpt__s3_req_init(&r);
		r.method = "GET";
		r.uri = uri;
		r.what = "list the uploads of";
		dpt__s3_req_query(&r, "uploads", NULL);
		dpt__s3_req_query(&r, "prefix", full.data);
		if (km)
			dpt__s3_req_query(&r, "key-marker", km);
		if (um)
			dpt__s3_req_query(&r, "upload-id-marker", um);
		r.quiet_status = 501;
		rc = dpt__s3_perform(s3, &r);
		if (rc == DPT_ENOTSUP) {
			/* Nothing can be listed, so nothing is collected: not
			 * a failure of the caller's retention, but the user
			 * must know that this store keeps what crashed
			 * writers leave until a lifecycle rule removes it. */
			if (!atomic_exchange(&s3->no_upload_listing, true))
				dpt__warn("%s does not implement "
					  "ListMultipartUploads (HTTP 501): "
					  "multipart uploads left by crashed "
					  "writers under '%s' cannot be "
					  "collected; use a lifecycle rule "
					  "(AbortIncompleteMultipartUpload) "
					  "if the store has them",
					  s3->endpoint_msg, uri);
			dpt__s3_req_release(&r);
			free(km);
			free(um);
			rc = 0;
			break;
		}
		doc = (struct dpt__xml_span){r.resp.data, r.resp.len};
		rc = abort_page(s3, doc, uri, cutoff, &k, &id, removed, &first);
		more = !rc && page_truncated(doc);
		if (more) {
			dpt__buf_reset(&kmark);
			dpt__buf_reset(&umark);
			if (dpt__xml_find(doc, "NextKeyMarker", &v))
				dpt__xml_text(&kmark, v);
			if (dpt__xml_find(doc, "NextUploadIdMarker", &v))
				dpt__xml_text(&umark, v);
			/* No marker, or the one sent: the same page again,
			 * forever. */
			if (!kmark.len ||
			    (km && !strcmp(km, kmark.data) &&
			     !strcmp(um ? um : "",
				     umark.len ? umark.data : "")))
				more = false;
		}
		page_release(&r, rc, uri, "ListMultipartUploads");
		free(km);
		free(um);
	}
	free(uri);
	dpt__buf_release(&full);
	dpt__buf_release(&kmark);
	dpt__buf_release(&umark);
	dpt__buf_release(&k);
	dpt__buf_release(&id);
	return rc ? rc : first;
}

/* ------------------------------------------------------------ open */

static void s3_destroy(struct dpt__storage_backend *base)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	for (int i = 0; i < s3->nidle; i++)
		curl_multi_cleanup(s3->idle[i]);
	for (size_t i = 0; i < s3->npool; i++)
		free(s3->pool[i]);
	free(s3->pool);
	pthread_mutex_destroy(&s3->lock);
	dpt__s3_config_release(&s3->cfg);
	free(s3->bucket);
	free(s3->prefix);
	free(s3->endpoint_msg);
	free(s3);
}

static const struct dpt__storage_ops s3_ops = {
	.name = "s3",
	.destroy = s3_destroy,
	.writer_new = dpt__s3_writer_new,
	.write_at = dpt__s3_writer_write_at,
	.finish = dpt__s3_writer_finish,
	.abort = dpt__s3_writer_abort,
	.put_if_absent = s3_put_if_absent,
	.read = s3_read,
	.stat = s3_stat,
	.list = s3_list,
	.delete = s3_delete,
	.gc = s3_gc,
	.reserve = dpt__s3_reserve,
};

int dpt__s3_open(const struct dpt__storage_uri *uri,
		 const struct dpt__storage_opts *opts,
		 const struct dpt__storage_opts *conf,
		 struct dpt__storage_backend **out)
{
	struct dpt__s3 *s3;
	struct dpt__buf ep;
	int rc;

	if (conf->part_size < MIN_PART || conf->part_size > MAX_PART) {
		dpt__error("invalid S3 part size %zu: S3 takes parts of 5 MiB "
			   "to 5 GiB",
			   conf->part_size);
		return DPT_EINVAL;
	}
	rc = dpt__s3_curl_init();
	if (rc) {
		dpt__error("cannot initialise libcurl");
		return rc;
	}
	s3 = calloc(1, sizeof(*s3));
	if (!s3)
		return DPT_ENOMEM;
	s3->base.ops = &s3_ops;
	s3->conf = *conf;
	pthread_mutex_init(&s3->lock, NULL);
	s3->bucket = strdup(uri->bucket);
	s3->prefix = strdup(uri->prefix);
	/* As many as one writer holds at most (see dpt__s3_writer_new). */
	s3->pool_max = 2 * (size_t)conf->max_inflight + 2;
	s3->pool = calloc(s3->pool_max, sizeof(*s3->pool));
	if (!s3->bucket || !s3->prefix || !s3->pool) {
		rc = DPT_ENOMEM;
		goto out;
	}
	rc = dpt__s3_config_resolve(opts, s3->bucket, &s3->cfg);
	if (rc)
		goto out;
	dpt__buf_init(&ep, 1024);
	rc = dpt__buf_printf(&ep, "%s://%s", s3->cfg.https ? "https" : "http",
			     s3->cfg.host);
	s3->endpoint_msg = dpt__buf_steal(&ep);
	if (!rc && !s3->endpoint_msg)
		rc = DPT_ENOMEM;
out:
	if (rc) {
		s3_destroy(&s3->base);
		return rc;
	}
	*out = &s3->base;
	return 0;
}

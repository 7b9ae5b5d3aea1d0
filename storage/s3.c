/*
 * The s3 backend: objects in a bucket under a key prefix.
 *
 * A writer copies positional writes into part buffers; each part that is
 * complete is uploaded (UploadPart) by the writer's thread, several at a
 * time on one multi handle, while the caller goes on writing. Objects
 * smaller than one part are sent with one PUT at finish. Nothing is
 * visible before CompleteMultipartUpload (or that PUT) succeeds; a failure
 * aborts the upload, so that no part lingers (and is billed).
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

#define MIB (1024 * 1024UL)
#define MIN_PART (5 * MIB)
#define MAX_PART (5 * 1024 * MIB)
#define MAX_PARTS 10000
#define MAX_PUT (5 * 1024 * MIB)
#define DELETE_BATCH 1000
/* The type of every object: binary. Never a form type, which some servers
 * (moto) take as a form to decode, storing an empty object. */
#define OBJECT_TYPE "application/octet-stream"

static const struct dpt__storage_ops s3_ops;

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

/* An object's full key and its URI, the two names every request needs. */
struct names {
	char *key;
	char *uri;
};

static int names_init(const struct dpt__s3 *s3, const char *key,
		      struct names *n)
{
	int rc;
	n->key = n->uri = NULL;
	rc = full_key(s3, key, &n->key);
	if (!rc)
		rc = key_uri(s3, key, &n->uri);
	return rc;
}

static void names_release(struct names *n)
{
	free(n->key);
	free(n->uri);
}

static void req_object(struct dpt__s3_req *r, const char *method,
		       const struct names *n, const char *what)
{
	dpt__s3_req_init(r);
	r->method = method;
	r->key = n->key;
	r->uri = n->uri;
	r->what = what;
}

static void add_query(struct dpt__s3_req *r, const char *name,
		      const char *value)
{
	r->query[r->nquery++] = (struct dpt__sigv4_pair){name, value};
}

static void add_header(struct dpt__s3_req *r, const char *name,
		       const char *value)
{
	r->hdrs[r->nhdrs++] = (struct dpt__sigv4_pair){name, value};
}

/* ------------------------------------------------------------ writer */

enum part_state { FILLING, QUEUED, UPLOADING, DONE };

struct part {
	enum part_state state;
	char number[24];
	char *data; /* part_size bytes while FILLING..UPLOADING */
	size_t filled;
	size_t len;
	char etag[80];
	struct dpt__s3_req req;
	struct part *qnext;
};

struct s3_writer {
	struct dpt__storage_writer base; /* first: the ops take it */
	struct dpt__s3 *s3;
	struct names n;
	size_t part_size;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* a part done, an error, the thread's end */
	struct part **parts; /* by part number - 1 */
	size_t nparts;
	char **spare;	     /* part buffers to reuse */
	size_t nspare;
	size_t nbuf;	     /* buffers allocated, in parts or spare */
	size_t max_buf;
	struct part *qhead, *qtail;
	int uploading;
	int err; /* sticky */
	uint64_t written, end;

	bool started;	  /* the upload thread was created */
	bool joined;
	bool draining;	  /* finish: no more parts will come */
	bool stop;	  /* abort */
	bool thread_done;
	pthread_t thread;
	struct dpt__s3_engine *engine; /* the thread's, while it runs */
	char *upload_id;
};

static void set_err(struct s3_writer *w, int rc)
{
	if (!w->err)
		w->err = rc;
	pthread_cond_broadcast(&w->cond);
}

/* Runs R on the engine of the calling thread until it is done. */
static int run_one(struct dpt__s3_engine *e, struct dpt__s3_req *r)
{
	struct dpt__s3_req *done = NULL;
	if (dpt__s3_engine_add(e, r))
		return r->rc;
	while (!done)
		dpt__s3_engine_step(e, 1000, &done);
	return r->rc;
}

static int create_upload(struct s3_writer *w, struct dpt__s3_engine *e)
{
	struct dpt__s3_req r;
	struct dpt__xml_span id;
	struct dpt__buf b;
	int rc;

	req_object(&r, "POST", &w->n, "write");
	add_query(&r, "uploads", NULL);
	add_header(&r, "content-type", OBJECT_TYPE);
	rc = run_one(e, &r);
	if (rc)
		goto out;
	dpt__buf_init(&b, 1024);
	if (!dpt__xml_find((struct dpt__xml_span){r.resp.data, r.resp.len},
			   "UploadId", &id) ||
	    dpt__xml_text(&b, id) || b.len == 0) {
		dpt__error("cannot write '%s': no UploadId in the answer to "
			   "CreateMultipartUpload",
			   w->n.uri);
		rc = DPT_ES3;
	} else if (!(w->upload_id = dpt__buf_steal(&b))) {
		rc = DPT_ENOMEM;
	}
	dpt__buf_release(&b);
out:
	dpt__s3_req_release(&r);
	return rc;
}

/* A part buffer from the backend's pool, or NULL when it is empty. */
static char *pool_take(struct dpt__s3 *s3)
{
	char *data = NULL;

	pthread_mutex_lock(&s3->lock);
	if (s3->npool)
		data = s3->pool[--s3->npool];
	pthread_mutex_unlock(&s3->lock);
	return data;
}

/* Keeps DATA (a part buffer, or NULL) for later writers, or frees it
 * when the pool is full. */
static void pool_give(struct dpt__s3 *s3, char *data)
{
	if (!data)
		return;
	pthread_mutex_lock(&s3->lock);
	if (s3->npool < s3->pool_max) {
		s3->pool[s3->npool++] = data;
		data = NULL;
	}
	pthread_mutex_unlock(&s3->lock);
	free(data);
}

static int s3_reserve(struct dpt__storage_backend *base, uint64_t bytes)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	size_t psz = s3->conf.part_size;
	uint64_t want = (bytes + psz - 1) / psz;
	/* An object smaller than a part uses that much of its buffer: with
	 * large parts, the rest need not be mapped. */
	size_t used = bytes < psz ? (size_t)bytes : psz;

	if (want > s3->pool_max)
		want = s3->pool_max;
	for (;;) {
		size_t have;
		char *data;

		pthread_mutex_lock(&s3->lock);
		have = s3->npool;
		pthread_mutex_unlock(&s3->lock);
		if (have >= want)
			return 0;
		data = malloc(psz);
		if (!data)
			return DPT_ENOMEM;
		/* Mapped now, that is the point: one write per page. Not
		 * memset(0), which a compiler may merge with the malloc
		 * into a calloc that leaves fresh pages unmapped (gcc 12
		 * does). */
		for (size_t i = 0; i < used; i += 4096)
			((volatile char *)data)[i] = 0;
		pool_give(s3, data);
	}
}

static void put_buffer(struct s3_writer *w, char *data)
{
	if (w->nspare < w->max_buf) {
		w->spare[w->nspare++] = data;
	} else {
		pool_give(w->s3, data);
		w->nbuf--;
	}
}

static void *upload_main(void *arg)
{
	struct s3_writer *w = arg;
	struct dpt__s3_engine e;
	int rc;

	rc = dpt__s3_engine_init(&e, w->s3);
	if (!rc)
		rc = create_upload(w, &e);
	pthread_mutex_lock(&w->lock);
	if (rc) {
		set_err(w, rc);
		goto out;
	}
	w->engine = &e;
	for (;;) {
		struct dpt__s3_req *done = NULL;
		while (w->qhead && w->uploading < w->s3->conf.max_inflight &&
		       !w->err && !w->stop) {
			struct part *p = w->qhead;
			w->qhead = p->qnext;
			if (!w->qhead)
				w->qtail = NULL;
			p->state = UPLOADING;
			w->uploading++;
			req_object(&p->req, "PUT", &w->n, "write");
			add_query(&p->req, "partNumber", p->number);
			add_query(&p->req, "uploadId", w->upload_id);
			p->req.body = p->data;
			p->req.body_len = p->len;
			p->req.user = p;
			pthread_mutex_unlock(&w->lock);
			rc = dpt__s3_engine_add(&e, &p->req);
			pthread_mutex_lock(&w->lock);
			if (rc) {
				w->uploading--;
				set_err(w, rc);
			}
		}
		if (w->err || w->stop)
			break;
		if (w->draining && !w->qhead && w->uploading == 0)
			break;
		pthread_mutex_unlock(&w->lock);
		dpt__s3_engine_step(&e, 1000, &done);
		pthread_mutex_lock(&w->lock);
		for (; done; done = done->next) {
			struct part *p = done->user;
			w->uploading--;
			if (done->rc) {
				set_err(w, done->rc);
				continue;
			}
			memcpy(p->etag, done->etag, sizeof(p->etag));
			if (!p->etag[0]) {
				dpt__error("cannot write '%s': no ETag in the "
					   "answer to UploadPart %s",
					   w->n.uri, p->number);
				set_err(w, DPT_ES3);
				continue;
			}
			p->state = DONE;
			put_buffer(w, p->data);
			p->data = NULL;
			dpt__s3_req_release(&p->req);
		}
		pthread_cond_broadcast(&w->cond);
	}
	w->engine = NULL;
out:
	pthread_mutex_unlock(&w->lock);
	/* Stops the parts still in flight after an error or an abort. */
	dpt__s3_engine_release(&e);
	pthread_mutex_lock(&w->lock);
	w->thread_done = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* With the lock held: queue a complete part, start the thread if need be. */
static void enqueue(struct s3_writer *w, struct part *p)
{
	p->state = QUEUED;
	p->qnext = NULL;
	if (w->qtail)
		w->qtail->qnext = p;
	else
		w->qhead = p;
	w->qtail = p;
	if (!w->started) {
		if (pthread_create(&w->thread, NULL, upload_main, w)) {
			dpt__error("cannot write '%s': cannot start a thread",
				   w->n.uri);
			set_err(w, DPT_ENOMEM);
			return;
		}
		w->started = true;
	} else if (w->engine) {
		dpt__s3_engine_wakeup(w->engine);
	}
}

static int s3_writer_new(struct dpt__storage_backend *base, const char *key,
			 struct dpt__storage_writer **out)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	struct s3_writer *w;
	int rc;

	w = calloc(1, sizeof(*w));
	if (!w)
		return DPT_ENOMEM;
	w->base.ops = &s3_ops;
	w->s3 = s3;
	w->part_size = s3->conf.part_size;
	w->max_buf = 2 * (size_t)s3->conf.max_inflight + 2;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	rc = names_init(s3, key, &w->n);
	if (!rc && !(w->spare = calloc(w->max_buf, sizeof(char *))))
		rc = DPT_ENOMEM;
	if (rc) {
		names_release(&w->n);
		free(w->spare);
		pthread_mutex_destroy(&w->lock);
		pthread_cond_destroy(&w->cond);
		free(w);
		return rc;
	}
	*out = &w->base;
	return 0;
}

/* With the lock held: the part of index I, created when missing. */
static int get_part(struct s3_writer *w, size_t i, struct part **out)
{
	if (i >= w->nparts) {
		size_t n = w->nparts ? w->nparts : 16;
		struct part **v;
		while (n <= i)
			n *= 2;
		v = realloc(w->parts, n * sizeof(*v));
		if (!v)
			return DPT_ENOMEM;
		memset(v + w->nparts, 0, (n - w->nparts) * sizeof(*v));
		w->parts = v;
		w->nparts = n;
	}
	if (!w->parts[i]) {
		struct part *p = calloc(1, sizeof(*p));
		if (!p)
			return DPT_ENOMEM;
		snprintf(p->number, sizeof(p->number), "%zu", i + 1);
		w->parts[i] = p;
	}
	*out = w->parts[i];
	return 0;
}

/* With the lock held: gives P a buffer. Waits while the writer holds its
 * share of buffers and uploads are under way to free one; when none is
 * (every buffer is a part still being filled) it takes one more rather
 * than wait forever. */
static int fill_buffer(struct s3_writer *w, struct part *p)
{
	while (!p->data) {
		if (w->err)
			return w->err;
		if (w->nspare) {
			p->data = w->spare[--w->nspare];
		} else if (w->nbuf < w->max_buf ||
			   (!w->qhead && w->uploading == 0)) {
			p->data = pool_take(w->s3);
			if (!p->data)
				p->data = malloc(w->part_size);
			if (!p->data)
				return DPT_ENOMEM;
			w->nbuf++;
		} else {
			pthread_cond_wait(&w->cond, &w->lock);
		}
	}
	return 0;
}

static int s3_write_at(struct dpt__storage_writer *wb, const void *buf,
		       size_t len, uint64_t offset)
{
	struct s3_writer *w = (struct s3_writer *)wb;
	uint64_t end = offset + len, pos = offset;
	size_t psz = w->part_size;
	int rc;

	pthread_mutex_lock(&w->lock);
	rc = w->err;
	if (rc)
		goto out;
	if (end > (uint64_t)MAX_PARTS * psz) {
		dpt__error("cannot write '%s': %llu bytes need more than %d "
			   "parts of %zu bytes: raise the part size",
			   w->n.uri, (unsigned long long)end, MAX_PARTS, psz);
		rc = DPT_ETOOBIG;
		set_err(w, rc);
		goto out;
	}
	while (pos < end) {
		size_t i = (size_t)(pos / psz), at = (size_t)(pos % psz);
		size_t n = end - pos < psz - at ? (size_t)(end - pos) : psz - at;
		struct part *p;
		char *data;

		rc = get_part(w, i, &p);
		if (rc) {
			set_err(w, rc);
			goto out;
		}
		if (p->state != FILLING || p->filled + n > psz) {
			dpt__error("cannot write '%s': bytes %llu to %llu "
				   "overlap an earlier write",
				   w->n.uri, (unsigned long long)pos,
				   (unsigned long long)(pos + n));
			rc = DPT_EINVAL;
			set_err(w, rc);
			goto out;
		}
		rc = fill_buffer(w, p);
		if (rc) {
			set_err(w, rc);
			goto out;
		}
		data = p->data;
		/* The part cannot leave while it is not full, and only this
		 * call fills these bytes: copy without the lock, so that
		 * writers of other ranges copy at the same time. */
		pthread_mutex_unlock(&w->lock);
		memcpy(data + at, (const char *)buf + (pos - offset), n);
		pthread_mutex_lock(&w->lock);
		p->filled += n;
		if (p->filled == psz) {
			p->len = psz;
			enqueue(w, p);
		}
		pos += n;
	}
	w->written += len;
	if (end > w->end)
		w->end = end;
	rc = w->err;
out:
	pthread_mutex_unlock(&w->lock);
	return rc;
}

static void writer_free(struct s3_writer *w)
{
	for (size_t i = 0; i < w->nparts; i++) {
		struct part *p = w->parts[i];
		if (!p)
			continue;
		dpt__s3_req_release(&p->req);
		pool_give(w->s3, p->data);
		free(p);
	}
	for (size_t i = 0; i < w->nspare; i++)
		pool_give(w->s3, w->spare[i]);
	free(w->spare);
	free(w->parts);
	free(w->upload_id);
	names_release(&w->n);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
}

static void stop_thread(struct s3_writer *w)
{
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	if (w->engine)
		dpt__s3_engine_wakeup(w->engine);
	pthread_mutex_unlock(&w->lock);
	if (w->started && !w->joined) {
		pthread_join(w->thread, NULL);
		w->joined = true;
	}
}

/* Stops the uploads and aborts the multipart upload, if there is one. */
static void abort_upload(struct s3_writer *w)
{
	struct dpt__s3_req r;
	int rc;

	stop_thread(w);
	if (!w->upload_id)
		return;
	req_object(&r, "DELETE", &w->n, "abort the multipart upload of");
	add_query(&r, "uploadId", w->upload_id);
	r.quiet_status = -1;
	rc = dpt__s3_perform(w->s3, &r);
	/* 404: gone already (a server that lost it, or gc). */
	if (rc && r.status != 404)
		dpt__warn("cannot abort the multipart upload %s of '%s' (%s, "
			  "HTTP status %ld): its parts stay stored (and "
			  "billed) until a gc of the storage (dptrain ckpt gc) "
			  "or a lifecycle rule removes them",
			  w->upload_id, w->n.uri, dpt_strerror(rc), r.status);
	dpt__s3_req_release(&r);
}

static void s3_abort(struct dpt__storage_writer *wb)
{
	struct s3_writer *w = (struct s3_writer *)wb;
	abort_upload(w);
	writer_free(w);
}

static int hexbyte(const char *s, unsigned char *out)
{
	int v = 0;
	for (int i = 0; i < 2; i++) {
		char c = s[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	*out = (unsigned char)v;
	return 0;
}

/*
 * The ETag S3 gives a completed multipart object: the MD5 of the parts'
 * binary MD5s, then "-N". Only computable when every part's ETag is its
 * MD5 (no SSE-KMS); returns false otherwise.
 */
static bool multipart_etag(struct s3_writer *w, size_t nparts, char *out,
			   size_t size)
{
	unsigned char *md5s, md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	bool ok = false;

	md5s = malloc(16 * nparts);
	if (!md5s)
		return false;
	for (size_t i = 0; i < nparts; i++) {
		const char *e = w->parts[i]->etag;
		if (strlen(e) != 34 || e[0] != '"')
			goto out;
		for (int j = 0; j < 16; j++)
			if (hexbyte(e + 1 + 2 * j, &md5s[16 * i + j]))
				goto out;
	}
	if (!EVP_Digest(md5s, 16 * nparts, md, &mdlen, EVP_md5(), NULL) ||
	    mdlen != 16)
		goto out;
	{
		char hex[33];
		for (int j = 0; j < 16; j++)
			snprintf(hex + 2 * j, 3, "%02x", md[j]);
		ok = snprintf(out, size, "\"%s-%zu\"", hex, nparts) <
		     (int)size;
	}
out:
	free(md5s);
	return ok;
}

static int complete_upload(struct s3_writer *w, size_t nparts)
{
	struct dpt__s3_req r, head;
	struct dpt__buf body;
	char expect[64];
	int rc;

	dpt__buf_init(&body, 128 * (size_t)MAX_PARTS);
	rc = dpt__buf_puts(&body, "<CompleteMultipartUpload xmlns=\"http://"
				  "s3.amazonaws.com/doc/2006-03-01/\">");
	for (size_t i = 0; i < nparts && !rc; i++) {
		rc = dpt__buf_printf(&body, "<Part><PartNumber>%zu</PartNumber>"
					    "<ETag>",
				     i + 1);
		if (!rc)
			rc = dpt__xml_escape(&body, w->parts[i]->etag);
		if (!rc)
			rc = dpt__buf_puts(&body, "</ETag></Part>");
	}
	if (!rc)
		rc = dpt__buf_puts(&body, "</CompleteMultipartUpload>");
	if (rc)
		goto out_body;
	req_object(&r, "POST", &w->n, "write");
	add_query(&r, "uploadId", w->upload_id);
	add_header(&r, "content-type", "application/xml");
	r.body = body.data;
	r.body_len = body.len;
	r.error_in_200 = true;
	r.quiet_status = 404;
	rc = dpt__s3_perform(w->s3, &r);
	if (rc && r.status == 404 &&
	    multipart_etag(w, nparts, expect, sizeof(expect))) {
		/* NoSuchUpload: an earlier attempt whose answer was lost may
		 * have completed the upload. That attempt need not be one of
		 * ours: curl itself sends a request again, silently, when a
		 * reused connection closes before any answer. The object's
		 * ETag (the MD5 of these parts' MD5s) tells whether it is
		 * this upload. */
		req_object(&head, "HEAD", &w->n, "write");
		head.quiet_status = -1;
		if (dpt__s3_perform(w->s3, &head) == 0 &&
		    strcmp(head.etag, expect) == 0) {
			dpt__info("'%s': an earlier attempt of "
				  "CompleteMultipartUpload succeeded",
				  w->n.uri);
			rc = 0;
		}
		dpt__s3_req_release(&head);
	}
	if (rc && r.status == 404)
		dpt__error("cannot write '%s': HTTP 404 from "
			   "CompleteMultipartUpload (the multipart upload was "
			   "aborted or lost by the server)",
			   w->n.uri);
	if (!rc) {
		free(w->upload_id); /* nothing to abort any more */
		w->upload_id = NULL;
	}
	dpt__s3_req_release(&r);
out_body:
	dpt__buf_release(&body);
	return rc;
}

static int put_single(struct s3_writer *w, const char *data, size_t len)
{
	struct dpt__s3_req r;
	int rc;

	req_object(&r, "PUT", &w->n, "write");
	add_header(&r, "content-type", OBJECT_TYPE);
	r.body = data;
	r.body_len = len;
	rc = dpt__s3_perform(w->s3, &r);
	dpt__s3_req_release(&r);
	return rc;
}

static int s3_finish(struct dpt__storage_writer *wb)
{
	struct s3_writer *w = (struct s3_writer *)wb;
	size_t psz = w->part_size, nparts;
	int rc;

	pthread_mutex_lock(&w->lock);
	rc = w->err;
	if (rc)
		goto fail_locked;
	nparts = (size_t)((w->end + psz - 1) / psz);
	for (size_t i = 0; i < nparts && !rc; i++) {
		struct part *p = i < w->nparts ? w->parts[i] : NULL;
		size_t want = i + 1 < nparts ? psz : (size_t)(w->end - i * psz);
		if (!p || p->filled != want)
			rc = DPT_EINVAL;
	}
	if (rc || w->written != w->end) {
		dpt__error("cannot write '%s': the writes cover %llu bytes of "
			   "%llu (holes or overlapping ranges)",
			   w->n.uri, (unsigned long long)w->written,
			   (unsigned long long)w->end);
		rc = DPT_EINVAL;
		goto fail_locked;
	}
	if (!w->started) {
		/* Smaller than a part: one PUT, no multipart upload. */
		pthread_mutex_unlock(&w->lock);
		rc = put_single(w, nparts ? w->parts[0]->data : NULL,
				(size_t)w->end);
		if (rc)
			goto fail;
		writer_free(w);
		return 0;
	}
	if (w->parts[nparts - 1]->state == FILLING) {
		struct part *last = w->parts[nparts - 1];
		last->len = last->filled;
		enqueue(w, last);
	}
	w->draining = true;
	if (w->engine)
		dpt__s3_engine_wakeup(w->engine);
	while (!w->thread_done)
		pthread_cond_wait(&w->cond, &w->lock);
	rc = w->err;
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	w->joined = true;
	if (!rc)
		rc = complete_upload(w, nparts);
	if (rc)
		goto fail;
	writer_free(w);
	return 0;

fail_locked:
	pthread_mutex_unlock(&w->lock);
fail:
	abort_upload(w);
	writer_free(w);
	return rc;
}

/* ------------------------------------------------------------ objects */

static int s3_read(struct dpt__storage_backend *base, const char *key,
		   uint64_t offset, size_t len, void *buf)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	size_t psz = s3->conf.part_size, n = (len + psz - 1) / psz;
	struct dpt__s3_req *reqs = NULL;
	char(*ranges)[48] = NULL;
	struct names nm;
	int rc;

	rc = names_init(s3, key, &nm);
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
		req_object(r, "GET", &nm, "read");
		add_header(r, "range", ranges[i]);
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
	names_release(&nm);
	return rc;
}

static int s3_stat(struct dpt__storage_backend *base, const char *key,
		   uint64_t *size)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	struct dpt__s3_req r;
	struct names nm;
	int rc;

	rc = names_init(s3, key, &nm);
	if (rc)
		goto out;
	req_object(&r, "HEAD", &nm, "stat");
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
	names_release(&nm);
	return rc;
}

static int s3_put_if_absent(struct dpt__storage_backend *base,
			    const char *key, const void *buf, size_t len)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	struct dpt__s3_req r;
	struct names nm;
	int rc;

	if (len > MAX_PUT) {
		dpt__error("cannot commit 's3://%s/%s%s': %zu bytes is more "
			   "than one PUT takes (5 GiB)",
			   s3->bucket, s3->prefix, key, len);
		return DPT_ETOOBIG;
	}
	rc = names_init(s3, key, &nm);
	if (rc)
		goto out;
	req_object(&r, "PUT", &nm, "write");
	add_header(&r, "if-none-match", "*");
	add_header(&r, "content-type", OBJECT_TYPE);
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
	names_release(&nm);
	return rc;
}

static int s3_list(struct dpt__storage_backend *base, const char *prefix,
		   dpt__storage_list_fn fn, void *ctx)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	struct dpt__buf token, k, full;
	char max_keys[16];
	char *uri = NULL, *token_copy = NULL;
	size_t plen = strlen(s3->prefix);
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
		add_query(&r, "list-type", "2");
		add_query(&r, "prefix", full.data);
		add_query(&r, "max-keys", max_keys);
		if (token_copy)
			add_query(&r, "continuation-token", token_copy);
		rc = dpt__s3_perform(s3, &r);
		doc = (struct dpt__xml_span){r.resp.data, r.resp.len};
		while (!rc && dpt__xml_next(doc, "Contents", &cursor, &c)) {
			unsigned long long size;
			char *end;
			dpt__buf_reset(&k);
			if (!dpt__xml_find(c, "Key", &v) || dpt__xml_text(&k, v) ||
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
		more = !rc && dpt__xml_find(doc, "IsTruncated", &v) &&
		       v.len == 4 && memcmp(v.p, "true", 4) == 0;
		if (more) {
			dpt__buf_reset(&token);
			if (!dpt__xml_find(doc, "NextContinuationToken", &v) ||
			    dpt__xml_text(&token, v) || token.len == 0) {
				rc = DPT_EPROTO;
			} else {
				free(token_copy);
				token_copy = strdup(token.data);
				if (!token_copy)
					rc = DPT_ENOMEM;
			}
		}
		if (rc == DPT_EPROTO)
			dpt__error("cannot list '%s': malformed "
				   "ListObjectsV2 answer",
				   uri);
		dpt__s3_req_release(&r);
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

static int delete_batch(struct dpt__s3 *s3, const char *const *keys,
			size_t n)
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
	add_query(&r, "delete", NULL);
	add_header(&r, "content-md5", md5);
	add_header(&r, "content-type", "application/xml");
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
			   k.len ? k.data : "?", code.len ? code.data : "error");
		if (!first)
			first = code.len && strcmp(code.data, "AccessDenied") == 0 ?
					DPT_EAUTH :
					DPT_ES3;
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

static int s3_delete(struct dpt__storage_backend *base,
		     const char *const *keys, size_t n)
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
		struct dpt__xml_span doc, u, v;
		size_t cursor = 0;
		char *km = kmark.len ? strdup(kmark.data) : NULL;
		char *um = umark.len ? strdup(umark.data) : NULL;

		dpt__s3_req_init(&r);
		r.method = "GET";
		r.uri = uri;
		r.what = "list the uploads of";
		add_query(&r, "uploads", NULL);
		add_query(&r, "prefix", full.data);
		if (km)
			add_query(&r, "key-marker", km);
		if (um)
			add_query(&r, "upload-id-marker", um);
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
		while (!rc && dpt__xml_next(doc, "Upload", &cursor, &u)) {
			struct dpt__s3_req a;
			time_t t;
			dpt__buf_reset(&k);
			dpt__buf_reset(&id);
			if (!dpt__xml_find(u, "Key", &v) || dpt__xml_text(&k, v) ||
			    !dpt__xml_find(u, "UploadId", &v) ||
			    dpt__xml_text(&id, v) ||
			    !dpt__xml_find(u, "Initiated", &v) ||
			    !parse_time(v, &t)) {
				rc = DPT_EPROTO;
				break;
			}
			if (t >= cutoff)
				continue;
			dpt__s3_req_init(&a);
			a.method = "DELETE";
			a.key = k.data;
			a.uri = uri;
			a.what = "abort an upload under";
			add_query(&a, "uploadId", id.data);
			if (dpt__s3_perform(s3, &a) == 0 || a.status == 404)
				(*removed)++;
			else if (!first)
				first = a.rc;
			dpt__s3_req_release(&a);
		}
		more = !rc && dpt__xml_find(doc, "IsTruncated", &v) &&
		       v.len == 4 && memcmp(v.p, "true", 4) == 0;
		if (more) {
			dpt__buf_reset(&kmark);
			dpt__buf_reset(&umark);
			if (dpt__xml_find(doc, "NextKeyMarker", &v))
				dpt__xml_text(&kmark, v);
			if (dpt__xml_find(doc, "NextUploadIdMarker", &v))
				dpt__xml_text(&umark, v);
			if (!kmark.len) /* would loop forever */
				more = false;
		}
		if (rc == DPT_EPROTO)
			dpt__error("cannot list the uploads of '%s': malformed "
				   "ListMultipartUploads answer",
				   uri);
		dpt__s3_req_release(&r);
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
	.writer_new = s3_writer_new,
	.write_at = s3_write_at,
	.finish = s3_finish,
	.abort = s3_abort,
	.put_if_absent = s3_put_if_absent,
	.read = s3_read,
	.stat = s3_stat,
	.list = s3_list,
	.delete = s3_delete,
	.gc = s3_gc,
	.reserve = s3_reserve,
};

int dpt__s3_open(const struct dpt__storage_uri *uri,
		 const struct dpt__storage_opts *opts,
		 const struct dpt__storage_conf *conf,
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
	/* As many as one writer holds at most (see s3_writer_new). */
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

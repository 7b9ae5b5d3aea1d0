/*
 * The s3 backend's writer: a multipart upload.
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

#include <openssl/evp.h>

#include <dptrain/error.h>

#include "log.h"
#include "s3.h"
#include "xml.h"

#define MAX_PARTS 10000

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
	struct dpt__s3_names n;
	size_t part_size;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* a part done, an error, the thread's end */
	struct part **parts; /* by part number - 1 */
	size_t nparts;
	char **spare; /* part buffers to reuse */
	size_t nspare;
	size_t nbuf; /* buffers allocated, in parts or spare */
	size_t max_buf;
	struct part *qhead, *qtail;
	int uploading;
	int err; /* sticky */
	uint64_t written, end;

	bool started; /* the upload thread was created */
	bool joined;
	bool draining; /* finish: no more parts will come */
	bool stop;     /* abort */
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

	dpt__s3_req_object(&r, "POST", &w->n, "write");
	dpt__s3_req_query(&r, "uploads", NULL);
	dpt__s3_req_header(&r, "content-type", DPT__S3_OBJECT_TYPE);
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

int dpt__s3_reserve(struct dpt__storage_backend *base, uint64_t bytes)
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
			dpt__s3_req_object(&p->req, "PUT", &w->n, "write");
			dpt__s3_req_query(&p->req, "partNumber", p->number);
			dpt__s3_req_query(&p->req, "uploadId", w->upload_id);
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

int dpt__s3_writer_new(struct dpt__storage_backend *base, const char *key,
		       struct dpt__storage_writer **out)
{
	struct dpt__s3 *s3 = (struct dpt__s3 *)base;
	struct s3_writer *w;
	int rc;

	w = calloc(1, sizeof(*w));
	if (!w)
		return DPT_ENOMEM;
	/* The backend's ops serve its writers too. */
	w->base.ops = base->ops;
	w->s3 = s3;
	w->part_size = s3->conf.part_size;
	w->max_buf = 2 * (size_t)s3->conf.max_inflight + 2;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	rc = dpt__s3_names_init(s3, key, &w->n);
	if (!rc && !(w->spare = calloc(w->max_buf, sizeof(char *))))
		rc = DPT_ENOMEM;
	if (rc) {
		dpt__s3_names_release(&w->n);
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

int dpt__s3_writer_write_at(struct dpt__storage_writer *wb, const void *buf,
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
		size_t n =
			end - pos < psz - at ? (size_t)(end - pos) : psz - at;
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
	dpt__s3_names_release(&w->n);
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
	dpt__s3_req_object(&r, "DELETE", &w->n,
			   "abort the multipart upload of");
	dpt__s3_req_query(&r, "uploadId", w->upload_id);
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

void dpt__s3_writer_abort(struct dpt__storage_writer *wb)
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
		ok = snprintf(out, size, "\"%s-%zu\"", hex, nparts) < (int)size;
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
		rc = dpt__buf_printf(&body,
				     "<Part><PartNumber>%zu</PartNumber>"
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
	dpt__s3_req_object(&r, "POST", &w->n, "write");
	dpt__s3_req_query(&r, "uploadId", w->upload_id);
	dpt__s3_req_header(&r, "content-type", "application/xml");
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
		dpt__s3_req_object(&head, "HEAD", &w->n, "write");
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

	dpt__s3_req_object(&r, "PUT", &w->n, "write");
	dpt__s3_req_header(&r, "content-type", DPT__S3_OBJECT_TYPE);
	r.body = data;
	r.body_len = len;
	rc = dpt__s3_perform(w->s3, &r);
	dpt__s3_req_release(&r);
	return rc;
}

int dpt__s3_writer_finish(struct dpt__storage_writer *wb)
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

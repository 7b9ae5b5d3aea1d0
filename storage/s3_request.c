/*
 * Signed S3 requests on libcurl's multi interface: several transfers in
 * flight on several connections from one thread, each retried with
 * exponential backoff and jitter when the failure is one that a retry can
 * cure (5xx, SlowDown, a dropped connection, a stall), and signed again
 * at each attempt (x-amz-date must be recent).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include <dptrain/error.h>

#include "clock.h"
#include "log.h"
#include "s3.h"

#define RESP_MAX (16 * 1024 * 1024)
#define EMPTY_SHA256                                                           \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int dpt__s3_curl_init(void)
{
	pthread_once(&curl_once, curl_init);
	return curl_init_rc == CURLE_OK ? 0 : DPT_ENOMEM;
}

void dpt__s3_req_init(struct dpt__s3_req *req)
{
	memset(req, 0, sizeof(*req));
	dpt__buf_init(&req->resp, RESP_MAX);
	req->content_length = -1;
}

void dpt__s3_req_release(struct dpt__s3_req *req)
{
	if (req->easy)
		curl_easy_cleanup(req->easy);
	curl_slist_free_all(req->slist);
	dpt__buf_release(&req->resp);
	req->easy = NULL;
	req->slist = NULL;
}

/* ------------------------------------------------------------ callbacks */

static size_t on_read(char *dst, size_t size, size_t nitems, void *ud)
{
	struct dpt__s3_req *r = ud;
	size_t n = size * nitems, left = r->body_len - r->sent;
	if (n > left)
		n = left;
	if (n)
		memcpy(dst, r->body + r->sent, n);
	r->sent += n;
	return n;
}

/* curl rewinds the body to send it again (a redirect, a connection that
 * turned out dead before the response). */
static int on_seek(void *ud, curl_off_t off, int origin)
{
	struct dpt__s3_req *r = ud;
	if (origin != SEEK_SET || off < 0 || (uint64_t)off > r->body_len)
		return CURL_SEEKFUNC_CANTSEEK;
	r->sent = (size_t)off;
	return CURL_SEEKFUNC_OK;
}

static size_t on_write(char *p, size_t size, size_t nitems, void *ud)
{
	struct dpt__s3_req *r = ud;
	size_t n = size * nitems;
	long code = 0;

	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
	if (r->dst && code >= 200 && code < 300) {
		/* More than asked for: the server ignored Range. */
		if (n > r->dst_len - r->got) {
			r->overflow = true;
			return 0;
		}
		memcpy(r->dst + r->got, p, n);
		r->got += n;
		return n;
	}
	if (dpt__buf_append(&r->resp, p, n)) {
		r->overflow = true;
		return 0;
	}
	return n;
}

/* The stall detector: a transfer that moves no byte, either way, for
 * stall_timeout_ms is aborted (and retried). curl's own low-speed limit
 * averages over a window of about 5 s, so that a part sent at full speed
 * then left unanswered would be caught only seconds later. curl calls this
 * at least at every engine step (one a second at the least). */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow,
		       curl_off_t ultotal, curl_off_t ulnow)
{
	struct dpt__s3_req *r = ud;
	int64_t now = dpt__now_ms(), moved = (int64_t)(dlnow + ulnow);
	(void)dltotal;
	(void)ultotal;
	if (moved != r->progress_bytes || r->progress_ms == 0) {
		r->progress_bytes = moved;
		r->progress_ms = now;
		return 0;
	}
	if (now - r->progress_ms >= r->stall_ms) {
		r->stalled = true;
		return 1; /* CURLE_ABORTED_BY_CALLBACK */
	}
	return 0;
}

static size_t on_header(char *p, size_t size, size_t nitems, void *ud)
{
	struct dpt__s3_req *r = ud;
	size_t n = size * nitems, len;

	if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		r->etag[0] = '\0'; /* a new response (after 100 Continue) */
	} else if (n > 5 && strncasecmp(p, "etag:", 5) == 0) {
		const char *v = p + 5;
		while (v < p + n && (*v == ' ' || *v == '\t'))
			v++;
		len = (size_t)(p + n - v);
		while (len && (v[len - 1] == '\r' || v[len - 1] == '\n' ||
			       v[len - 1] == ' '))
			len--;
		if (len < sizeof(r->etag)) {
			memcpy(r->etag, v, len);
			r->etag[len] = '\0';
		}
	}
	return n;
}

/* ------------------------------------------------------------ a request */

/* Host header, unencoded path (for the signer) and URL of R. */
static int build_target(struct dpt__s3 *s3, const struct dpt__s3_req *r,
			struct dpt__buf *host, struct dpt__buf *path,
			struct dpt__buf *url)
{
	int rc;

	if (s3->cfg.path_style)
		rc = dpt__buf_puts(host, s3->cfg.host);
	else
		rc = dpt__buf_printf(host, "%s.%s", s3->bucket, s3->cfg.host);
	if (!rc && s3->cfg.path_style)
		rc = dpt__buf_printf(path, "/%s%s", s3->bucket,
				     r->key ? "/" : "");
	else if (!rc)
		rc = dpt__buf_puts(path, "/");
	if (!rc && r->key)
		rc = dpt__buf_puts(path, r->key);
	if (!rc)
		rc = dpt__buf_printf(url, "%s://%s",
				     s3->cfg.https ? "https" : "http",
				     host->data);
	if (!rc)
		rc = dpt__sigv4_uri_encode(url, path->data, true);
	for (size_t i = 0; i < r->nquery && !rc; i++) {
		rc = dpt__buf_puts(url, i ? "&" : "?");
		if (!rc)
			rc = dpt__sigv4_uri_encode(url, r->query[i].name,
						   false);
		if (!rc)
			rc = dpt__buf_puts(url, "=");
		if (!rc && r->query[i].value)
			rc = dpt__sigv4_uri_encode(url, r->query[i].value,
						   false);
	}
	return rc;
}

static int add_header(struct curl_slist **list, struct dpt__buf *tmp,
		      const char *name, const char *value)
{
	struct curl_slist *l;
	int rc;

	dpt__buf_reset(tmp);
	rc = value ? dpt__buf_printf(tmp, "%s: %s", name, value)
		   : dpt__buf_printf(tmp, "%s:", name); /* removes it */
	if (rc)
		return rc;
	l = curl_slist_append(*list, tmp->data);
	if (!l)
		return DPT_ENOMEM;
	*list = l;
	return 0;
}

/* The headers of one attempt, signed now. */
static int sign(struct dpt__s3 *s3, struct dpt__s3_req *r, const char *host,
		const char *path)
{
	struct dpt__sigv4_pair h[4 + 4];
	struct dpt__sigv4_key key = {
		.access_key = s3->cfg.access_key,
		.secret_key = s3->cfg.secret_key,
		.region = s3->cfg.region,
		.service = "s3",
	};
	struct dpt__sigv4_request sr = {
		.method = r->method,
		.path = path,
		.query = r->query,
		.nquery = r->nquery,
		.headers = h,
		.payload_hash = r->payload_hash,
		.query_slash_raw = atomic_load(&s3->query_slash_raw),
	};
	struct dpt__buf auth, tmp;
	bool has_type = false;
	char date[17];
	size_t n = 0;
	int rc;

	dpt__sigv4_date(time(NULL), date);
	h[n++] = (struct dpt__sigv4_pair){"host", host};
	h[n++] = (struct dpt__sigv4_pair){"x-amz-content-sha256",
					  r->payload_hash};
	h[n++] = (struct dpt__sigv4_pair){"x-amz-date", date};
	if (s3->cfg.session_token)
		h[n++] = (struct dpt__sigv4_pair){"x-amz-security-token",
						  s3->cfg.session_token};
	for (size_t i = 0; i < r->nhdrs; i++) {
		h[n++] = r->hdrs[i];
		if (strcasecmp(r->hdrs[i].name, "content-type") == 0)
			has_type = true;
	}
	sr.nheaders = n;
	dpt__buf_init(&auth, 4096);
	dpt__buf_init(&tmp, 8192);
	rc = dpt__sigv4_authorization(&key, date, &sr, &auth, NULL);
	for (size_t i = 0; i < n && !rc; i++)
		rc = add_header(&r->slist, &tmp, h[i].name, h[i].value);
	if (!rc)
		rc = add_header(&r->slist, &tmp, "Authorization", auth.data);
	/* No "Expect: 100-continue": servers that do not answer it (moto)
	 * would cost a second per upload; a refused upload costs one part
	 * sent for nothing. */
	if (!rc)
		rc = add_header(&r->slist, &tmp, "Expect", NULL);
	if (!rc && !has_type && strcmp(r->method, "POST") == 0)
		rc = add_header(&r->slist, &tmp, "Content-Type", NULL);
	dpt__buf_release(&auth);
	dpt__buf_release(&tmp);
	return rc;
}

static int setup_easy(struct dpt__s3 *s3, struct dpt__s3_req *r,
		      const char *url)
{
	CURL *c = r->easy;

	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, r->slist);
	curl_easy_setopt(c, CURLOPT_PRIVATE, r);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, r->errbuf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
			 s3->conf.connect_timeout_ms);
	/* A stall detector, not a deadline: a part may take long on a slow
	 * link, but not move nothing for stall_timeout_ms. */
	r->stall_ms = s3->conf.stall_timeout_ms;
	r->progress_ms = 0;
	r->progress_bytes = -1;
	r->stalled = false;
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, r);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);
	curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 2L * 1024 * 1024);
	if (strcmp(r->method, "HEAD") == 0) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (strcmp(r->method, "PUT") == 0) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, r);
		curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(c, CURLOPT_SEEKDATA, r);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE,
				 (curl_off_t)r->body_len);
	} else if (strcmp(r->method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)r->body_len);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body ? r->body : "");
	} else if (strcmp(r->method, "GET") != 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
	}
	return 0;
}

static int start_attempt(struct dpt__s3_engine *e, struct dpt__s3_req *r)
{
	struct dpt__buf host, path, url;
	int rc;

	if (!r->payload_hash[0]) {
		if (r->body_len && r->body && e->s3->conf.unsigned_payload)
			memcpy(r->payload_hash, "UNSIGNED-PAYLOAD",
			       sizeof("UNSIGNED-PAYLOAD"));
		else if (r->body_len && r->body)
			dpt__sha256_hex(r->body, r->body_len, r->payload_hash);
		else
			memcpy(r->payload_hash, EMPTY_SHA256,
			       sizeof(EMPTY_SHA256));
	}
	if (r->easy) {
		curl_easy_reset(r->easy);
	} else if (!(r->easy = curl_easy_init())) {
		return DPT_ENOMEM;
	}
	curl_slist_free_all(r->slist);
	r->slist = NULL;
	r->sent = 0;
	r->got = 0;
	r->overflow = false;
	r->status = 0;
	r->etag[0] = '\0';
	r->errbuf[0] = '\0';
	dpt__buf_reset(&r->resp);

	dpt__buf_init(&host, 512);
	dpt__buf_init(&path, 4 * DPT__STORAGE_KEY_MAX);
	dpt__buf_init(&url, 16 * DPT__STORAGE_KEY_MAX);
	rc = build_target(e->s3, r, &host, &path, &url);
	if (!rc)
		rc = sign(e->s3, r, host.data, path.data);
	if (!rc)
		rc = setup_easy(e->s3, r, url.data);
	if (!rc && curl_multi_add_handle(e->multi, r->easy) != CURLM_OK)
		rc = DPT_ENOMEM;
	if (!rc) {
		r->running = true;
		r->attempts++;
		e->running++;
		r->anext = e->active;
		e->active = r;
	}
	dpt__buf_release(&host);
	dpt__buf_release(&path);
	dpt__buf_release(&url);
	return rc == DPT_ETOOBIG ? DPT_EINVAL : rc;
}

static long backoff_ms(struct dpt__s3_engine *e, int attempt)
{
	long d = e->s3->conf.retry_base_ms;
	for (int i = 1; i < attempt && d < e->s3->conf.retry_max_ms; i++)
		d *= 2;
	if (d > e->s3->conf.retry_max_ms)
		d = e->s3->conf.retry_max_ms;
	/* xorshift64: jitter only needs to decorrelate the clients. */
	e->rng ^= e->rng << 13;
	e->rng ^= e->rng >> 7;
	e->rng ^= e->rng << 17;
	return d / 2 + (long)(e->rng % (uint64_t)(d / 2 + 1));
}

static void stop_running(struct dpt__s3_engine *e, struct dpt__s3_req *r)
{
	curl_multi_remove_handle(e->multi, r->easy);
	r->running = false;
	e->running--;
	for (struct dpt__s3_req **pp = &e->active; *pp; pp = &(*pp)->anext) {
		if (*pp == r) {
			*pp = r->anext;
			break;
		}
	}
	r->anext = NULL;
}

static void end_attempt(struct dpt__s3_engine *e, struct dpt__s3_req *r,
			CURLcode cc, struct dpt__s3_req **done)
{
	struct dpt__buf cause;
	enum dpt__s3_verdict v;
	int rc;

	stop_running(e, r);
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);
	if (cc == CURLE_OK) {
		curl_off_t cl = -1;
		curl_easy_getinfo(r->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
				  &cl);
		r->content_length = cl;
	}
	dpt__buf_init(&cause, 4096);
	v = dpt__s3_classify(e->s3, r, cc, &rc, &cause);
	if (v == DPT__S3_RESIGN) {
		r->due_ms = dpt__now_ms();
		r->next = e->waiting;
		e->waiting = r;
		goto out;
	}
	if (v == DPT__S3_RETRY && r->attempts <= e->s3->conf.retries) {
		long wait = backoff_ms(e, r->attempts);
		dpt__warn("cannot %s '%s' yet, retrying in %ld ms (attempt "
			  "%d of %d): %s",
			  r->what, r->uri, wait, r->attempts + 1,
			  e->s3->conf.retries + 1, cause.data);
		r->due_ms = dpt__now_ms() + wait;
		r->next = e->waiting;
		e->waiting = r;
		goto out;
	}
	if (rc && r->attempts > 1)
		dpt__buf_printf(&cause, " (gave up after %d attempts)",
				r->attempts);
	r->rc = rc;
	if (rc && r->quiet_status != -1 &&
	    !(r->quiet_status && r->status == r->quiet_status))
		dpt__error("cannot %s '%s': %s", r->what, r->uri, cause.data);
	r->next = *done;
	*done = r;
out:
	dpt__buf_release(&cause);
}

/* ------------------------------------------------------------ engine */

int dpt__s3_engine_init(struct dpt__s3_engine *e, struct dpt__s3 *s3)
{
	memset(e, 0, sizeof(*e));
	e->s3 = s3;
	pthread_mutex_lock(&s3->lock);
	if (s3->nidle > 0)
		e->multi = s3->idle[--s3->nidle];
	pthread_mutex_unlock(&s3->lock);
	if (!e->multi) {
		e->multi = curl_multi_init();
		if (!e->multi)
			return DPT_ENOMEM;
		curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS,
				  (long)s3->conf.max_inflight * 2);
	}
	if (getrandom(&e->rng, sizeof(e->rng), 0) != (ssize_t)sizeof(e->rng))
		e->rng = (uint64_t)dpt__now_ms() ^ (uint64_t)(uintptr_t)e;
	e->rng |= 1;
	return 0;
}

int dpt__s3_engine_add(struct dpt__s3_engine *e, struct dpt__s3_req *r)
{
	int rc;
	r->rc = 0;
	r->next = NULL;
	rc = start_attempt(e, r);
	if (rc) {
		r->rc = rc;
		dpt__error("cannot %s '%s': %s", r->what, r->uri,
			   rc == DPT_EINVAL ? "the request is too long"
					    : dpt_strerror(rc));
	}
	return rc;
}

void dpt__s3_engine_step(struct dpt__s3_engine *e, int timeout_ms,
			 struct dpt__s3_req **done)
{
	struct dpt__s3_req **pp;
	int64_t now = dpt__now_ms(), wait = timeout_ms;
	CURLMsg *m;
	int still, left, round;

	for (pp = &e->waiting; *pp;) {
		struct dpt__s3_req *r = *pp;
		if (r->due_ms > now) {
			if (r->due_ms - now < wait)
				wait = r->due_ms - now;
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		r->next = NULL;
		if (dpt__s3_engine_add(e, r)) {
			r->next = *done;
			*done = r;
		}
	}
	for (round = 0; round < 2; round++) {
		curl_multi_perform(e->multi, &still);
		while ((m = curl_multi_info_read(e->multi, &left))) {
			char *priv = NULL;
			if (m->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE,
					  &priv);
			end_attempt(e, (struct dpt__s3_req *)priv,
				    m->data.result, done);
		}
		if (*done || round == 1)
			break;
		if (e->waiting && wait > 0) {
			/* A retry that just got scheduled may be due soon. */
			for (struct dpt__s3_req *r = e->waiting; r; r = r->next)
				if (r->due_ms - dpt__now_ms() < wait)
					wait = r->due_ms - dpt__now_ms();
		}
		if (wait < 0)
			wait = 0;
		curl_multi_poll(e->multi, NULL, 0, (int)wait, NULL);
	}
}

int dpt__s3_engine_pending(const struct dpt__s3_engine *e)
{
	int n = e->running;
	for (struct dpt__s3_req *r = e->waiting; r; r = r->next)
		n++;
	return n;
}

void dpt__s3_engine_wakeup(struct dpt__s3_engine *e)
{
	curl_multi_wakeup(e->multi);
}

void dpt__s3_engine_release(struct dpt__s3_engine *e)
{
	struct dpt__s3 *s3 = e->s3;
	CURLM *m = e->multi;

	if (!m)
		return;
	/* The running requests' easy handles are owned by their requests:
	 * take them out of the multi before it is reused. */
	while (e->active) {
		struct dpt__s3_req *r = e->active;
		stop_running(e, r);
		r->rc = DPT_EIO;
	}
	for (struct dpt__s3_req *r = e->waiting; r; r = r->next)
		r->rc = r->rc ? r->rc : DPT_EIO;
	e->waiting = NULL;
	e->multi = NULL;
	pthread_mutex_lock(&s3->lock);
	if (s3->nidle < DPT__S3_MULTI_POOL) {
		s3->idle[s3->nidle++] = m;
		m = NULL;
	}
	pthread_mutex_unlock(&s3->lock);
	if (m)
		curl_multi_cleanup(m);
}

int dpt__s3_perform(struct dpt__s3 *s3, struct dpt__s3_req *req)
{
	return dpt__s3_perform_all(s3, req, 1, 1);
}

int dpt__s3_perform_all(struct dpt__s3 *s3, struct dpt__s3_req *reqs, size_t n,
			int parallel)
{
	struct dpt__s3_engine e;
	size_t next = 0, finished = 0;
	int first = 0, rc;

	rc = dpt__s3_engine_init(&e, s3);
	if (rc)
		return rc;
	while (finished < n) {
		struct dpt__s3_req *done = NULL;
		while (!first && next < n &&
		       dpt__s3_engine_pending(&e) < parallel) {
			if (dpt__s3_engine_add(&e, &reqs[next++])) {
				first = reqs[next - 1].rc;
				finished++;
			}
		}
		if (first || dpt__s3_engine_pending(&e) == 0)
			break;
		dpt__s3_engine_step(&e, 1000, &done);
		for (; done; done = done->next) {
			finished++;
			if (done->rc && !first)
				first = done->rc;
		}
	}
	dpt__s3_engine_release(&e);
	return first;
}

/*
 * libFuzzer target for the S3 XML reader (storage/xml.c) and for what
 * reads S3's answers through it: dpt__s3_classify (storage/s3_outcome.c),
 * run for real on an answer made of the input, and the walks of s3.c and
 * s3_writer.c over ListObjectsV2, ListMultipartUploads, DeleteObjects and
 * InitiateMultipartUpload answers. Those walks are static functions that
 * send requests, so the target repeats their calls into the reader (the
 * element names and the order of the calls), not their code.
 *
 * Input: byte 0 picks the HTTP status, byte 1 holds flags (error_in_200,
 * a session token, a '/' in the query, already signed again), the rest is
 * the body. Invariants checked besides ASan/UBSan:
 * - dpt__xml_next: an element found lies inside the span, after the
 *   cursor, and the cursor moves forward to at most the end;
 * - dpt__xml_text: entities only shrink text, and the text has no NUL
 *   unless the input had one;
 * - dpt__xml_escape then dpt__xml_text gives the string back;
 * - dpt__s3_classify: a known verdict, an error for every status outside
 *   2xx, and success for a 2xx without <Error>.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "buf.h"
#include "log.h"
#include "s3.h"
#include "xml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_next(struct dpt__xml_span in, const char *name, size_t before,
		       size_t after, bool found, struct dpt__xml_span inner)
{
	if (after > in.len)
		abort();
	if (!found)
		return;
	if (after <= before || inner.p < in.p + before ||
	    inner.p + inner.len > in.p + after ||
	    inner.p + inner.len > in.p + in.len)
		abort();
	/* The text is preceded by the start tag's '>' (or "/>"). */
	if (inner.p == in.p || inner.p[-1] != '>')
		abort();
	(void)name;
}

static bool next(struct dpt__xml_span in, const char *name, size_t *cursor,
		 struct dpt__xml_span *inner)
{
	size_t before = *cursor;
	bool found = dpt__xml_next(in, name, cursor, inner);

	check_next(in, name, before, *cursor, found, *inner);
	return found;
}

static bool find(struct dpt__xml_span in, const char *name,
		 struct dpt__xml_span *inner)
{
	size_t cursor = 0;
	return next(in, name, &cursor, inner);
}

/* dpt__xml_text with its invariants; 0 or its error. */
static int text(struct dpt__buf *out, struct dpt__xml_span in)
{
	size_t before = out->len;
	int rc = dpt__xml_text(out, in);

	if (rc == 0) {
		size_t n = out->len - before;
		if (n > in.len)
			abort();
		if (!memchr(in.p, '\0', in.len) &&
		    memchr(out->data ? out->data + before : "", '\0', n))
			abort();
	} else if (rc != DPT_EPROTO && rc != DPT_ETOOBIG && rc != DPT_ENOMEM) {
		abort();
	}
	return rc;
}

/* Escaping S and reading it back gives S. */
static void round_trip(const char *s)
{
	struct dpt__buf esc, back;

	dpt__buf_init(&esc, 1 << 20);
	dpt__buf_init(&back, 1 << 20);
	if (dpt__xml_escape(&esc, s) == 0) {
		struct dpt__xml_span sp = {esc.data ? esc.data : "", esc.len};
		if (text(&back, sp) ||
		    strcmp(back.data ? back.data : "", s) != 0)
			abort();
	}
	dpt__buf_release(&esc);
	dpt__buf_release(&back);
}

/* s3.c's s3_list: Contents, Key, Size; IsTruncated, the token. */
static void list_objects(struct dpt__xml_span doc)
{
	struct dpt__xml_span c, v;
	struct dpt__buf k;
	size_t cursor = 0;

	dpt__buf_init(&k, 4 * DPT__STORAGE_KEY_MAX);
	while (next(doc, "Contents", &cursor, &c)) {
		dpt__buf_reset(&k);
		if (!find(c, "Key", &v) || text(&k, v) || !find(c, "Size", &v))
			break;
		round_trip(k.data ? k.data : "");
		dpt__storage_key_check(k.data ? k.data : "", false);
	}
	dpt__buf_reset(&k);
	if (find(doc, "IsTruncated", &v) &&
	    find(doc, "NextContinuationToken", &v))
		text(&k, v);
	dpt__buf_release(&k);
}

/* s3.c's s3_gc: Upload, Key, UploadId, Initiated; the markers. */
static void list_uploads(struct dpt__xml_span doc)
{
	struct dpt__xml_span u, v;
	struct dpt__buf k, id;
	size_t cursor = 0;

	dpt__buf_init(&k, 4 * DPT__STORAGE_KEY_MAX);
	dpt__buf_init(&id, 4096);
	while (next(doc, "Upload", &cursor, &u)) {
		dpt__buf_reset(&k);
		dpt__buf_reset(&id);
		if (!find(u, "Key", &v) || text(&k, v) ||
		    !find(u, "UploadId", &v) || text(&id, v) ||
		    !find(u, "Initiated", &v))
			break;
	}
	dpt__buf_reset(&k);
	dpt__buf_reset(&id);
	if (find(doc, "NextKeyMarker", &v))
		text(&k, v);
	if (find(doc, "NextUploadIdMarker", &v))
		text(&id, v);
	dpt__buf_release(&k);
	dpt__buf_release(&id);
}

/* s3.c's delete_batch: Error, Key, Code; s3_writer.c: UploadId. */
static void delete_errors(struct dpt__xml_span doc)
{
	struct dpt__xml_span e, v;
	struct dpt__buf k, code;
	size_t cursor = 0;

	dpt__buf_init(&k, 4 * DPT__STORAGE_KEY_MAX);
	dpt__buf_init(&code, 256);
	while (next(doc, "Error", &cursor, &e)) {
		dpt__buf_reset(&k);
		dpt__buf_reset(&code);
		if (find(e, "Key", &v))
			text(&k, v);
		if (find(e, "Code", &v))
			text(&code, v);
	}
	dpt__buf_reset(&k);
	if (find(doc, "UploadId", &v))
		text(&k, v);
	dpt__buf_release(&k);
	dpt__buf_release(&code);
}

static void classify(const uint8_t *data, size_t size)
{
	static const long statuses[] = {200, 204, 206, 301, 307, 400, 403,
					404, 409, 412, 416, 429, 500, 501,
					502, 503, 504, 599, 0,	 100};
	struct dpt__s3 s3;
	struct dpt__s3_req r;
	struct dpt__buf cause;
	enum dpt__s3_verdict v;
	long st;
	int rc = 1;

	if (size < 2)
		return;
	st = statuses[data[0] % (sizeof(statuses) / sizeof(statuses[0]))];
	memset(&s3, 0, sizeof(s3));
	s3.bucket = "bucket";
	s3.prefix = "runs/a/";
	s3.endpoint_msg = "http://127.0.0.1:5055";
	s3.cfg.region = "us-east-1";
	s3.cfg.access_key = "AKIDEXAMPLE";
	s3.cfg.cred_source = "the storage options";
	s3.cfg.session_token = data[1] & 2 ? "token" : NULL;
	dpt__s3_req_init(&r);
	r.method = "GET";
	r.uri = "s3://bucket/runs/a/";
	r.what = "list";
	r.status = st;
	r.error_in_200 = data[1] & 1;
	r.resigned = data[1] & 8;
	if (data[1] & 4) {
		r.query[0] = (struct dpt__sigv4_pair){"prefix", "runs/a/"};
		r.nquery = 1;
	}
	if (dpt__buf_append(&r.resp, data + 2, size - 2)) {
		dpt__s3_req_release(&r);
		return;
	}
	dpt__buf_init(&cause, 4096);
	v = dpt__s3_classify(&s3, &r, CURLE_OK, &rc, &cause);
	if (v != DPT__S3_DONE && v != DPT__S3_RETRY && v != DPT__S3_RESIGN)
		abort();
	if (rc > 0 || ((st < 200 || st > 299) && rc == 0))
		abort();
	if (st >= 200 && st <= 299 && !r.error_in_200 && rc != 0)
		abort();
	dpt__buf_release(&cause);
	dpt__s3_req_release(&r);
}

static void quiet(enum dpt__log_level level, const char *msg)
{
	(void)level;
	(void)msg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dpt__xml_span doc;
	struct dpt__xml_span v;
	struct dpt__buf b;
	static bool once;

	if (!once) {
		dpt__log_set_sink(quiet);
		once = true;
	}
	classify(data, size);
	if (size < 2)
		return 0;
	doc = (struct dpt__xml_span){(const char *)data + 2, size - 2};
	list_objects(doc);
	list_uploads(doc);
	delete_errors(doc);
	/* The whole body as text, and the reader's own edge: no name. */
	dpt__buf_init(&b, 1 << 20);
	text(&b, doc);
	if (b.data)
		round_trip(b.data);
	dpt__buf_release(&b);
	if (dpt__xml_find(doc, "", &v))
		abort();
	return 0;
}

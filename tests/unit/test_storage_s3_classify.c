/*
 * dpt__s3_classify, the table of what an S3 attempt's outcome means: for
 * each kind of answer (curl failures, HTTP statuses, S3 error codes), the
 * dpt_error, whether it is retried, whether the request is marked
 * ambiguous, and the message a user reads.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "buf.h"
#include "storage/s3.h"

#define ENDPOINT "http://127.0.0.1:5055"

static struct dpt__s3 s3 = {
	.bucket = "ckpt",
	.endpoint_msg = ENDPOINT,
	.cfg =
		{
			.region = "eu-west-3",
			.access_key = "AKIDEXAMPLE",
			.cred_source = "AWS_ACCESS_KEY_ID",
		},
	.conf = {.stall_timeout_ms = 30000},
};

/* An answer: a status (0: curl failed with CC), an S3 error code and
 * message in an <Error> body (NULL: no body). */
struct answer {
	CURLcode cc;
	long status;
	const char *code;
	const char *msg;
};

struct outcome {
	int rc;
	enum dpt__s3_verdict verdict;
	bool ambiguous;
	const char *cause;
};

static void check_req(struct dpt__s3_req *r, const struct answer *a,
		      const struct outcome *want)
{
	struct dpt__buf cause;
	enum dpt__s3_verdict v;
	int rc = -1;

	r->status = a->status;
	if (a->code || a->msg) {
		assert_int_equal(dpt__buf_puts(&r->resp, "<Error>"), 0);
		if (a->code)
			assert_int_equal(dpt__buf_printf(&r->resp,
							 "<Code>%s"
							 "</Code>",
							 a->code),
					 0);
		if (a->msg)
			assert_int_equal(dpt__buf_printf(&r->resp,
							 "<Message>%s"
							 "</Message>",
							 a->msg),
					 0);
		assert_int_equal(dpt__buf_puts(&r->resp, "</Error>"), 0);
	}
	dpt__buf_init(&cause, 4096);
	v = dpt__s3_classify(&s3, r, a->cc, &rc, &cause);
	if (rc != want->rc || v != want->verdict ||
	    r->ambiguous != want->ambiguous)
		fail_msg("status %ld, code %s, curl %d: rc %d verdict %d "
			 "ambiguous %d, want %d %d %d",
			 a->status, a->code ? a->code : "-", (int)a->cc, rc,
			 (int)v, r->ambiguous, want->rc, (int)want->verdict,
			 want->ambiguous);
	assert_string_equal(cause.len ? cause.data : "", want->cause);
	dpt__buf_release(&cause);
}

static void check(const struct answer *a, const struct outcome *want)
{
	struct dpt__s3_req r;

	dpt__s3_req_init(&r);
	check_req(&r, a, want);
	dpt__s3_req_release(&r);
}

#define KEY_HINT                                                               \
	" (bucket 'ckpt' at " ENDPOINT " refuses the key 'AKIDEXAMPLE' from "  \
	"AWS_ACCESS_KEY_ID: check the key, its secret and its permissions)"

static void http_statuses(void **state)
{
	static const struct {
		struct answer a;
		struct outcome want;
	} rows[] = {
		{{0, 200, NULL, NULL}, {0, DPT__S3_DONE, false, ""}},
		{{0, 204, NULL, NULL}, {0, DPT__S3_DONE, false, ""}},
		/* An <Error> in a 200 counts only with error_in_200. */
		{{0, 200, "InternalError", "x"}, {0, DPT__S3_DONE, false, ""}},
		{{0, 404, NULL, NULL},
		 {DPT_ENOENT, DPT__S3_DONE, false, "HTTP 404 (Not Found)"}},
		{{0, 404, "NoSuchKey", "The key does not exist"},
		 {DPT_ENOENT, DPT__S3_DONE, false,
		  "HTTP 404 NoSuchKey: The key does not exist"}},
		{{0, 404, "NoSuchBucket", NULL},
		 {DPT_ENOENT, DPT__S3_DONE, false,
		  "HTTP 404 NoSuchBucket (bucket 'ckpt' does not exist "
		  "at " ENDPOINT ")"}},
		{{0, 404, "NoSuchUpload", NULL},
		 {DPT_ES3, DPT__S3_DONE, false,
		  "HTTP 404 NoSuchUpload (the multipart upload was aborted or "
		  "lost by the server)"}},
		{{0, 301, "PermanentRedirect", NULL},
		 {DPT_ES3, DPT__S3_DONE, false,
		  "HTTP 301 PermanentRedirect (bucket 'ckpt' is not served "
		  "by " ENDPOINT " in region eu-west-3: set AWS_REGION or "
		  "DPTRAIN_S3_ENDPOINT)"}},
		{{0, 307, NULL, NULL},
		 {DPT_ES3, DPT__S3_DONE, false,
		  "HTTP 307  (bucket 'ckpt' is not served by " ENDPOINT
		  " in region eu-west-3: set AWS_REGION or "
		  "DPTRAIN_S3_ENDPOINT)"}},
		{{0, 302, NULL, NULL},
		 {DPT_ES3, DPT__S3_DONE, false, "HTTP 302 "}},
		{{0, 400, "RequestTimeout", NULL},
		 {DPT_ES3, DPT__S3_RETRY, true, "HTTP 400 RequestTimeout"}},
		{{0, 400, "OperationAborted", NULL},
		 {DPT_ES3, DPT__S3_RETRY, true, "HTTP 400 OperationAborted"}},
		{{0, 400, "ExpiredToken", NULL},
		 {DPT_EAUTH, DPT__S3_DONE, false,
		  "HTTP 400 ExpiredToken (the session token is missing: renew "
		  "the credentials of AWS_ACCESS_KEY_ID)"}},
		{{0, 400, "AuthorizationHeaderMalformed", NULL},
		 {DPT_EAUTH, DPT__S3_DONE, false,
		  "HTTP 400 AuthorizationHeaderMalformed (is the region "
		  "'eu-west-3' right? set AWS_REGION)"}},
		{{0, 400, "EntityTooSmall", NULL},
		 {DPT_EINVAL, DPT__S3_DONE, false, "HTTP 400 EntityTooSmall"}},
		{{0, 400, "InvalidArgument", "bad"},
		 {DPT_ES3, DPT__S3_DONE, false,
		  "HTTP 400 InvalidArgument: bad"}},
		{{0, 403, "AccessDenied", "Access Denied"},
		 {DPT_EAUTH, DPT__S3_DONE, false,
		  "HTTP 403 AccessDenied: Access Denied" KEY_HINT}},
		{{0, 403, NULL, NULL},
		 {DPT_EAUTH, DPT__S3_DONE, false,
		  "HTTP 403 (Forbidden)" KEY_HINT}},
		{{0, 403, "RequestTimeTooSkewed", NULL},
		 {DPT_EAUTH, DPT__S3_DONE, false,
		  "HTTP 403 RequestTimeTooSkewed (the clock of this host is "
		  "off: synchronise it)"}},
		/* No '/' in the query: signing again cannot help. */
		{{0, 403, "SignatureDoesNotMatch", NULL},
		 {DPT_EAUTH, DPT__S3_DONE, false,
		  "HTTP 403 SignatureDoesNotMatch" KEY_HINT}},
		{{0, 409, "ConditionalRequestConflict", NULL},
		 {DPT_ES3, DPT__S3_RETRY, true,
		  "HTTP 409 ConditionalRequestConflict"}},
		{{0, 412, "PreconditionFailed", NULL},
		 {DPT_EEXIST, DPT__S3_DONE, false,
		  "HTTP 412 PreconditionFailed"}},
		{{0, 416, NULL, NULL},
		 {DPT_ERANGE, DPT__S3_DONE, false,
		  "HTTP 416 (Range Not Satisfiable)"}},
		{{0, 418, NULL, NULL},
		 {DPT_ES3, DPT__S3_DONE, false, "HTTP 418 "}},
		{{0, 429, NULL, NULL},
		 {DPT_ES3, DPT__S3_RETRY, true,
		  "HTTP 429 (Too Many Requests)"}},
		{{0, 500, "InternalError", "We encountered an internal error"},
		 {DPT_ES3, DPT__S3_RETRY, true,
		  "HTTP 500 InternalError: We encountered an internal error"}},
		{{0, 501, "NotImplemented", NULL},
		 {DPT_ENOTSUP, DPT__S3_DONE, false,
		  "HTTP 501 NotImplemented (the server at " ENDPOINT
		  " does not implement this request)"}},
		{{0, 502, NULL, NULL},
		 {DPT_ES3, DPT__S3_RETRY, true, "HTTP 502 (Bad Gateway)"}},
		{{0, 503, "SlowDown", NULL},
		 {DPT_ES3, DPT__S3_RETRY, true, "HTTP 503 SlowDown"}},
		{{0, 504, NULL, NULL},
		 {DPT_ES3, DPT__S3_RETRY, true, "HTTP 504 (Gateway Timeout)"}},
		/* Other 5xx: retried, but not marked ambiguous. */
		{{0, 505, NULL, NULL},
		 {DPT_ES3, DPT__S3_RETRY, false, "HTTP 505 "}},
		{{0, 599, NULL, NULL},
		 {DPT_ES3, DPT__S3_RETRY, false, "HTTP 599 "}},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		check(&rows[i].a, &rows[i].want);
}

static void session_token(void **state)
{
	const struct answer a = {0, 400, "InvalidToken", NULL};
	const struct outcome want = {
		DPT_EAUTH, DPT__S3_DONE, false,
		"HTTP 400 InvalidToken (the session token is refused: renew "
		"the credentials of AWS_ACCESS_KEY_ID)"};

	(void)state;
	s3.cfg.session_token = "FQoGZXIvYXdzEXAMPLE";
	check(&a, &want);
	s3.cfg.session_token = NULL;
}

/* CompleteMultipartUpload answers 200 and then, in the body, <Error>. */
static void error_in_200(void **state)
{
	static const struct {
		const char *code;
		enum dpt__s3_verdict verdict;
	} rows[] = {
		{"InternalError", DPT__S3_RETRY},
		{"SlowDown", DPT__S3_RETRY},
		{"ServiceUnavailable", DPT__S3_RETRY},
		{"NoSuchUpload", DPT__S3_DONE},
		{"AccessDenied", DPT__S3_DONE},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct answer a = {0, 200, rows[i].code, NULL};
		struct outcome want = {DPT_ES3, rows[i].verdict, true, NULL};
		struct dpt__s3_req r;
		char cause[128];

		snprintf(cause, sizeof(cause), "HTTP 200 %s: ", rows[i].code);
		want.cause = cause;
		dpt__s3_req_init(&r);
		r.error_in_200 = true;
		check_req(&r, &a, &want);
		dpt__s3_req_release(&r);
	}
}

/* A server's message reaches the log without its control bytes (no line
 * of its own, no terminal escape) and at most 512 bytes long. */
static void hostile_message(void **state)
{
	char msg[800], want[700];

	(void)state;
	check(&(struct answer){0, 403, "AccessDenied",
			       "denied\nFAKE: job done\x1b[2J\x7f"},
	      &(struct outcome){DPT_EAUTH, DPT__S3_DONE, false,
				"HTTP 403 AccessDenied: denied?FAKE: job "
				"done?[2J?" KEY_HINT});
	memset(msg, 'm', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	snprintf(want, sizeof(want), "HTTP 500 InternalError: %.512s", msg);
	check(&(struct answer){0, 500, "InternalError", msg},
	      &(struct outcome){DPT_ES3, DPT__S3_RETRY, true, want});
}

/* SignatureDoesNotMatch with a '/' in the query: signed again once with
 * the other form; when that fails too, back to the SigV4 form, final. */
static void signature_resign(void **state)
{
	const struct answer a = {0, 403, "SignatureDoesNotMatch", NULL};
	const struct outcome first = {DPT_EAUTH, DPT__S3_RESIGN, false,
				      "HTTP 403 SignatureDoesNotMatch"};
	const struct outcome again = {
		DPT_EAUTH, DPT__S3_DONE, false,
		"HTTP 403 SignatureDoesNotMatch" KEY_HINT};
	struct dpt__s3_req r;

	(void)state;
	atomic_store(&s3.query_slash_raw, false);
	dpt__s3_req_init(&r);
	dpt__s3_req_query(&r, "prefix", "runs/a/");
	check_req(&r, &a, &first);
	assert_true(r.resigned);
	assert_true(atomic_load(&s3.query_slash_raw));
	dpt__s3_req_release(&r);

	dpt__s3_req_init(&r);
	dpt__s3_req_query(&r, "prefix", "runs/a/");
	r.resigned = true;
	check_req(&r, &a, &again);
	assert_false(atomic_load(&s3.query_slash_raw));
	dpt__s3_req_release(&r);
}

static void curl_failures(void **state)
{
	static const struct {
		CURLcode cc;
		int rc;
		enum dpt__s3_verdict verdict;
		bool ambiguous;
	} rows[] = {
		/* Refused: the server cannot have acted on the request. */
		{CURLE_COULDNT_RESOLVE_HOST, DPT_ES3, DPT__S3_RETRY, false},
		{CURLE_COULDNT_CONNECT, DPT_ES3, DPT__S3_RETRY, false},
		{CURLE_OPERATION_TIMEDOUT, DPT_ETIMEDOUT, DPT__S3_RETRY, true},
		{CURLE_SEND_ERROR, DPT_ES3, DPT__S3_RETRY, true},
		{CURLE_RECV_ERROR, DPT_ES3, DPT__S3_RETRY, true},
		{CURLE_GOT_NOTHING, DPT_ES3, DPT__S3_RETRY, true},
		{CURLE_PARTIAL_FILE, DPT_ES3, DPT__S3_RETRY, true},
		{CURLE_HTTP2, DPT_ES3, DPT__S3_RETRY, true},
		{CURLE_HTTP2_STREAM, DPT_ES3, DPT__S3_RETRY, true},
		{CURLE_SSL_CONNECT_ERROR, DPT_ES3, DPT__S3_RETRY, true},
		/* Anything else is final. */
		{CURLE_PEER_FAILED_VERIFICATION, DPT_ES3, DPT__S3_DONE, true},
		{CURLE_URL_MALFORMAT, DPT_ES3, DPT__S3_DONE, true},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct answer a = {rows[i].cc, 0, NULL, NULL};
		struct outcome want = {rows[i].rc, rows[i].verdict,
				       rows[i].ambiguous, NULL};
		char cause[256];

		snprintf(cause, sizeof(cause), "%s (endpoint " ENDPOINT ")",
			 curl_easy_strerror(rows[i].cc));
		want.cause = cause;
		check(&a, &want);
	}
}

static void curl_stall_and_overflow(void **state)
{
	const struct answer a = {CURLE_ABORTED_BY_CALLBACK, 0, NULL, NULL};
	const struct outcome stalled = {
		DPT_ETIMEDOUT, DPT__S3_RETRY, true,
		"timeout: no byte moved for 30000 ms (endpoint " ENDPOINT ")"};
	const struct outcome overflow = {
		DPT_ES3, DPT__S3_DONE, false,
		"the response is larger than expected (the server ignored the "
		"Range header?)"};
	const struct outcome errbuf = {DPT_ES3, DPT__S3_DONE, true,
				       "Failed writing body (endpoint " ENDPOINT
				       ")"};
	const struct answer w = {CURLE_WRITE_ERROR, 0, NULL, NULL};
	char dst[4];
	struct dpt__s3_req r;

	(void)state;
	dpt__s3_req_init(&r);
	r.stalled = true;
	check_req(&r, &a, &stalled);
	dpt__s3_req_release(&r);

	dpt__s3_req_init(&r);
	r.overflow = true;
	r.dst = dst;
	r.dst_len = sizeof(dst);
	check_req(&r, &w, &overflow);
	dpt__s3_req_release(&r);

	/* curl's own words, when it has some, rather than its code's. */
	dpt__s3_req_init(&r);
	snprintf(r.errbuf, sizeof(r.errbuf), "Failed writing body");
	check_req(&r, &w, &errbuf);
	dpt__s3_req_release(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(http_statuses),
		cmocka_unit_test(session_token),
		cmocka_unit_test(hostile_message),
		cmocka_unit_test(error_in_200),
		cmocka_unit_test(signature_resign),
		cmocka_unit_test(curl_failures),
		cmocka_unit_test(curl_stall_and_overflow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * What the outcome of an S3 attempt means: a dpt_error, whether to retry,
 * and the explanation for a message, looked up in two tables (curl codes;
 * HTTP statuses and S3 error codes). The request engine (s3_request.c)
 * acts on the verdict.
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "log.h"
#include "s3.h"
#include "xml.h"

/* The most of a server's Code or Message that goes into a message. */
#define FIELD_MAX 512

/* Field NAME of the <Error> in RESP, into OUT: at most FIELD_MAX bytes,
 * and a control byte (a line break, a terminal escape) as '?': it goes
 * into the job's log, and the server is not trusted to write its lines. */
static void xml_field(const struct dpt__buf *resp, const char *name,
		      struct dpt__buf *out)
{
	struct dpt__xml_span doc = {resp->data, resp->len}, err, v;
	if (!resp->data)
		return;
	if (!dpt__xml_find(doc, "Error", &err))
		err = doc;
	if (!dpt__xml_find(err, name, &v) || dpt__xml_text(out, v))
		return;
	if (out->len > FIELD_MAX) {
		out->len = FIELD_MAX;
		out->data[out->len] = '\0';
	}
	for (size_t i = 0; i < out->len; i++)
		if ((unsigned char)out->data[i] < 0x20 || out->data[i] == 0x7f)
			out->data[i] = '?';
}

static bool slash_in_query(const struct dpt__s3_req *r)
{
	for (size_t i = 0; i < r->nquery; i++)
		if (r->query[i].value && strchr(r->query[i].value, '/'))
			return true;
	return false;
}

static const char *status_name(long st)
{
	switch (st) {
	case 400:
		return "(Bad Request)";
	case 403:
		return "(Forbidden)";
	case 404:
		return "(Not Found)";
	case 409:
		return "(Conflict)";
	case 412:
		return "(Precondition Failed)";
	case 416:
		return "(Range Not Satisfiable)";
	case 429:
		return "(Too Many Requests)";
	case 500:
		return "(Internal Server Error)";
	case 502:
		return "(Bad Gateway)";
	case 503:
		return "(Service Unavailable)";
	case 504:
		return "(Gateway Timeout)";
	default:
		return "";
	}
}

/*
 * What an attempt that curl could not complete means: the first row of
 * CC, or curl_other. AMBIGUOUS: the server may have acted on the request;
 * only a refused connection proves that it did not.
 */
struct curl_outcome {
	CURLcode cc;
	int rc;
	bool retry;
	bool ambiguous;
};

static const struct curl_outcome curl_outcomes[] = {
	{CURLE_COULDNT_RESOLVE_HOST, DPT_ES3, true, false},
	{CURLE_COULDNT_CONNECT, DPT_ES3, true, false},
	{CURLE_OPERATION_TIMEDOUT, DPT_ETIMEDOUT, true, true},
	{CURLE_SEND_ERROR, DPT_ES3, true, true},
	{CURLE_RECV_ERROR, DPT_ES3, true, true},
	{CURLE_GOT_NOTHING, DPT_ES3, true, true},
	{CURLE_PARTIAL_FILE, DPT_ES3, true, true},
	{CURLE_HTTP2, DPT_ES3, true, true},
	{CURLE_HTTP2_STREAM, DPT_ES3, true, true},
	{CURLE_SSL_CONNECT_ERROR, DPT_ES3, true, true},
};
static const struct curl_outcome curl_other = {CURLE_OK, DPT_ES3, false, true};

/*
 * What an HTTP answer means: the first row whose status range holds the
 * status and whose CODE (NULL: any) is the S3 error code of the answer.
 * A 2xx is looked up only when it carries an <Error> (error_in_200).
 * HINT is appended to the message, its {names} replaced (see
 * hint_append). RESIGN: sign once more with the other form of '/' in the
 * query (see dpt__s3.query_slash_raw) when that may help, else DONE.
 */
struct http_outcome {
	long lo, hi;
	const char *code;
	int rc;
	enum dpt__s3_verdict verdict;
	bool ambiguous;
	const char *hint;
};

#define HINT_KEY                                                               \
	" (bucket '{bucket}' at {endpoint} refuses the key '{key}' from "      \
	"{source}: check the key, its secret and its permissions)"
#define HINT_REGION                                                            \
	" (bucket '{bucket}' is not served by {endpoint} in region {region}: " \
	"set AWS_REGION or DPTRAIN_S3_ENDPOINT)"
#define HINT_TOKEN                                                             \
	" (the session token {token}: renew the credentials of {source})"

static const struct http_outcome http_outcomes[] = {
	/* CompleteMultipartUpload: 200, then <Error>. */
	{200, 299, "InternalError", DPT_ES3, DPT__S3_RETRY, true, NULL},
	{200, 299, "SlowDown", DPT_ES3, DPT__S3_RETRY, true, NULL},
	{200, 299, "ServiceUnavailable", DPT_ES3, DPT__S3_RETRY, true, NULL},
	{200, 299, NULL, DPT_ES3, DPT__S3_DONE, true, NULL},
	{301, 301, NULL, DPT_ES3, DPT__S3_DONE, false, HINT_REGION},
	{307, 307, NULL, DPT_ES3, DPT__S3_DONE, false, HINT_REGION},
	{400, 400, "RequestTimeout", DPT_ES3, DPT__S3_RETRY, true, NULL},
	{400, 400, "OperationAborted", DPT_ES3, DPT__S3_RETRY, true, NULL},
	{400, 400, "ExpiredToken", DPT_EAUTH, DPT__S3_DONE, false, HINT_TOKEN},
	{400, 400, "InvalidToken", DPT_EAUTH, DPT__S3_DONE, false, HINT_TOKEN},
	{400, 400, "AuthorizationHeaderMalformed", DPT_EAUTH, DPT__S3_DONE,
	 false, " (is the region '{region}' right? set AWS_REGION)"},
	{400, 400, "EntityTooSmall", DPT_EINVAL, DPT__S3_DONE, false, NULL},
	{400, 400, NULL, DPT_ES3, DPT__S3_DONE, false, NULL},
	{403, 403, "SignatureDoesNotMatch", DPT_EAUTH, DPT__S3_RESIGN, false,
	 HINT_KEY},
	{403, 403, "RequestTimeTooSkewed", DPT_EAUTH, DPT__S3_DONE, false,
	 " (the clock of this host is off: synchronise it)"},
	{403, 403, NULL, DPT_EAUTH, DPT__S3_DONE, false, HINT_KEY},
	{404, 404, "NoSuchBucket", DPT_ENOENT, DPT__S3_DONE, false,
	 " (bucket '{bucket}' does not exist at {endpoint})"},
	/* The upload is gone: aborted by gc, or the server lost it.
	 * Retrying cannot bring it back. */
	{404, 404, "NoSuchUpload", DPT_ES3, DPT__S3_DONE, false,
	 " (the multipart upload was aborted or lost by the server)"},
	{404, 404, NULL, DPT_ENOENT, DPT__S3_DONE, false, NULL},
	/* ConditionalRequestConflict: a concurrent write */
	{409, 409, NULL, DPT_ES3, DPT__S3_RETRY, true, NULL},
	{412, 412, NULL, DPT_EEXIST, DPT__S3_DONE, false, NULL},
	{416, 416, NULL, DPT_ERANGE, DPT__S3_DONE, false, NULL},
	{429, 429, NULL, DPT_ES3, DPT__S3_RETRY, true, NULL},
	{500, 500, NULL, DPT_ES3, DPT__S3_RETRY, true, NULL},
	/* NotImplemented: an S3-compatible server without this request
	 * (s3rver has no ListMultipartUploads). Final: a retry gets the
	 * same answer, only later. */
	{501, 501, NULL, DPT_ENOTSUP, DPT__S3_DONE, false,
	 " (the server at {endpoint} does not implement this request)"},
	/* 503: SlowDown */
	{502, 504, NULL, DPT_ES3, DPT__S3_RETRY, true, NULL},
	/* Any other status from 500 up: retried, not marked ambiguous. */
	{500, LONG_MAX, NULL, DPT_ES3, DPT__S3_RETRY, false, NULL},
	/* Anything else: final; the last row matches every answer. */
	{LONG_MIN, LONG_MAX, NULL, DPT_ES3, DPT__S3_DONE, false, NULL},
};

static const struct curl_outcome *curl_outcome(CURLcode cc)
{
	size_t n = sizeof(curl_outcomes) / sizeof(curl_outcomes[0]);

	for (size_t i = 0; i < n; i++)
		if (curl_outcomes[i].cc == cc)
			return &curl_outcomes[i];
	return &curl_other;
}

/* CODE: the S3 error code, NULL when the answer has none. */
static const struct http_outcome *http_outcome(long status, const char *code)
{
	const struct http_outcome *o = http_outcomes;

	while (status < o->lo || status > o->hi ||
	       (o->code && (!code || strcmp(o->code, code) != 0)))
		o++; /* the last row matches anything */
	return o;
}

/* Appends HINT to CAUSE, whole or not at all, with {bucket}, {endpoint},
 * {region}, {key} (the access key), {source} (where it comes from) and
 * {token} (whether a session token was sent) replaced. */
static void hint_append(struct dpt__buf *cause, const char *hint,
			const struct dpt__s3 *s3)
{
	struct dpt__buf b;
	int rc = 0;

	dpt__buf_init(&b, cause->max);
	while (*hint && !rc) {
		const char *open = strchr(hint, '{'), *close, *v;
		size_t n;

		if (!open) {
			rc = dpt__buf_puts(&b, hint);
			break;
		}
		close = strchr(open, '}');
		n = (size_t)(close - open - 1);
		if (n == 6 && strncmp(open + 1, "bucket", n) == 0)
			v = s3->bucket;
		else if (n == 8 && strncmp(open + 1, "endpoint", n) == 0)
			v = s3->endpoint_msg;
		else if (n == 6 && strncmp(open + 1, "region", n) == 0)
			v = s3->cfg.region;
		else if (n == 3 && strncmp(open + 1, "key", n) == 0)
			v = s3->cfg.access_key;
		else if (n == 6 && strncmp(open + 1, "source", n) == 0)
			v = s3->cfg.cred_source;
		else /* token */
			v = s3->cfg.session_token ? "is refused" : "is missing";
		rc = dpt__buf_append(&b, hint, (size_t)(open - hint));
		if (!rc)
			rc = dpt__buf_puts(&b, v);
		hint = close + 1;
	}
	if (!rc && b.len)
		dpt__buf_append(cause, b.data, b.len);
	dpt__buf_release(&b);
}

enum dpt__s3_verdict dpt__s3_classify(struct dpt__s3 *s3, struct dpt__s3_req *r,
				      CURLcode cc, int *rc,
				      struct dpt__buf *cause)
{
	const struct http_outcome *o;
	struct dpt__buf code, msg;
	long st = r->status;
	enum dpt__s3_verdict v = DPT__S3_DONE;

	*rc = 0;
	if (cc != CURLE_OK) {
		const struct curl_outcome *c = curl_outcome(cc);

		if (r->overflow) {
			*rc = DPT_ES3;
			dpt__buf_printf(cause,
					"the response is larger than "
					"expected%s",
					r->dst ? " (the server ignored the "
						 "Range header?)"
					       : "");
			return DPT__S3_DONE;
		}
		*rc = r->stalled ? DPT_ETIMEDOUT : c->rc;
		if (r->stalled)
			dpt__buf_printf(cause,
					"timeout: no byte moved for "
					"%ld ms (endpoint %s)",
					s3->conf.stall_timeout_ms,
					s3->endpoint_msg);
		else
			dpt__buf_printf(cause, "%s (endpoint %s)",
					r->errbuf[0] ? r->errbuf
						     : curl_easy_strerror(cc),
					s3->endpoint_msg);
		if (c->ambiguous)
			r->ambiguous = true;
		return c->retry || r->stalled ? DPT__S3_RETRY : DPT__S3_DONE;
	}
	dpt__buf_init(&code, 256);
	dpt__buf_init(&msg, 1024);
	xml_field(&r->resp, "Code", &code);
	xml_field(&r->resp, "Message", &msg);
	if (st >= 200 && st < 300) {
		if (!r->error_in_200 || !code.len)
			goto out;
		dpt__buf_printf(cause, "HTTP %ld %s: %s", st, code.data,
				msg.len ? msg.data : "");
	} else {
		/* A HEAD answer has no body: the status's own name then. */
		dpt__buf_printf(cause, "HTTP %ld %s%s%s", st,
				code.len ? code.data : status_name(st),
				msg.len ? ": " : "", msg.len ? msg.data : "");
	}
	o = http_outcome(st, code.len ? code.data : NULL);
	*rc = o->rc;
	v = o->verdict;
	if (o->ambiguous)
		r->ambiguous = true;
	if (v == DPT__S3_RESIGN) {
		/* SignatureDoesNotMatch. Servers disagree on '/' in
		 * canonical query values (moto wants it unencoded): try the
		 * other form once, and keep it if it works. When the other
		 * form did not help either, the key is wrong, not the
		 * canonical query: go back to what SigV4 specifies. */
		v = DPT__S3_DONE;
		if (r->resigned) {
			atomic_store(&s3->query_slash_raw, false);
		} else if (slash_in_query(r) &&
			   !atomic_exchange(&s3->query_slash_raw, true)) {
			dpt__debug(
				"%s: signing again with '/' unencoded in the "
				"canonical query (the server is not AWS)",
				s3->endpoint_msg);
			r->resigned = true;
			v = DPT__S3_RESIGN;
			goto out;
		}
	}
	if (o->hint)
		hint_append(cause, o->hint, s3);
out:
	dpt__buf_release(&code);
	dpt__buf_release(&msg);
	return v;
}

#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <dptrain/error.h>

#include "sigv4.h"

#define SIGV4_MAX (64 * 1024)

static const char hexdigits[] = "0123456789abcdef";

static void to_hex(const unsigned char *d, size_t n, char *hex)
{
	for (size_t i = 0; i < n; i++) {
		hex[2 * i] = hexdigits[d[i] >> 4];
		hex[2 * i + 1] = hexdigits[d[i] & 15];
	}
	hex[2 * n] = '\0';
}

void dpt__sha256_hex(const void *data, size_t len, char hex[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256(data, len, md);
	to_hex(md, sizeof(md), hex);
}

void dpt__sigv4_date(time_t t, char out[17])
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static int hmac(const void *key, size_t klen, const char *msg, size_t mlen,
		unsigned char out[32])
{
	unsigned int n = 32;
	if (!HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg,
		  mlen, out, &n))
		return DPT_ENOMEM;
	return 0;
}

int dpt__sigv4_uri_encode(struct dpt__buf *out, const char *s, bool keep_slash)
{
	int rc = 0;
	for (; *s && !rc; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~' || (c == '/' && keep_slash)) {
			rc = dpt__buf_append(out, s, 1);
		} else {
			char esc[3] = {'%', "0123456789ABCDEF"[c >> 4],
				       "0123456789ABCDEF"[c & 15]};
			rc = dpt__buf_append(out, esc, 3);
		}
	}
	return rc;
}

struct enc_pair {
	char *name;
	char *value;
};

static int cmp_pair(const void *a, const void *b)
{
	const struct enc_pair *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->value, y->value);
}

struct lc_header {
	char name[64];
	const char *value;
};

static int cmp_header(const void *a, const void *b)
{
	return strcmp(((const struct lc_header *)a)->name,
		      ((const struct lc_header *)b)->name);
}

/* The canonical query string: names and values encoded, then sorted by
 * name (and value) as bytes: the order that curl 7.88 does not apply. */
static int canonical_query(const struct dpt__sigv4_request *req,
			   struct dpt__buf *out)
{
	struct enc_pair *p = NULL;
	struct dpt__buf tmp;
	int rc = 0;

	if (req->nquery == 0)
		return 0;
	dpt__buf_init(&tmp, SIGV4_MAX);
	p = calloc(req->nquery, sizeof(*p));
	if (!p)
		return DPT_ENOMEM;
	for (size_t i = 0; i < req->nquery && !rc; i++) {
		const char *v = req->query[i].value ? req->query[i].value : "";
		rc = dpt__sigv4_uri_encode(&tmp, req->query[i].name, false);
		if (!rc && !(p[i].name = dpt__buf_steal(&tmp)))
			rc = DPT_ENOMEM;
		if (!rc)
			rc = dpt__sigv4_uri_encode(&tmp, v,
						   req->query_slash_raw);
		if (!rc && !(p[i].value = dpt__buf_steal(&tmp)))
			rc = DPT_ENOMEM;
	}
	if (rc)
		goto out;
	qsort(p, req->nquery, sizeof(*p), cmp_pair);
	for (size_t i = 0; i < req->nquery && !rc; i++)
		rc = dpt__buf_printf(out, "%s%s=%s", i ? "&" : "", p[i].name,
				     p[i].value);
out:
	for (size_t i = 0; i < req->nquery; i++) {
		free(p[i].name);
		free(p[i].value);
	}
	free(p);
	dpt__buf_release(&tmp);
	return rc;
}

/* Canonical headers and the signed-headers list: names lower-cased and
 * sorted, values with leading and trailing blanks trimmed and inner runs
 * of blanks folded to one space. */
static int canonical_headers(const struct dpt__sigv4_request *req,
			     struct dpt__buf *out, struct dpt__buf *signed_hdrs)
{
	struct lc_header *h;
	int rc = 0;

	if (req->nheaders == 0)
		return DPT_EINVAL;
	h = calloc(req->nheaders, sizeof(*h));
	if (!h)
		return DPT_ENOMEM;
	for (size_t i = 0; i < req->nheaders; i++) {
		size_t n = strlen(req->headers[i].name);
		if (n == 0 || n >= sizeof(h[i].name)) {
			rc = DPT_EINVAL;
			goto out;
		}
		for (size_t j = 0; j <= n; j++) {
			char c = req->headers[i].name[j];
			h[i].name[j] = (c >= 'A' && c <= 'Z') ? c + 32 : c;
		}
		h[i].value = req->headers[i].value;
	}
	qsort(h, req->nheaders, sizeof(*h), cmp_header);
	for (size_t i = 0; i < req->nheaders && !rc; i++) {
		const char *v = h[i].value;
		bool blank = false;
		rc = dpt__buf_printf(out, "%s:", h[i].name);
		while (*v == ' ' || *v == '\t')
			v++;
		for (; *v && !rc; v++) {
			if (*v == ' ' || *v == '\t') {
				blank = true;
				continue;
			}
			if (blank)
				rc = dpt__buf_append(out, " ", 1);
			blank = false;
			if (!rc)
				rc = dpt__buf_append(out, v, 1);
		}
		if (!rc)
			rc = dpt__buf_append(out, "\n", 1);
		if (!rc)
			rc = dpt__buf_printf(signed_hdrs, "%s%s", i ? ";" : "",
					     h[i].name);
	}
out:
	free(h);
	return rc;
}

int dpt__sigv4_authorization(const struct dpt__sigv4_key *key,
			     const char *amz_date,
			     const struct dpt__sigv4_request *req,
			     struct dpt__buf *out, struct dpt__buf *canonical)
{
	struct dpt__buf creq, sh, sts, k;
	unsigned char kdate[32], kregion[32], kservice[32], ksigning[32];
	unsigned char sig[32];
	char creq_hash[65], sig_hex[65], day[9];
	int rc;

	if (!amz_date || strlen(amz_date) != 16 || amz_date[8] != 'T')
		return DPT_EINVAL;
	memcpy(day, amz_date, 8);
	day[8] = '\0';
	dpt__buf_init(&creq, SIGV4_MAX);
	dpt__buf_init(&sh, SIGV4_MAX);
	dpt__buf_init(&sts, SIGV4_MAX);
	dpt__buf_init(&k, 1024);

	/* CanonicalRequest: method, URI, query, headers, signed headers,
	 * payload hash, separated by newlines. */
	rc = dpt__buf_printf(&creq, "%s\n", req->method);
	if (!rc)
		rc = dpt__sigv4_uri_encode(&creq, req->path, true);
	if (!rc)
		rc = dpt__buf_puts(&creq, "\n");
	if (!rc)
		rc = canonical_query(req, &creq);
	if (!rc)
		rc = dpt__buf_puts(&creq, "\n");
	if (!rc)
		rc = canonical_headers(req, &creq, &sh);
	if (!rc)
		rc = dpt__buf_printf(&creq, "\n%s\n%s", sh.data,
				     req->payload_hash);
	if (rc)
		goto out;
	if (canonical) {
		rc = dpt__buf_append(canonical, creq.data, creq.len);
		if (rc)
			goto out;
	}
	dpt__sha256_hex(creq.data, creq.len, creq_hash);

	rc = dpt__buf_printf(
		&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s",
		amz_date, day, key->region, key->service, creq_hash);
	if (!rc)
		rc = dpt__buf_printf(&k, "AWS4%s", key->secret_key);
	if (!rc)
		rc = hmac(k.data, k.len, day, 8, kdate);
	if (!rc)
		rc = hmac(kdate, 32, key->region, strlen(key->region), kregion);
	if (!rc)
		rc = hmac(kregion, 32, key->service, strlen(key->service),
			  kservice);
	if (!rc)
		rc = hmac(kservice, 32, "aws4_request", 12, ksigning);
	if (!rc)
		rc = hmac(ksigning, 32, sts.data, sts.len, sig);
	if (rc)
		goto out;
	to_hex(sig, 32, sig_hex);
	rc = dpt__buf_printf(out,
			     "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/"
			     "aws4_request,SignedHeaders=%s,Signature=%s",
			     key->access_key, day, key->region, key->service,
			     sh.data, sig_hex);
out:
	/* The derived keys are as good as the secret. */
	OPENSSL_cleanse(kdate, sizeof(kdate));
	OPENSSL_cleanse(kregion, sizeof(kregion));
	OPENSSL_cleanse(kservice, sizeof(kservice));
	OPENSSL_cleanse(ksigning, sizeof(ksigning));
	if (k.data)
		OPENSSL_cleanse(k.data, k.len);
	dpt__buf_release(&k);
	dpt__buf_release(&creq);
	dpt__buf_release(&sh);
	dpt__buf_release(&sts);
	return rc;
}

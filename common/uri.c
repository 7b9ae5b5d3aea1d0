/*
 * Root URIs and keys of checkpoint storage: see uri.h.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "buf.h"
#include "parse.h"
#include "uri.h"

#define PATH_MAX_LEN 4096

static const char dots[] = "a '.' or '..' component (also written %2e) is "
			   "not allowed: write the path without it";
static const char bad_escape[] = "'%' must be followed by two hex digits "
				 "(and %00 is not allowed)";
static const char too_long[] = "too long";

int dpt__storage_key_check(const char *key, bool empty_ok)
{
	size_t n, comp = 0;

	if (!key)
		return DPT_EINVAL;
	n = strlen(key);
	if (n == 0)
		return empty_ok ? 0 : DPT_EINVAL;
	if (n > DPT__STORAGE_KEY_MAX || key[0] == '/')
		return DPT_EINVAL;
	/* The posix backend names its temporary files so. */
	if (strstr(key, ".dpt-tmp."))
		return DPT_EINVAL;
	for (size_t i = 0; i <= n; i++) {
		char c = key[i];
		if (c == '/' || c == '\0') {
			const char *s = key + i - comp;
			/* A prefix may end in '/', a key may not. */
			if (comp == 0 && !(c == '\0' && empty_ok))
				return DPT_EINVAL;
			if ((comp == 1 && s[0] == '.') ||
			    (comp == 2 && s[0] == '.' && s[1] == '.'))
				return DPT_EINVAL;
			comp = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-' || c == '~'))
			return DPT_EINVAL;
		comp++;
	}
	return 0;
}

/*
 * Drops the empty components of the decoded absolute path in B ("//",
 * a trailing '/'), and refuses "." and ".." components: checked after
 * the decoding, so "%2e%2e" is "..". A root with them could name a
 * directory outside the one an admin allowed (the plugin compares the
 * same normalised form), and keys never hold them either.
 */
static int normalise_path(struct dpt__buf *b)
{
	size_t r = 0, w = 0;

	while (r < b->len) {
		size_t start, n;

		while (r < b->len && b->data[r] == '/')
			r++;
		start = r;
		while (r < b->len && b->data[r] != '/')
			r++;
		n = r - start;
		if (n == 0)
			break;
		if ((n == 1 && b->data[start] == '.') ||
		    (n == 2 && b->data[start] == '.' &&
		     b->data[start + 1] == '.'))
			return DPT_EINVAL;
		b->data[w++] = '/';
		memmove(b->data + w, b->data + start, n);
		w += n;
	}
	if (w == 0)
		b->data[w++] = '/';
	b->data[w] = '\0';
	b->len = w;
	return 0;
}

/* Percent-decodes the absolute path S and normalises it into *OUT (a new
 * string; OUT may be NULL: checked only). */
static int decode_path(const char *s, char **out, const char **why)
{
	struct dpt__buf b;
	int rc = 0;

	dpt__buf_init(&b, PATH_MAX_LEN);
	*why = "a file:// URI needs an absolute path (file:///path)";
	if (s[0] != '/')
		return DPT_EINVAL;
	for (; *s && !rc; s++) {
		char c = *s;
		if (c == '%') {
			int hi = dpt__hex_value((unsigned char)s[1]),
			    lo = hi < 0 ? -1
					: dpt__hex_value((unsigned char)s[2]);
			*why = bad_escape;
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
				rc = DPT_EINVAL;
				break;
			}
			c = (char)(hi * 16 + lo);
			s += 2;
		} else if (c == '?' || c == '#') {
			/* A query or fragment means this is not a path. */
			*why = "a path has no '?' or '#' (write them %3F and "
			       "%23)";
			rc = DPT_EINVAL;
			break;
		}
		rc = dpt__buf_append(&b, &c, 1);
	}
	if (rc == DPT_ETOOBIG)
		*why = too_long;
	if (!rc && (rc = normalise_path(&b)))
		*why = dots;
	if (rc || !out)
		goto out;
	*out = dpt__buf_steal(&b);
	if (!*out)
		rc = DPT_ENOMEM;
out:
	dpt__buf_release(&b);
	return rc == DPT_ETOOBIG ? DPT_EINVAL : rc;
}

static int parse_file(const char *rest, struct dpt__storage_uri *out,
		      const char **why)
{
	/* RFC 8089: an empty authority or "localhost". */
	if (strncmp(rest, "localhost/", 10) == 0)
		rest += 9;
	out->scheme = DPT__STORAGE_FILE;
	return decode_path(rest, &out->path, why);
}

static bool bucket_ok(const char *b, size_t n)
{
	if (n < 3 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && c != '.' && c != '-')
			return false;
		if ((i == 0 || i == n - 1) && !alnum)
			return false;
	}
	return true;
}

/* Why the prefix P (PLEN bytes, no final '/') is not one, or NULL. */
static const char *prefix_problem(const char *p, size_t plen,
				  struct dpt__buf *prefix)
{
	struct dpt__buf slashed;
	const char *why = NULL;

	/* A '.' or '..' component however spelt gets the reason of a file
	 * path's (the storage would refuse '%' anyway, as below). */
	dpt__buf_init(&slashed, DPT__STORAGE_KEY_MAX + 2);
	if (!dpt__buf_printf(&slashed, "/%.*s", (int)plen, p) &&
	    decode_path(slashed.data, NULL, &why) == 0)
		why = NULL;
	else if (why != dots)
		why = NULL;
	dpt__buf_release(&slashed);
	if (why)
		return why;
	if (dpt__buf_append(prefix, p, plen) ||
	    dpt__storage_key_check(prefix->data, false))
		return "an s3:// prefix is '/'-separated names of letters, "
		       "digits, '.', '_', '-' and '~', of 1024 bytes at most";
	return NULL;
}

static int parse_s3(const char *rest, struct dpt__storage_uri *out,
		    const char **why)
{
	const char *slash = strchr(rest, '/');
	size_t blen = slash ? (size_t)(slash - rest) : strlen(rest);
	struct dpt__buf prefix;
	int rc = DPT_EINVAL;

	if (!bucket_ok(rest, blen)) {
		*why = blen == 0 ? "an s3:// URI needs a bucket "
				   "(s3://bucket/prefix)"
				 : "an S3 bucket name is 3 to 63 lowercase "
				   "letters, digits, '.' and '-', beginning "
				   "and ending with a letter or digit";
		return DPT_EINVAL;
	}
	dpt__buf_init(&prefix, DPT__STORAGE_KEY_MAX);
	if (slash) {
		const char *p = slash + 1;
		size_t plen = strlen(p);
		while (plen && p[plen - 1] == '/')
			plen--;
		if (plen && (*why = prefix_problem(p, plen, &prefix)))
			goto out;
		if (plen && dpt__buf_puts(&prefix, "/")) {
			*why = too_long;
			goto out;
		}
	}
	out->scheme = DPT__STORAGE_S3;
	out->bucket = strndup(rest, blen);
	out->prefix = dpt__buf_steal(&prefix);
	rc = out->bucket && out->prefix ? 0 : DPT_ENOMEM;
out:
	dpt__buf_release(&prefix);
	return rc;
}

/* Why the text after "file://" cannot start a path, or NULL. */
static const char *file_form(const char *rest)
{
	return rest[0] == '/' ? NULL
			      : "a file:// URI needs an absolute path "
				"(file:///path)";
}

static const char *s3_form(const char *rest)
{
	return rest[0] && rest[0] != '/' ? NULL
					 : "an s3:// URI needs a bucket "
					   "(s3://bucket/prefix)";
}

/* The schemes: one row each, and one alternative of EXPECTED. */
static const struct scheme {
	const char *prefix;
	const char *(*form_problem)(const char *rest);
	int (*parse)(const char *rest, struct dpt__storage_uri *out,
		     const char **why);
} schemes[] = {
	{"file://", file_form, parse_file},
	{"s3://", s3_form, parse_s3},
};
static const char expected[] = "expected file:///path or s3://bucket/prefix";

static const struct scheme *scheme_of(const char *uri)
{
	for (size_t i = 0; i < sizeof(schemes) / sizeof(*schemes); i++)
		if (strncmp(uri, schemes[i].prefix,
			    strlen(schemes[i].prefix)) == 0)
			return &schemes[i];
	return NULL;
}

const char *dpt__storage_uri_form_problem(const char *uri)
{
	const struct scheme *s = uri ? scheme_of(uri) : NULL;

	return s ? s->form_problem(uri + strlen(s->prefix)) : expected;
}

int dpt__storage_uri_parse(const char *uri, struct dpt__storage_uri *out,
			   const char **why)
{
	const struct scheme *s = uri ? scheme_of(uri) : NULL;
	const char *reason = expected;
	int rc;

	memset(out, 0, sizeof(*out));
	if (s) {
		rc = s->parse(uri + strlen(s->prefix), out, &reason);
	} else if (uri && uri[0] == '/') {
		out->scheme = DPT__STORAGE_FILE;
		rc = decode_path(uri, &out->path, &reason);
	} else {
		rc = DPT_EINVAL;
	}
	if (rc)
		dpt__storage_uri_release(out);
	if (why)
		*why = rc == DPT_EINVAL ? reason : NULL;
	return rc;
}

void dpt__storage_uri_release(struct dpt__storage_uri *u)
{
	free(u->path);
	free(u->bucket);
	free(u->prefix);
	memset(u, 0, sizeof(*u));
}

int dpt__storage_uri_canonical(const struct dpt__storage_uri *u, char *out,
			       size_t size)
{
	int n;

	if (u->scheme == DPT__STORAGE_FILE) {
		n = snprintf(out, size, "file://%s",
			     strcmp(u->path, "/") == 0 ? "" : u->path);
	} else {
		size_t plen = strlen(u->prefix);
		n = snprintf(out, size, "s3://%s%s%.*s", u->bucket,
			     plen ? "/" : "", plen ? (int)plen - 1 : 0,
			     u->prefix);
	}
	return n < 0 || (size_t)n >= size ? DPT_ETOOBIG : 0;
}

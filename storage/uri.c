#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "buf.h"
#include "storage.h"
#include "parse.h"
#include "uri.h"

#define PATH_MAX_LEN 4096

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

/* Percent-decodes an absolute path and normalises it. */
static int decode_path(const char *s, char **out)
{
	struct dpt__buf b;
	int rc = 0;

	dpt__buf_init(&b, PATH_MAX_LEN);
	if (s[0] != '/')
		return DPT_EINVAL;
	for (; *s && !rc; s++) {
		char c = *s;
		if (c == '%') {
			int hi = dpt__hex_value((unsigned char)s[1]),
			    lo = hi < 0 ? -1
					: dpt__hex_value((unsigned char)s[2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
				rc = DPT_EINVAL;
				break;
			}
			c = (char)(hi * 16 + lo);
			s += 2;
		} else if (c == '?' || c == '#') {
			/* A query or fragment means this is not a path. */
			rc = DPT_EINVAL;
			break;
		}
		rc = dpt__buf_append(&b, &c, 1);
	}
	if (rc)
		goto out;
	rc = normalise_path(&b);
	if (rc)
		goto out;
	*out = dpt__buf_steal(&b);
	if (!*out)
		rc = DPT_ENOMEM;
out:
	dpt__buf_release(&b);
	return rc == DPT_ETOOBIG ? DPT_EINVAL : rc;
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

static int parse_s3(const char *rest, struct dpt__storage_uri *out)
{
	const char *slash = strchr(rest, '/');
	size_t blen = slash ? (size_t)(slash - rest) : strlen(rest);
	struct dpt__buf prefix;
	int rc;

	if (!bucket_ok(rest, blen))
		return DPT_EINVAL;
	dpt__buf_init(&prefix, DPT__STORAGE_KEY_MAX);
	if (slash) {
		const char *p = slash + 1;
		size_t plen = strlen(p);
		while (plen && p[plen - 1] == '/')
			plen--;
		if (plen) {
			rc = dpt__buf_append(&prefix, p, plen);
			if (!rc)
				rc = dpt__storage_key_check(prefix.data, false);
			if (!rc)
				rc = dpt__buf_puts(&prefix, "/");
			if (rc)
				goto out;
		}
	}
	out->scheme = DPT__STORAGE_S3;
	out->bucket = strndup(rest, blen);
	out->prefix = dpt__buf_steal(&prefix);
	rc = out->bucket && out->prefix ? 0 : DPT_ENOMEM;
out:
	dpt__buf_release(&prefix);
	return rc == DPT_ETOOBIG ? DPT_EINVAL : rc;
}

int dpt__storage_uri_parse(const char *uri, struct dpt__storage_uri *out)
{
	int rc;

	memset(out, 0, sizeof(*out));
	if (!uri)
		return DPT_EINVAL;
	if (strncmp(uri, "s3://", 5) == 0) {
		rc = parse_s3(uri + 5, out);
	} else if (strncmp(uri, "file://", 7) == 0) {
		const char *p = uri + 7;
		/* RFC 8089: an empty authority or "localhost". */
		if (strncmp(p, "localhost/", 10) == 0)
			p += 9;
		out->scheme = DPT__STORAGE_FILE;
		rc = decode_path(p, &out->path);
	} else if (uri[0] == '/') {
		out->scheme = DPT__STORAGE_FILE;
		rc = decode_path(uri, &out->path);
	} else {
		rc = DPT_EINVAL;
	}
	if (rc)
		dpt__storage_uri_release(out);
	return rc;
}

void dpt__storage_uri_release(struct dpt__storage_uri *u)
{
	free(u->path);
	free(u->bucket);
	free(u->prefix);
	memset(u, 0, sizeof(*u));
}

int dpt__storage_endpoint_parse(const char *endpoint, bool *https, char **host)
{
	const char *h, *end;
	size_t n;

	if (!endpoint)
		return DPT_EINVAL;
	if (strncmp(endpoint, "http://", 7) == 0) {
		*https = false;
		h = endpoint + 7;
	} else if (strncmp(endpoint, "https://", 8) == 0) {
		*https = true;
		h = endpoint + 8;
	} else {
		return DPT_EINVAL;
	}
	end = h + strcspn(h, "/");
	if (*end == '/' && end[1] != '\0')
		return DPT_EINVAL; /* a path after the host */
	n = (size_t)(end - h);
	if (n == 0 || n > 255)
		return DPT_EINVAL;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		      c == ':' || c == '[' || c == ']'))
			return DPT_EINVAL;
	}
	*host = strndup(h, n);
	return *host ? 0 : DPT_ENOMEM;
}

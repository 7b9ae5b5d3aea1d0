/*
 * libFuzzer target for the storage's name parsers (common/uri.c: root
 * URIs and keys, the grammar the plugin shares; storage/s3_config.c: S3
 * endpoints). Every input is
 * tried (up to its first NUL) by each of them. What is accepted must have
 * the form uri.h and storage.h promise:
 * - a file root is an absolute path without empty, "." or ".." components
 *   and without a trailing '/' (except "/"), and reads back unchanged;
 * - an s3 root has a bucket of 3 to 63 of [a-z0-9.-] and a prefix that is
 *   "" or a valid key and a '/', and reads back unchanged;
 * - an endpoint's host is the non-empty text between the scheme and the
 *   end or a final '/', of host-name characters only;
 * - a valid key has no empty, "." or ".." component, is at most
 *   DPT__STORAGE_KEY_MAX bytes, and is also a valid prefix.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "buf.h"
#include "storage.h"
#include "uri.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool key_chars(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		      c == '-' || c == '~' || c == '/'))
			return false;
	}
	return true;
}

/* No empty, "." or ".." component in the N bytes of P (split on '/'). */
static bool components_ok(const char *p, size_t n)
{
	size_t start = 0;

	for (size_t i = 0; i <= n; i++) {
		size_t len;
		if (i < n && p[i] != '/')
			continue;
		len = i - start;
		if (len == 0 || (len == 1 && p[start] == '.') ||
		    (len == 2 && p[start] == '.' && p[start + 1] == '.'))
			return false;
		start = i + 1;
	}
	return true;
}

static void check_file(const struct dpt__storage_uri *u)
{
	struct dpt__storage_uri again;
	size_t n = strlen(u->path);

	if (u->bucket || u->prefix || u->path[0] != '/')
		abort();
	if (n > 1 && !components_ok(u->path + 1, n - 1))
		abort();
	/* The normalised path, given as a plain path, is the same root (it
	 * is decoded once more, so only when it holds no '%'). */
	if (strpbrk(u->path, "%?#"))
		return;
	if (dpt__storage_uri_parse(u->path, &again, NULL) ||
	    again.scheme != DPT__STORAGE_FILE || strcmp(again.path, u->path))
		abort();
	dpt__storage_uri_release(&again);
}

static void check_s3(const struct dpt__storage_uri *u)
{
	struct dpt__storage_uri again;
	struct dpt__buf b;
	size_t bl = strlen(u->bucket), pl = strlen(u->prefix);

	if (u->path || bl < 3 || bl > 63 ||
	    strspn(u->bucket, "abcdefghijklmnopqrstuvwxyz0123456789.-") != bl)
		abort();
	if (pl && (u->prefix[pl - 1] != '/' || !key_chars(u->prefix, pl) ||
		   !components_ok(u->prefix, pl - 1)))
		abort();
	dpt__buf_init(&b, 4096);
	if (dpt__buf_printf(&b, "s3://%s/%s", u->bucket, u->prefix))
		abort();
	if (dpt__storage_uri_parse(b.data, &again, NULL) ||
	    again.scheme != DPT__STORAGE_S3 ||
	    strcmp(again.bucket, u->bucket) || strcmp(again.prefix, u->prefix))
		abort();
	dpt__storage_uri_release(&again);
	dpt__buf_release(&b);
}

static void endpoint(const char *s)
{
	bool https;
	char *host = NULL;
	const char *h;
	size_t n;

	if (dpt__storage_endpoint_parse(s, &https, &host))
		return;
	h = s + (https ? 8 : 7);
	n = strlen(host);
	if (strncmp(s, https ? "https://" : "http://", https ? 8 : 7) ||
	    n == 0 || n > 255 || strncmp(h, host, n) ||
	    !(h[n] == '\0' || (h[n] == '/' && h[n + 1] == '\0')) ||
	    strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789.-:[]") != n)
		abort();
	free(host);
}

static void key(const char *s)
{
	size_t n = strlen(s);
	bool as_key = dpt__storage_key_check(s, false) == 0;
	bool as_prefix = dpt__storage_key_check(s, true) == 0;

	if (as_key && !as_prefix)
		abort();
	if (as_key && (n == 0 || n > DPT__STORAGE_KEY_MAX || !key_chars(s, n) ||
		       !components_ok(s, n) || strstr(s, ".dpt-tmp.")))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dpt__storage_uri u;
	char *s = malloc(size + 1);

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	if (dpt__storage_uri_parse(s, &u, NULL) == 0) {
		if (u.scheme == DPT__STORAGE_FILE)
			check_file(&u);
		else if (u.scheme == DPT__STORAGE_S3)
			check_s3(&u);
		else
			abort();
		dpt__storage_uri_release(&u);
	} else if (u.path || u.bucket || u.prefix) {
		abort(); /* released on failure */
	}
	endpoint(s);
	key(s);
	free(s);
	return 0;
}

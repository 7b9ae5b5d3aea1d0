/*
 * The grammar of checkpoint storage: root URIs and keys, written once for
 * the storage layer (storage/storage.c opens what this parses) and for the
 * SPANK plugin (spank/settings.c checks --dp-ckpt, ckpt_root and
 * allowed_roots with it before a job starts, and compares the roots in
 * the form the storage will open). Nothing here touches storage: the
 * plugin links it without the backends.
 *
 * Every refusal comes with a reason: a static sentence that says what to
 * write instead, for the plugin's messages and the storage's.
 */
#ifndef DPT_COMMON_URI_H
#define DPT_COMMON_URI_H

#include <stdbool.h>
#include <stddef.h>

/* The longest key (storage/storage.h, "keys"). */
#define DPT__STORAGE_KEY_MAX 1024

/* One per row of the scheme table in uri.c; storage/storage.c's backend
 * table has a row for each. */
enum dpt__storage_scheme {
	DPT__STORAGE_FILE,
	DPT__STORAGE_S3,
};

struct dpt__storage_uri {
	enum dpt__storage_scheme scheme;
	/* file: the absolute directory, percent-decoded, without a trailing
	 * '/' (except "/" itself). */
	char *path;
	/* s3: the bucket, and the key prefix of the root: "" or a valid key
	 * followed by '/' ("runs/a/"). */
	char *bucket;
	char *prefix;
};

/*
 * dpt__storage_uri_form_problem - why URI, as a user or an admin writes it
 * before %u and %j are substituted, is not a checkpoint URI, or NULL. Only
 * its form is checked: a scheme of the table, then a start that can be
 * valid (file:// an absolute path, s3:// a bucket). What the substitution
 * yields is checked with dpt__storage_uri_parse().
 */
const char *dpt__storage_uri_form_problem(const char *uri);

/*
 * dpt__storage_uri_parse - parse a root URI into *OUT, which the caller
 * releases with dpt__storage_uri_release().
 * Accepted: "file:///abs/path", "file://localhost/abs/path", a plain
 * absolute path "/abs/path" (what admins write in configuration files,
 * and what the `dptrain` tool is given), and "s3://bucket" or
 * "s3://bucket/prefix" (a trailing '/' is optional). A file:// path is
 * percent-decoded once, then normalised.
 * Returns DPT_EINVAL for anything else, with *WHY (when WHY is not NULL)
 * the reason: other schemes, relative paths, a bad escape or "%00", "."
 * or ".." components (also percent-encoded, so that a root cannot climb
 * out of the directory it names), invalid bucket names (S3 rules: 3 to 63
 * of [a-z0-9.-], starting and ending with a letter or digit), or a prefix
 * that is not a valid key; DPT_ENOMEM. Nothing is logged. On failure *OUT
 * holds nothing to release.
 */
int dpt__storage_uri_parse(const char *uri, struct dpt__storage_uri *out,
			   const char **why);
void dpt__storage_uri_release(struct dpt__storage_uri *u);

/*
 * dpt__storage_uri_canonical - U in one spelling, into OUT (SIZE bytes):
 * "file://" then the path ("file://" alone for "/"), or "s3://BUCKET"
 * then '/' and the prefix without its final '/'. Two roots are the same
 * directory when their canonical forms are equal, and one lies under the
 * other when the other's form is a prefix of it that ends where a '/'
 * follows. Returns 0, or DPT_ETOOBIG when it does not fit.
 */
int dpt__storage_uri_canonical(const struct dpt__storage_uri *u, char *out,
			       size_t size);

/*
 * dpt__storage_key_check - 0, or DPT_EINVAL (not logged) unless KEY is a
 * valid key: '/'-separated components of [A-Za-z0-9._~-], no empty, "."
 * or ".." component, no leading '/', no ".dpt-tmp." (the posix backend's
 * temporary files), at most DPT__STORAGE_KEY_MAX bytes. EMPTY_OK accepts
 * "" and a final '/' (a prefix).
 */
int dpt__storage_key_check(const char *key, bool empty_ok);

#endif

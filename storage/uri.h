/*
 * Parsing of storage root URIs and of S3 endpoints.
 */
#ifndef DPT_STORAGE_URI_H
#define DPT_STORAGE_URI_H

#include <stdbool.h>

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
 * dpt__storage_uri_parse - parse a root URI into *OUT, which the caller
 * releases with dpt__storage_uri_release().
 * Accepted: "file:///abs/path", "file://localhost/abs/path", a plain
 * absolute path "/abs/path" (what admins write in configuration files),
 * and "s3://bucket" or "s3://bucket/prefix" (a trailing '/' is optional).
 * Returns DPT_EINVAL, without logging, for anything else: other schemes,
 * relative paths, "%00", invalid bucket names (S3 rules: 3 to 63 of
 * [a-z0-9.-], starting and ending with a letter or digit), or a prefix that
 * is not a valid key; DPT_ENOMEM.
 */
int dpt__storage_uri_parse(const char *uri, struct dpt__storage_uri *out);
void dpt__storage_uri_release(struct dpt__storage_uri *u);

/*
 * dpt__storage_endpoint_parse - split an S3 endpoint "http(s)://host[:port]"
 * (an optional trailing '/', no path) into *HTTPS and *HOST ("host:port"
 * as written, the value of the Host header), a new string the caller
 * frees. Returns DPT_EINVAL, without logging, for anything else.
 */
int dpt__storage_endpoint_parse(const char *endpoint, bool *https, char **host);

#endif

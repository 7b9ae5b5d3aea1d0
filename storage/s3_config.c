#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "buf.h"
#include "log.h"
#include "parse.h"
#include "s3.h"

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
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

int dpt__aws_credentials_read(const char *path, const char *profile, char **ak,
			      char **sk, char **token)
{
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	bool in_profile = false;
	int lineno = 0, rc = 0;

	*ak = *sk = *token = NULL;
	f = fopen(path, "re");
	if (!f)
		return DPT_ENOENT;
	while (getline(&line, &cap, f) >= 0) {
		char *p = line, *key, *value, *end;
		lineno++;
		p[strcspn(p, "\r\n")] = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0' || *p == '#' || *p == ';')
			continue;
		if (*p == '[') {
			end = strchr(p, ']');
			if (!end) {
				rc = DPT_ECONFIG;
				break;
			}
			*end = '\0';
			p++;
			while (*p == ' ')
				p++;
			for (char *q = end - 1; q >= p && *q == ' '; q--)
				*q = '\0';
			in_profile = strcmp(p, profile) == 0;
			continue;
		}
		if (dpt__split_kv(p, &key, &value)) {
			rc = DPT_ECONFIG;
			break;
		}
		if (!in_profile)
			continue;
		char **dst = strcmp(key, "aws_access_key_id") == 0	 ? ak
			     : strcmp(key, "aws_secret_access_key") == 0 ? sk
			     : strcmp(key, "aws_session_token") == 0	 ? token
									 : NULL;
		if (!dst)
			continue;
		free(*dst);
		*dst = strdup(value);
		if (!*dst) {
			rc = DPT_ENOMEM;
			break;
		}
	}
	if (rc == DPT_ECONFIG)
		dpt__error("cannot parse '%s' line %d: expected [profile] or "
			   "key = value",
			   path, lineno);
	if (!rc && (!*ak || !*sk))
		rc = DPT_ENOENT;
	if (rc) {
		free(*ak);
		free(*sk);
		free(*token);
		*ak = *sk = *token = NULL;
	}
	free(line);
	fclose(f);
	return rc;
}

static int credentials(const struct dpt__storage_opts *opts,
		       struct dpt__s3_config *cfg)
{
	const char *profile, *file, *home;
	struct dpt__buf path;
	int rc;

	if (opts->access_key && opts->secret_key) {
		cfg->access_key = strdup(opts->access_key);
		cfg->secret_key = strdup(opts->secret_key);
		cfg->session_token = dup_or_null(opts->session_token);
		cfg->cred_source = strdup("the storage options");
		goto check;
	}
	if (env("AWS_ACCESS_KEY_ID") && env("AWS_SECRET_ACCESS_KEY")) {
		cfg->access_key = strdup(env("AWS_ACCESS_KEY_ID"));
		cfg->secret_key = strdup(env("AWS_SECRET_ACCESS_KEY"));
		cfg->session_token = dup_or_null(env("AWS_SESSION_TOKEN"));
		cfg->cred_source = strdup("AWS_ACCESS_KEY_ID and "
					  "AWS_SECRET_ACCESS_KEY");
		goto check;
	}
	profile = env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
	file = env("AWS_SHARED_CREDENTIALS_FILE");
	home = env("HOME");
	dpt__buf_init(&path, 4096);
	if (file)
		rc = dpt__buf_puts(&path, file);
	else if (home)
		rc = dpt__buf_printf(&path, "%s/.aws/credentials", home);
	else
		rc = DPT_ENOENT;
	if (!rc)
		rc = dpt__aws_credentials_read(
			path.data, profile, &cfg->access_key, &cfg->secret_key,
			&cfg->session_token);
	if (!rc) {
		struct dpt__buf src;
		dpt__buf_init(&src, 8192);
		rc = dpt__buf_printf(&src, "profile '%s' of %s", profile,
				     path.data);
		cfg->cred_source = dpt__buf_steal(&src);
		dpt__buf_release(&src);
	}
	dpt__buf_release(&path);
	if (rc == DPT_ENOENT) {
		dpt__error("no S3 credentials: set AWS_ACCESS_KEY_ID and "
			   "AWS_SECRET_ACCESS_KEY, or give the profile '%s' "
			   "aws_access_key_id and aws_secret_access_key in %s",
			   profile, file ? file : "~/.aws/credentials");
		return DPT_EAUTH;
	}
	if (rc)
		return rc;
check:
	if (!cfg->access_key || !cfg->secret_key || !cfg->cred_source)
		return DPT_ENOMEM;
	return 0;
}

int dpt__s3_config_resolve(const struct dpt__storage_opts *opts,
			   const char *bucket, struct dpt__s3_config *cfg)
{
	const char *endpoint, *region, *style;
	struct dpt__buf aws;
	bool custom = true;
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	dpt__buf_init(&aws, 512);
	region = opts->region		     ? opts->region
		 : env("AWS_REGION")	     ? env("AWS_REGION")
		 : env("AWS_DEFAULT_REGION") ? env("AWS_DEFAULT_REGION")
					     : "us-east-1";
	cfg->region = strdup(region);
	if (!cfg->region) {
		rc = DPT_ENOMEM;
		goto out;
	}
	endpoint = opts->endpoint		? opts->endpoint
		   : env("DPTRAIN_S3_ENDPOINT") ? env("DPTRAIN_S3_ENDPOINT")
		   : env("AWS_ENDPOINT_URL_S3") ? env("AWS_ENDPOINT_URL_S3")
						: env("AWS_ENDPOINT_URL");
	if (!endpoint) {
		custom = false;
		rc = dpt__buf_printf(&aws, "https://s3.%s.amazonaws.com",
				     region);
		if (rc)
			goto out;
		endpoint = aws.data;
	}
	rc = dpt__storage_endpoint_parse(endpoint, &cfg->https, &cfg->host);
	if (rc == DPT_EINVAL)
		dpt__error("invalid S3 endpoint '%s': expected "
			   "http(s)://host[:port]",
			   endpoint);
	if (rc)
		goto out;
	/* Path-style for S3-compatible servers (moto, MinIO, Ceph RGW:
	 * their host names rarely resolve per bucket), and on AWS for
	 * buckets with dots, which TLS wildcard certificates do not cover. */
	style = env("DPTRAIN_S3_PATH_STYLE");
	if (opts->path_style >= 0) {
		cfg->path_style = opts->path_style;
	} else if (style &&
		   (strcmp(style, "0") == 0 || strcmp(style, "1") == 0)) {
		cfg->path_style = style[0] == '1';
	} else if (style) {
		dpt__error("invalid DPTRAIN_S3_PATH_STYLE '%s': expected 1 "
			   "(endpoint/bucket/key) or 0 (bucket.endpoint/key)",
			   style);
		rc = DPT_EINVAL;
		goto out;
	} else {
		cfg->path_style = custom || strchr(bucket, '.') != NULL;
	}
	rc = credentials(opts, cfg);
out:
	dpt__buf_release(&aws);
	return rc;
}

void dpt__s3_config_release(struct dpt__s3_config *cfg)
{
	free(cfg->host);
	free(cfg->region);
	free(cfg->access_key);
	if (cfg->secret_key) {
		explicit_bzero(cfg->secret_key, strlen(cfg->secret_key));
		free(cfg->secret_key);
	}
	free(cfg->session_token);
	free(cfg->cred_source);
	memset(cfg, 0, sizeof(*cfg));
}

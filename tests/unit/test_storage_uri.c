/*
 * Root URIs (common/uri.c: the grammar and its reasons, shared with the
 * plugin), keys, S3 endpoints, and where the S3 configuration comes
 * from (options, environment, shared credentials file).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "log.h"
#include "storage/s3.h"
#include "storage/storage.h"
#include "uri.h"

static void file_uris(void **state)
{
	struct dpt__storage_uri u;
	(void)state;

	assert_int_equal(
		dpt__storage_uri_parse("file:///lustre/ckpt/", &u, NULL), 0);
	assert_int_equal(u.scheme, DPT__STORAGE_FILE);
	assert_string_equal(u.path, "/lustre/ckpt");
	dpt__storage_uri_release(&u);
	assert_int_equal(
		dpt__storage_uri_parse("file://localhost/a%20b", &u, NULL), 0);
	assert_string_equal(u.path, "/a b");
	dpt__storage_uri_release(&u);
	/* What admins write in dptrain.conf: a plain absolute path. */
	assert_int_equal(dpt__storage_uri_parse("/scratch/u1", &u, NULL), 0);
	assert_string_equal(u.path, "/scratch/u1");
	dpt__storage_uri_release(&u);
	assert_int_equal(dpt__storage_uri_parse("file:///", &u, NULL), 0);
	assert_string_equal(u.path, "/");
	dpt__storage_uri_release(&u);
	/* Empty components go; a name that merely starts with dots stays. */
	assert_int_equal(
		dpt__storage_uri_parse("file:///ckpt//alice///..x/", &u, NULL),
		0);
	assert_string_equal(u.path, "/ckpt/alice/..x");
	dpt__storage_uri_release(&u);
	assert_int_equal(dpt__storage_uri_parse("file:////", &u, NULL), 0);
	assert_string_equal(u.path, "/");
	dpt__storage_uri_release(&u);

	/* "." and ".." components are refused after decoding: a root must
	 * not climb out of the directory it names (issue 14, defect 2). */
	const char *bad[] = {
		"file://host/x",
		"file://relative",
		"file:///a%00b",
		"file:///a%zz",
		"file:///a?q",
		"relative/path",
		"http://x/y",
		"",
		"file:///ckpt/alice/../bob",
		"file:///ckpt/alice/..",
		"file:///ckpt/./alice",
		"/ckpt/alice/..",
		"file:///ckpt/alice/%2e%2e",
		"file:///ckpt/alice/%2E%2e/bob",
		"file:///ckpt/alice/.%2e/bob",
		"file:///ckpt/alice%2f..%2fbob",
		"file:///..",
		"file:///ckpt/alice//./x",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(dpt__storage_uri_parse(bad[i], &u, NULL),
				 DPT_EINVAL);
		assert_null(u.path);
	}
	assert_int_equal(dpt__storage_uri_parse(NULL, &u, NULL), DPT_EINVAL);
}

static void s3_uris(void **state)
{
	struct dpt__storage_uri u;
	(void)state;

	assert_int_equal(dpt__storage_uri_parse("s3://ckpt", &u, NULL), 0);
	assert_int_equal(u.scheme, DPT__STORAGE_S3);
	assert_string_equal(u.bucket, "ckpt");
	assert_string_equal(u.prefix, "");
	dpt__storage_uri_release(&u);
	assert_int_equal(
		dpt__storage_uri_parse("s3://my.bucket-1/runs/a/", &u, NULL),
		0);
	assert_string_equal(u.bucket, "my.bucket-1");
	assert_string_equal(u.prefix, "runs/a/");
	dpt__storage_uri_release(&u);
	assert_int_equal(dpt__storage_uri_parse("s3://ckpt/", &u, NULL), 0);
	assert_string_equal(u.prefix, "");
	dpt__storage_uri_release(&u);

	const char *bad[] = {
		"s3://",	 "s3://ab",	     "s3://Upper",
		"s3://-ckpt",	 "s3://ckpt-",	     "s3://ck_pt",
		"s3://ckpt//x",	 "s3://ckpt/a/../b", "s3://ckpt/a b",
		"s3://ckpt/x/.", "S3://ckpt",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = dpt__storage_uri_parse(bad[i], &u, NULL);
		if (rc != DPT_EINVAL)
			fail_msg("'%s' was accepted", bad[i]);
	}
}

/* The grammar's reasons, which the plugin shows for a bad --dp-ckpt
 * (common/uri.h): each refusal says what to write instead. */
static void reasons(void **state)
{
	static const struct {
		const char *uri, *why;
	} cases[] = {
		{"ckpt/dir", "expected file:///path or s3://bucket/prefix"},
		{"gs://b/x", "expected file:///path or s3://bucket/prefix"},
		{"file://relative", "needs an absolute path (file:///path)"},
		{"file:///a/%zz", "'%' must be followed by two hex digits"},
		{"file:///a/%00", "(and %00 is not allowed)"},
		{"file:///a?b", "no '?' or '#'"},
		{"file:///a/%2e%2E/b", "a '.' or '..' component (also written"},
		{"s3://", "an s3:// URI needs a bucket"},
		{"s3:///x", "an s3:// URI needs a bucket"},
		{"s3://Upper", "3 to 63 lowercase letters"},
		{"s3://ckpt/a/../b", "a '.' or '..' component"},
		{"s3://ckpt/a/%2e%2e/b", "a '.' or '..' component"},
		{"s3://ckpt/a%20b", "an s3:// prefix is '/'-separated names"},
	};
	struct dpt__storage_uri u;
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *why = NULL;

		if (dpt__storage_uri_parse(cases[i].uri, &u, &why) !=
		    DPT_EINVAL)
			fail_msg("'%s' was accepted", cases[i].uri);
		assert_non_null(why);
		if (!strstr(why, cases[i].why))
			fail_msg("'%s': '%s', not '%s'", cases[i].uri, why,
				 cases[i].why);
	}
	assert_int_equal(dpt__storage_uri_parse("s3://ckpt/a", &u, NULL), 0);
	dpt__storage_uri_release(&u);
}

/* What the plugin checks before %u and %j are substituted: the form. */
static void forms(void **state)
{
	(void)state;
	assert_null(dpt__storage_uri_form_problem("file:///ckpt/%u"));
	assert_null(dpt__storage_uri_form_problem("s3://ckpt-%u/runs"));
	assert_non_null(strstr(dpt__storage_uri_form_problem("/scratch/x"),
			       "expected file:///path or s3://"));
	assert_non_null(strstr(dpt__storage_uri_form_problem("file://x"),
			       "absolute path"));
	assert_non_null(strstr(dpt__storage_uri_form_problem("s3:///x"),
			       "needs a bucket"));
	assert_non_null(dpt__storage_uri_form_problem(NULL));
}

/* One spelling per root, which the plugin compares with the site's. */
static void canonical(void **state)
{
	static const struct {
		const char *uri, *canon;
	} cases[] = {
		{"file:///ckpt//al%69ce/r1/", "file:///ckpt/alice/r1"},
		{"file://localhost/ckpt", "file:///ckpt"},
		{"/ckpt/x", "file:///ckpt/x"},
		{"file:///", "file://"},
		{"s3://ckpt", "s3://ckpt"},
		{"s3://ckpt/", "s3://ckpt"},
		{"s3://ckpt/runs/a/", "s3://ckpt/runs/a"},
	};
	struct dpt__storage_uri u;
	char out[64];
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(dpt__storage_uri_parse(cases[i].uri, &u, NULL),
				 0);
		assert_int_equal(
			dpt__storage_uri_canonical(&u, out, sizeof(out)), 0);
		assert_string_equal(out, cases[i].canon);
		dpt__storage_uri_release(&u);
	}
	assert_int_equal(dpt__storage_uri_parse("s3://ckpt/runs/a", &u, NULL),
			 0);
	assert_int_equal(dpt__storage_uri_canonical(&u, out, 16), DPT_ETOOBIG);
	dpt__storage_uri_release(&u);
}

static void keys(void **state)
{
	(void)state;
	assert_int_equal(dpt__storage_key_check(
				 "step-00000100/shard-0.safetensors", false),
			 0);
	assert_int_equal(dpt__storage_key_check("a/b/c~d_e.f", false), 0);
	assert_int_equal(dpt__storage_key_check(".hidden", false), 0);
	assert_int_equal(dpt__storage_key_check("", true), 0);
	assert_int_equal(dpt__storage_key_check("step-1/", true), 0);

	const char *bad[] = {
		"",
		"/abs",
		"a//b",
		"a/",
		"./a",
		"a/..",
		"..",
		"a b",
		"a\\b",
		"a?b",
		"a%20b",
		"\xc3\xa9",
		"x/.y.dpt-tmp.0",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (dpt__storage_key_check(bad[i], false) != DPT_EINVAL)
			fail_msg("key '%s' was accepted", bad[i]);
	char longkey[DPT__STORAGE_KEY_MAX + 2];
	memset(longkey, 'a', sizeof(longkey) - 1);
	longkey[sizeof(longkey) - 1] = '\0';
	assert_int_equal(dpt__storage_key_check(longkey, false), DPT_EINVAL);
	longkey[DPT__STORAGE_KEY_MAX] = '\0';
	assert_int_equal(dpt__storage_key_check(longkey, false), 0);
}

static void endpoints(void **state)
{
	bool https;
	char *host;
	(void)state;

	assert_int_equal(dpt__storage_endpoint_parse("http://127.0.0.1:5055",
						     &https, &host),
			 0);
	assert_false(https);
	assert_string_equal(host, "127.0.0.1:5055");
	free(host);
	assert_int_equal(dpt__storage_endpoint_parse("https://s3.eu-west-1."
						     "amazonaws.com/",
						     &https, &host),
			 0);
	assert_true(https);
	assert_string_equal(host, "s3.eu-west-1.amazonaws.com");
	free(host);
	assert_int_equal(dpt__storage_endpoint_parse("ftp://x", &https, &host),
			 DPT_EINVAL);
	assert_int_equal(
		dpt__storage_endpoint_parse("http://x/path", &https, &host),
		DPT_EINVAL);
	assert_int_equal(dpt__storage_endpoint_parse("http://", &https, &host),
			 DPT_EINVAL);
	assert_int_equal(
		dpt__storage_endpoint_parse("http://a b", &https, &host),
		DPT_EINVAL);
}

static char tmpdir[] = "/tmp/dpt-test-uri-XXXXXX";

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void credentials_file(void **state)
{
	char path[256], *ak, *sk, *tok;
	(void)state;

	snprintf(path, sizeof(path), "%s/credentials", tmpdir);
	write_file(path, "# comment\n"
			 "[default]\n"
			 "aws_access_key_id = AKDEFAULT\n"
			 "aws_secret_access_key=SKDEFAULT\n"
			 "\n"
			 "[ ci ]\n"
			 "; another comment\n"
			 "aws_access_key_id=AKCI\n"
			 "aws_secret_access_key = SK/CI+x=\n"
			 "aws_session_token = TOKEN\n"
			 "region = eu-west-1\n"
			 "[half]\n"
			 "aws_access_key_id=AKHALF\n");
	assert_int_equal(
		dpt__aws_credentials_read(path, "default", &ak, &sk, &tok), 0);
	assert_string_equal(ak, "AKDEFAULT");
	assert_string_equal(sk, "SKDEFAULT");
	assert_null(tok);
	free(ak);
	free(sk);
	assert_int_equal(dpt__aws_credentials_read(path, "ci", &ak, &sk, &tok),
			 0);
	assert_string_equal(ak, "AKCI");
	assert_string_equal(sk, "SK/CI+x=");
	assert_string_equal(tok, "TOKEN");
	free(ak);
	free(sk);
	free(tok);
	assert_int_equal(
		dpt__aws_credentials_read(path, "half", &ak, &sk, &tok),
		DPT_ENOENT);
	assert_int_equal(
		dpt__aws_credentials_read(path, "none", &ak, &sk, &tok),
		DPT_ENOENT);
	assert_int_equal(dpt__aws_credentials_read("/nonexistent/x", "default",
						   &ak, &sk, &tok),
			 DPT_ENOENT);
	write_file(path, "[default]\nnot ini\n");
	assert_int_equal(
		dpt__aws_credentials_read(path, "default", &ak, &sk, &tok),
		DPT_ECONFIG);
	unlink(path);
}

static void clear_env(void)
{
	const char *vars[] = {
		"DPTRAIN_S3_ENDPOINT",	 "AWS_ENDPOINT_URL_S3",
		"AWS_ENDPOINT_URL",	 "AWS_REGION",
		"AWS_DEFAULT_REGION",	 "AWS_ACCESS_KEY_ID",
		"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"AWS_PROFILE",		 "AWS_SHARED_CREDENTIALS_FILE",
		"DPTRAIN_S3_PATH_STYLE",
	};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static void config_sources(void **state)
{
	struct dpt__storage_opts o;
	struct dpt__s3_config c;
	char path[256];
	(void)state;

	clear_env();
	setenv("HOME", tmpdir, 1); /* no ~/.aws/credentials there */
	dpt__storage_opts_init(&o);
	/* No credentials anywhere. */
	assert_int_equal(dpt__s3_config_resolve(&o, "ckpt", &c), DPT_EAUTH);
	dpt__s3_config_release(&c);

	/* The environment: endpoint means path-style. */
	setenv("AWS_ENDPOINT_URL", "http://10.0.0.1:9000", 1);
	setenv("DPTRAIN_S3_ENDPOINT", "http://127.0.0.1:5055", 1);
	setenv("AWS_DEFAULT_REGION", "eu-north-1", 1);
	setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SKENV", 1);
	setenv("AWS_SESSION_TOKEN", "TOKENV", 1);
	assert_int_equal(dpt__s3_config_resolve(&o, "ckpt", &c), 0);
	assert_string_equal(c.host, "127.0.0.1:5055");
	assert_false(c.https);
	assert_true(c.path_style);
	assert_string_equal(c.region, "eu-north-1");
	assert_string_equal(c.access_key, "AKENV");
	assert_string_equal(c.secret_key, "SKENV");
	assert_string_equal(c.session_token, "TOKENV");
	assert_string_equal(c.cred_source,
			    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
	dpt__s3_config_release(&c);

	/* Options win over the environment. */
	o.endpoint = "https://minio.example:9000";
	o.region = "us-west-2";
	o.path_style = 0;
	o.access_key = "AKOPT";
	o.secret_key = "SKOPT";
	assert_int_equal(dpt__s3_config_resolve(&o, "ckpt", &c), 0);
	assert_true(c.https);
	assert_string_equal(c.host, "minio.example:9000");
	assert_false(c.path_style);
	assert_string_equal(c.region, "us-west-2");
	assert_string_equal(c.access_key, "AKOPT");
	assert_null(c.session_token);
	dpt__s3_config_release(&c);

	/* AWS itself: virtual-hosted unless the bucket has dots; the
	 * profile of the shared credentials file. */
	clear_env();
	dpt__storage_opts_init(&o);
	setenv("AWS_REGION", "ap-south-1", 1);
	snprintf(path, sizeof(path), "%s/creds", tmpdir);
	write_file(path, "[p1]\naws_access_key_id=AKP1\n"
			 "aws_secret_access_key=SKP1\n");
	setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
	setenv("AWS_PROFILE", "p1", 1);
	assert_int_equal(dpt__s3_config_resolve(&o, "ckpt", &c), 0);
	assert_string_equal(c.host, "s3.ap-south-1.amazonaws.com");
	assert_true(c.https);
	assert_false(c.path_style);
	assert_string_equal(c.access_key, "AKP1");
	assert_non_null(strstr(c.cred_source, "profile 'p1' of "));
	assert_string_equal(strstr(c.cred_source, " of ") + 4, path);
	dpt__s3_config_release(&c);
	assert_int_equal(dpt__s3_config_resolve(&o, "my.ckpt", &c), 0);
	assert_true(c.path_style);
	dpt__s3_config_release(&c);
	/* DPTRAIN_S3_PATH_STYLE forces the style; the option still wins. */
	setenv("DPTRAIN_S3_PATH_STYLE", "1", 1);
	assert_int_equal(dpt__s3_config_resolve(&o, "ckpt", &c), 0);
	assert_true(c.path_style);
	dpt__s3_config_release(&c);
	o.path_style = 0;
	assert_int_equal(dpt__s3_config_resolve(&o, "ckpt", &c), 0);
	assert_false(c.path_style);
	dpt__s3_config_release(&c);
	o.path_style = -1;
	setenv("DPTRAIN_S3_PATH_STYLE", "yes", 1);
	assert_int_equal(dpt__s3_config_resolve(&o, "ckpt", &c), DPT_EINVAL);
	dpt__s3_config_release(&c);
	unsetenv("DPTRAIN_S3_PATH_STYLE");
	unlink(path);

	o.endpoint = "s3.amazonaws.com";
	assert_int_equal(dpt__s3_config_resolve(&o, "ckpt", &c), DPT_EINVAL);
	dpt__s3_config_release(&c);
	clear_env();
}

static void open_checks_options(void **state)
{
	struct dpt__storage_opts o;
	struct dpt__storage *s = NULL;
	(void)state;

	clear_env();
	setenv("AWS_ACCESS_KEY_ID", "AK", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SK", 1);
	dpt__storage_opts_init(&o);
	o.part_size = 1024 * 1024; /* below S3's 5 MiB minimum */
	assert_int_equal(dpt__storage_open("s3://ckpt/x", &o, &s), DPT_EINVAL);
	assert_null(s);
	o.part_size = 0;
	o.max_inflight = 1000;
	assert_int_equal(dpt__storage_open("s3://ckpt/x", &o, &s), DPT_EINVAL);
	o.max_inflight = 0;
	assert_int_equal(dpt__storage_open("gs://ckpt/x", &o, &s), DPT_EINVAL);
	/* No request is sent at open. */
	assert_int_equal(dpt__storage_open("s3://ckpt/x", &o, &s), 0);
	assert_string_equal(dpt__storage_uri(s), "s3://ckpt/x");
	dpt__storage_destroy(&s);
	assert_null(s);
	dpt__storage_destroy(&s);
	clear_env();
}

static void quiet(enum dpt__log_level level, const char *msg)
{
	(void)level;
	(void)msg;
}

static int setup(void **state)
{
	(void)state;
	dpt__log_set_sink(quiet);
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return rmdir(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(file_uris),
		cmocka_unit_test(s3_uris),
		cmocka_unit_test(reasons),
		cmocka_unit_test(forms),
		cmocka_unit_test(canonical),
		cmocka_unit_test(keys),
		cmocka_unit_test(endpoints),
		cmocka_unit_test(credentials_file),
		cmocka_unit_test(config_sources),
		cmocka_unit_test(open_checks_options),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

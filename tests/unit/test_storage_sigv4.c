/*
 * The SigV4 signer against the four examples of the S3 documentation
 * ("Authenticating Requests: Using the Authorization Header", examples
 * GET Object, PUT Object, GET Bucket Lifecycle, Get Bucket (List
 * Objects)), which use the documentation's example key and the date
 * 2013-05-24.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "buf.h"
#include "storage/sigv4.h"

#define AK    "AKIAIOSFODNN7EXAMPLE"
#define SK    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define DATE  "20130524T000000Z"
#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define HOST  "examplebucket.s3.amazonaws.com"

static const struct dpt__sigv4_key key = {
	.access_key = AK,
	.secret_key = SK,
	.region = "us-east-1",
	.service = "s3",
};

/* The documentation's PUT Object body, "Welcome to Amazon S3.", hashed. */
#define PUT_BODY_HASH                                                          \
	"44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"

/* One of the examples: the request, the headers it signs and the
 * signature it has, and its canonical request where the documentation
 * gives it. */
struct example {
	struct dpt__sigv4_request req;
	const char *signed_headers, *signature, *canonical;
};

/* Header names in mixed case and unsorted: the signer lower-cases and
 * sorts them. */
static struct example get_object = {
	.req.method = "GET",
	.req.path = "/test.txt",
	.req.headers =
		(const struct dpt__sigv4_pair[]){
			{"x-amz-date", DATE},
			{"Range", "bytes=0-9"},
			{"Host", HOST},
			{"x-amz-content-sha256", EMPTY},
		},
	.req.nheaders = 4,
	.req.payload_hash = EMPTY,
	.signed_headers = "host;range;x-amz-content-sha256;x-amz-date",
	.signature = "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c60"
		     "36bdb41",
	.canonical = "GET\n/test.txt\n\nhost:" HOST "\nrange:bytes=0-9\n"
		     "x-amz-content-sha256:" EMPTY "\nx-amz-date:" DATE "\n\n"
		     "host;range;x-amz-content-sha256;x-amz-date\n" EMPTY,
};

static struct example put_object = {
	.req.method = "PUT",
	.req.path = "/test$file.text", /* '$' is encoded: %24 */
	.req.headers =
		(const struct dpt__sigv4_pair[]){
			{"Host", HOST},
			{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
			{"x-amz-date", DATE},
			{"x-amz-storage-class", "REDUCED_REDUNDANCY"},
			{"x-amz-content-sha256", PUT_BODY_HASH},
		},
	.req.nheaders = 5,
	.req.payload_hash = PUT_BODY_HASH,
	.signed_headers = "date;host;x-amz-content-sha256;x-amz-date;"
			  "x-amz-storage-class",
	.signature = "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0e"
		     "ce108bd",
};

/* The two bucket examples: a GET of "/" with the N parameters Q, the
 * same headers, and a canonical request that ends alike after its
 * query. */
static const struct dpt__sigv4_pair bucket_headers[] = {
	{"host", HOST},
	{"x-amz-date", DATE},
	{"x-amz-content-sha256", EMPTY},
};
#define BUCKET_GET(q, n)                                                       \
	.req.method = "GET", .req.path = "/", .req.query = q, .req.nquery = n, \
	.req.headers = bucket_headers, .req.nheaders = 3,                      \
	.req.payload_hash = EMPTY,                                             \
	.signed_headers = "host;x-amz-content-sha256;x-amz-date"
#define BUCKET_CANONICAL_END                                                   \
	"\nhost:" HOST "\nx-amz-content-sha256:" EMPTY "\nx-amz-date:" DATE    \
	"\n\nhost;x-amz-content-sha256;x-amz-date\n" EMPTY

/* A parameter without a value is signed as "lifecycle=". */
static struct example get_lifecycle = {
	BUCKET_GET(((const struct dpt__sigv4_pair[]){{"lifecycle", NULL}}), 1),
	.signature = "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a013"
		     "6783543",
	.canonical = "GET\n/\nlifecycle=" BUCKET_CANONICAL_END,
};

/* Given out of order: the canonical query must be sorted, what curl
 * 7.88's CURLOPT_AWS_SIGV4 does not do. */
static struct example list_objects_sorts_query = {
	BUCKET_GET(((const struct dpt__sigv4_pair[]){{"prefix", "J"},
						     {"max-keys", "2"}}),
		   2),
	.signature = "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef"
		     "69dc6f7",
	.canonical = "GET\n/\nmax-keys=2&prefix=J" BUCKET_CANONICAL_END,
};

/* The example in *STATE signs to its Authorization header, through its
 * canonical request where it has one. */
static void signs_as_documented(void **state)
{
	const struct example *e = *state;
	struct dpt__buf auth, canon, want;

	dpt__buf_init(&auth, 4096);
	dpt__buf_init(&canon, 4096);
	dpt__buf_init(&want, 4096);
	assert_int_equal(dpt__buf_printf(&want,
					 "AWS4-HMAC-SHA256 Credential=" AK
					 "/20130524/us-east-1/s3/aws4_request,"
					 "SignedHeaders=%s,Signature=%s",
					 e->signed_headers, e->signature),
			 0);
	assert_int_equal(
		dpt__sigv4_authorization(&key, DATE, &e->req, &auth, &canon),
		0);
	if (e->canonical)
		assert_string_equal(canon.data, e->canonical);
	assert_string_equal(auth.data, want.data);
	dpt__buf_release(&auth);
	dpt__buf_release(&canon);
	dpt__buf_release(&want);
}

#define EXAMPLE(ex)                                                            \
	{                                                                      \
		.name = #ex, .test_func = signs_as_documented,                 \
		.initial_state = &ex                                           \
	}

static void canonical_details(void **state)
{
	/* Query values are encoded with '/' as %2F, names and values sorted
	 * after encoding; header values are trimmed and blank runs folded. */
	const struct dpt__sigv4_pair q[] = {
		{"prefix", "runs/a b"},
		{"continuation-token", "1/x+y="},
		{"uploads", NULL},
	};
	const struct dpt__sigv4_pair h[] = {
		{"Host", "127.0.0.1:5055"},
		{"X-Amz-Meta-Note", "  a   b\tc  "},
	};
	const struct dpt__sigv4_request req = {
		.method = "POST",
		.path = "/ckpt/step 1/x",
		.query = q,
		.nquery = 3,
		.headers = h,
		.nheaders = 2,
		.payload_hash = "UNSIGNED-PAYLOAD",
	};
	struct dpt__buf auth, canon;
	(void)state;
	dpt__buf_init(&auth, 4096);
	dpt__buf_init(&canon, 4096);
	assert_int_equal(
		dpt__sigv4_authorization(&key, DATE, &req, &auth, &canon), 0);
	assert_string_equal(
		canon.data,
		"POST\n/ckpt/step%201/x\n"
		"continuation-token=1%2Fx%2By%3D&prefix=runs%2Fa%20b&"
		"uploads=\n"
		"host:127.0.0.1:5055\nx-amz-meta-note:a b c\n\n"
		"host;x-amz-meta-note\nUNSIGNED-PAYLOAD");
	assert_non_null(
		strstr(auth.data, "SignedHeaders=host;x-amz-meta-note,"));
	dpt__buf_release(&auth);
	dpt__buf_release(&canon);
}

static void encoding_and_helpers(void **state)
{
	struct dpt__buf b;
	char hex[65], date[17];
	(void)state;
	dpt__buf_init(&b, 256);
	assert_int_equal(dpt__sigv4_uri_encode(&b, "aZ09-._~/$ \xc3\xa9", true),
			 0);
	assert_string_equal(b.data, "aZ09-._~/%24%20%C3%A9");
	dpt__buf_reset(&b);
	assert_int_equal(dpt__sigv4_uri_encode(&b, "a/b", false), 0);
	assert_string_equal(b.data, "a%2Fb");
	dpt__buf_release(&b);
	dpt__sha256_hex("", 0, hex);
	assert_string_equal(hex, EMPTY);
	dpt__sha256_hex("Welcome to Amazon S3.", 21, hex);
	assert_string_equal(hex, PUT_BODY_HASH);
	dpt__sigv4_date(1369353600, date); /* Fri, 24 May 2013 00:00:00 GMT */
	assert_string_equal(date, DATE);
}

static void rejects_bad_input(void **state)
{
	const struct dpt__sigv4_request req = {
		.method = "GET",
		.path = "/",
		.payload_hash = EMPTY,
	};
	struct dpt__buf auth;
	(void)state;
	dpt__buf_init(&auth, 4096);
	assert_int_equal(
		dpt__sigv4_authorization(&key, DATE, &req, &auth, NULL),
		DPT_EINVAL); /* no headers */
	assert_int_equal(
		dpt__sigv4_authorization(&key, "2013-05-24", &req, &auth, NULL),
		DPT_EINVAL);
	dpt__buf_release(&auth);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		EXAMPLE(get_object),
		EXAMPLE(put_object),
		EXAMPLE(get_lifecycle),
		EXAMPLE(list_objects_sorts_query),
		cmocka_unit_test(canonical_details),
		cmocka_unit_test(encoding_and_helpers),
		cmocka_unit_test(rejects_bad_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

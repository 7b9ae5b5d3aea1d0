/*
 * The CPU data plane's HELLO and REPLY (worker/cpu_hello.c,
 * doc/protocol.md "CPU data plane"): the layout, the key derivation
 * against HMAC-SHA256 computed here by libcrypto, and every refusal: a
 * flipped bit anywhere, another key, another session, another version,
 * not a HELLO, a REPLY to another HELLO.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <dptrain/error.h>

#include "worker/cpu_hello.h"

#define STEP_KEY "0123456789abcdefghijABCDEFGHIJ0123456789"
#define SESSION	 "dpt-0011223344556677-g3"

static void key_of(struct dpt__hello_key *k, const char *step,
		   const char *session)
{
	assert_int_equal(dpt__hello_key_derive(k, step, strlen(step), session),
			 0);
}

static void hello_of(const struct dpt__hello_key *k,
		     unsigned char out[DPT__HELLO_BYTES])
{
	struct dpt__hello h = {
		.kind = DPT__HELLO_KIND_RING, .from = 7, .to = 2};

	assert_int_equal(dpt__hello_encode(k, &h, out), 0);
}

/* K, the step's key of SESSION, and OUT, a HELLO under it. */
static void step_hello(struct dpt__hello_key *k,
		       unsigned char out[DPT__HELLO_BYTES])
{
	key_of(k, STEP_KEY, SESSION);
	hello_of(k, out);
}

static void key_is_hmac_of_label_and_session(void **state)
{
	static const char msg[] = "dptrain/1/cpu-data-plane\0" SESSION;
	unsigned char want[32];
	unsigned int n = 0;
	struct dpt__hello_key k;

	(void)state;
	key_of(&k, STEP_KEY, SESSION);
	HMAC(EVP_sha256(), STEP_KEY, (int)strlen(STEP_KEY),
	     (const unsigned char *)msg, sizeof(msg) - 1, want, &n);
	assert_int_equal(n, 32);
	assert_memory_equal(k.k, want, 32);
}

static void round_trips_with_layout(void **state)
{
	unsigned char b[DPT__HELLO_BYTES], want[32];
	static const unsigned char head[20] = {'D', 'P', 'T', 'C', 2, 0, 0,
					       0,   1,	 0,   0,   0, 7, 0,
					       0,   0,	 2,   0,   0, 0};
	unsigned char msg[6 + 36];
	unsigned int n = 0;
	struct dpt__hello_key k;
	struct dpt__hello h;

	(void)state;
	step_hello(&k, b);
	assert_memory_equal(b, head, sizeof(head));
	memcpy(msg, "hello", 6);
	memcpy(msg + 6, b, 36);
	HMAC(EVP_sha256(), k.k, 32, msg, sizeof(msg), want, &n);
	assert_memory_equal(b + 36, want, 32);
	assert_int_equal(dpt__hello_decode(&k, b, &h), 0);
	assert_int_equal(h.kind, DPT__HELLO_KIND_RING);
	assert_int_equal(h.from, 7);
	assert_int_equal(h.to, 2);
}

static void nonces_differ(void **state)
{
	unsigned char a[DPT__HELLO_BYTES], b[DPT__HELLO_BYTES];
	struct dpt__hello_key k;

	(void)state;
	step_hello(&k, a);
	hello_of(&k, b);
	assert_memory_not_equal(a + 20, b + 20, 16);
}

static void every_flipped_bit_is_refused(void **state)
{
	unsigned char b[DPT__HELLO_BYTES];
	struct dpt__hello_key k;
	struct dpt__hello h;

	(void)state;
	step_hello(&k, b);
	for (size_t i = 0; i < sizeof(b) * 8; i++) {
		b[i / 8] ^= (unsigned char)(1u << (i % 8));
		assert_int_not_equal(dpt__hello_decode(&k, b, &h), 0);
		b[i / 8] ^= (unsigned char)(1u << (i % 8));
	}
	assert_int_equal(dpt__hello_decode(&k, b, &h), 0);
}

static void other_keys_are_refused(void **state)
{
	unsigned char b[DPT__HELLO_BYTES];
	struct dpt__hello_key k, step, gen;
	struct dpt__hello h;

	(void)state;
	step_hello(&k, b);
	key_of(&step, "another step's key", SESSION);
	key_of(&gen, STEP_KEY, "dpt-0011223344556677-g4");
	assert_int_equal(dpt__hello_decode(&step, b, &h), DPT_EAUTH);
	assert_int_equal(dpt__hello_decode(&gen, b, &h), DPT_EAUTH);
}

static void codes_tell_the_cause(void **state)
{
	unsigned char b[DPT__HELLO_BYTES];
	struct dpt__hello_key k;
	struct dpt__hello h;

	(void)state;
	step_hello(&k, b);
	b[4] = 1; /* the unkeyed version */
	assert_int_equal(dpt__hello_decode(&k, b, &h), DPT_EVERSION);
	memcpy(b, "GET ", 4);
	assert_int_equal(dpt__hello_decode(&k, b, &h), DPT_EPROTO);
	assert_int_equal(dpt__hello_key_derive(&k, STEP_KEY, 0, SESSION),
			 DPT_EINVAL);
}

static void reply_answers_one_hello(void **state)
{
	unsigned char a[DPT__HELLO_BYTES], b[DPT__HELLO_BYTES];
	unsigned char r[DPT__HELLO_REPLY_BYTES];
	struct dpt__hello_key k, other;

	(void)state;
	step_hello(&k, a);
	hello_of(&k, b);
	key_of(&other, "another step's key", SESSION);
	assert_int_equal(dpt__hello_reply(&k, a, r), 0);
	assert_memory_equal(r, "DPTR\2\0\0\0", 8);
	assert_int_equal(dpt__hello_check_reply(&k, a, r), 0);
	/* Another nonce, another key, a HELLO echoed as a REPLY. */
	assert_int_equal(dpt__hello_check_reply(&k, b, r), DPT_EAUTH);
	assert_int_equal(dpt__hello_check_reply(&other, a, r), DPT_EAUTH);
	assert_int_equal(dpt__hello_check_reply(&k, a, a), DPT_EAUTH);
	r[39] ^= 1;
	assert_int_equal(dpt__hello_check_reply(&k, a, r), DPT_EAUTH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(key_is_hmac_of_label_and_session),
		cmocka_unit_test(round_trips_with_layout),
		cmocka_unit_test(nonces_differ),
		cmocka_unit_test(every_flipped_bit_is_refused),
		cmocka_unit_test(other_keys_are_refused),
		cmocka_unit_test(codes_tell_the_cause),
		cmocka_unit_test(reply_answers_one_hello),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

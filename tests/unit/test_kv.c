/*
 * The step's key-value store (coordinator/kv.c; doc/protocol.md, "Step
 * key-value store"), driven without a socket and without a clock: the
 * replies are recorded by an injected sender and decoded (recorder,
 * tests/testlib.h), the time is a number the test moves.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <zmq.h>

#include <dptrain/error.h>

#include "coord.h"
#include "kv.h"
#include "log.h"
#include "tests/testlib.h"
#include "wire.h"

static int64_t now = 5000000;

static struct dpt__kv *kv_new(void)
{
	struct dpt__kv *kv;

	sent_clear();
	assert_int_equal(dpt__kv_new(&kv, &recorder), 0);
	return kv;
}

static void put(struct dpt__kv *kv, const char *from, uint32_t seq,
		const char *key, const char *value)
{
	struct dpt__msg m;

	dpt__msg_init(&m, DPT_MSG_KV_PUT, 0);
	m.seq = seq;
	snprintf(m.u.kv.key, sizeof(m.u.kv.key), "%s", key);
	snprintf(m.u.kv.value, sizeof(m.u.kv.value), "%s", value);
	dpt__kv_on_message(kv, (const uint8_t *)from, strlen(from), &m, now);
}

static void get(struct dpt__kv *kv, const char *from, uint32_t seq,
		const char *key, uint32_t wait_ms)
{
	struct dpt__msg m;

	dpt__msg_init(&m, DPT_MSG_KV_GET, 0);
	m.seq = seq;
	m.u.kv.wait_ms = wait_ms;
	snprintf(m.u.kv.key, sizeof(m.u.kv.key), "%s", key);
	dpt__kv_on_message(kv, (const uint8_t *)from, strlen(from), &m, now);
}

/* The first PUT of a key wins; the same value again is acknowledged (a
 * retried request), another value refused. */
static void first_put_wins(void **state)
{
	struct dpt__kv *kv = kv_new();
	const struct dpt__msg *r;

	(void)state;
	put(kv, "t0", 3, "master", "10.0.0.1:4000");
	r = sent_only("t0");
	assert_int_equal(r->type, DPT_MSG_ACK);
	assert_int_equal(r->seq, 3);
	sent_clear();
	put(kv, "t0", 4, "master", "10.0.0.1:4000");
	assert_int_equal(sent_only("t0")->type, DPT_MSG_ACK);
	sent_clear();
	put(kv, "t9", 5, "master", "10.0.0.9:4000");
	r = sent_only("t9");
	assert_int_equal(r->type, DPT_MSG_ERROR);
	assert_int_equal(r->u.text.code, DPT_EBUSY);
	assert_int_equal(r->seq, 5);
	assert_string_equal(r->u.text.text,
			    "'master' is already set to '10.0.0.1:4000'");
	sent_clear();
	get(kv, "t1", 6, "master", 0);
	r = sent_only("t1");
	assert_int_equal(r->type, DPT_MSG_KV_VALUE);
	assert_string_equal(r->u.kv.value, "10.0.0.1:4000");
	dpt__kv_destroy(&kv);
	assert_null(kv);
}

/* The library's reports (the "dptrain." keys) say what is true now: a
 * later put replaces the value, acknowledged; dpt__kv_value reads it. */
static void status_keys_are_replaced(void **state)
{
	struct dpt__kv *kv = kv_new();

	(void)state;
	assert_null(dpt__kv_value(kv, DPT_KV_COMMITTED));
	put(kv, "t0", 1, DPT_KV_COMMITTED, "40");
	assert_int_equal(sent_only("t0")->type, DPT_MSG_ACK);
	sent_clear();
	put(kv, "t0", 2, DPT_KV_COMMITTED, "80");
	assert_int_equal(sent_only("t0")->type, DPT_MSG_ACK);
	assert_string_equal(dpt__kv_value(kv, DPT_KV_COMMITTED), "80");
	sent_clear();
	/* Not a prefix match on "dptrain" alone. */
	put(kv, "t0", 3, "dptrainx", "a");
	sent_clear();
	put(kv, "t0", 4, "dptrainx", "b");
	assert_int_equal(sent_only("t0")->type, DPT_MSG_ERROR);
	assert_string_equal(dpt__kv_value(kv, "dptrainx"), "a");
	dpt__kv_destroy(&kv);
}

/* A GET waits for its key: answered when it is put, or with
 * ERROR(DPT_ETIMEDOUT) once its wait is over; wait 0 answers at once. */
static void get_waits_then_answers_or_times_out(void **state)
{
	struct dpt__kv *kv = kv_new();
	const struct dpt__msg *r;

	(void)state;
	get(kv, "t1", 1, "master", 0);
	assert_int_equal(sent_only("t1")->u.text.code, DPT_ENOENT);
	sent_clear();
	get(kv, "t1", 2, "master", 1000);
	get(kv, "t2", 7, "master", 3000);
	get(kv, "t3", 1, "other", 500);
	assert_int_equal((int)sent_total(), 0);
	now += 999;
	dpt__kv_on_tick(kv, now);
	assert_int_equal((int)sent_total(), 1); /* only t3's 500 ms are over */
	assert_int_equal(sent_only("t3")->u.text.code, DPT_ETIMEDOUT);
	sent_clear();
	now += 1;
	dpt__kv_on_tick(kv, now);
	r = sent_only("t1");
	assert_int_equal(r->u.text.code, DPT_ETIMEDOUT);
	assert_int_equal(r->seq, 2);
	assert_non_null(strstr(r->u.text.text, "no value for 'master'"));
	sent_clear();
	put(kv, "t0", 1, "master", "a:1");
	assert_int_equal(sent_only("t0")->type, DPT_MSG_ACK);
	r = sent_only("t2");
	assert_int_equal(r->type, DPT_MSG_KV_VALUE);
	assert_int_equal(r->seq, 7);
	assert_string_equal(r->u.kv.value, "a:1");
	sent_clear();
	now += 5000;
	dpt__kv_on_tick(kv, now); /* nobody waits any more */
	assert_int_equal((int)sent_total(), 0);
	dpt__kv_destroy(&kv);
}

/* The limits: 64 keys, then ERROR(DPT_ETOOBIG); 4096 waiting GETs, then
 * the oldest is answered ERROR(DPT_ETIMEDOUT) to make room. */
static void limits(void **state)
{
	struct dpt__kv *kv = kv_new();
	char key[16], from[16];

	(void)state;
	for (int i = 0; i < DPT_KV_KEYS_MAX; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		put(kv, "t0", (uint32_t)i + 1, key, "v");
	}
	sent_clear();
	put(kv, "t0", 100, "one-more", "v");
	assert_int_equal(sent_only("t0")->u.text.code, DPT_ETOOBIG);
	put(kv, "t1", 101, "k5", "v"); /* an existing key still is fine */
	assert_int_equal(sent_only("t1")->type, DPT_MSG_ACK);
	sent_clear();
	for (int i = 0; i < DPT_KV_WAITING_MAX; i++) {
		snprintf(from, sizeof(from), "w%d", i);
		get(kv, from, 1, "late", 60000);
	}
	assert_int_equal((int)sent_total(), 0);
	get(kv, "newest", 1, "late", 60000);
	assert_int_equal(sent_only("w0")->u.text.code, DPT_ETIMEDOUT);
	assert_int_equal((int)sent_total(), 1);
	dpt__kv_destroy(&kv); /* frees the 4096 waiting */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(first_put_wins),
		cmocka_unit_test(status_keys_are_replaced),
		cmocka_unit_test(get_waits_then_answers_or_times_out),
		cmocka_unit_test(limits),
	};

	dpt__log_set_level(DPT_LOG_ERROR); /* the refusals are asserted */
	return cmocka_run_group_tests(tests, NULL, NULL);
}

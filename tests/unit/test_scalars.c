/*
 * Logged scalars on their way to the events (common/scalars.c): the
 * records the library buffers, their packing into report values, the
 * coordinator's parse, the events' JSON of them, and the progress bar of
 * `dptrain status`.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "jsonl.h"
#include "scalars.h"
#include "wire.h"

static void record_and_parse(void **state)
{
	const char *names[] = {"loss", "samples_per_s", "lr"};
	const double values[] = {0.25, 1234.5, 1e-4};
	struct dpt__scalars sc;
	struct dpt__buf b;
	(void)state;

	dpt__buf_init(&b, 1 << 16);
	assert_int_equal(dpt__scalars_record(&b, 42, 3, names, values), 0);
	assert_string_equal(b.data,
			    "42 loss=0.25 samples_per_s=1234.5 lr=0.0001;");
	assert_int_equal(dpt__scalars_parse(b.data, b.len, &sc), 0);
	assert_int_equal(sc.step, 42);
	assert_int_equal(sc.n, 3);
	assert_string_equal(sc.names[1], "samples_per_s");
	assert_true(sc.values[0] == 0.25 && sc.values[1] == 1234.5 &&
		    sc.values[2] == 1e-4);

	/* Not finite: "nan" in the record, NAN parsed, null in JSON. */
	double bad[] = {INFINITY};
	dpt__buf_reset(&b);
	assert_int_equal(dpt__scalars_record(&b, 7, 1, names, bad), 0);
	assert_string_equal(b.data, "7 loss=nan;");
	assert_int_equal(dpt__scalars_parse(b.data, b.len, &sc), 0);
	assert_true(isnan(sc.values[0]));
	dpt__buf_release(&b);
}

static void bad_records_are_refused(void **state)
{
	const char *sp[] = {"a b"}, *rep[] = {"x", "x"}, *semi[] = {"a;b"},
		   *eq[] = {"a=b"}, *empty[] = {""},
		   *longn[] = {"abcdefghijabcdefghijabcdefghijab"};
	const double v[] = {1, 2};
	struct dpt__buf b;
	(void)state;

	dpt__buf_init(&b, 1 << 16);
	dpt__buf_puts(&b, "9 kept=1;");
	assert_int_equal(dpt__scalars_record(&b, 1, 1, sp, v), DPT_EINVAL);
	assert_int_equal(dpt__scalars_record(&b, 1, 2, rep, v), DPT_EINVAL);
	assert_int_equal(dpt__scalars_record(&b, 1, 1, semi, v), DPT_EINVAL);
	assert_int_equal(dpt__scalars_record(&b, 1, 1, eq, v), DPT_EINVAL);
	assert_int_equal(dpt__scalars_record(&b, 1, 1, empty, v), DPT_EINVAL);
	assert_int_equal(dpt__scalars_record(&b, 1, 1, longn, v), DPT_EINVAL);
	assert_int_equal(dpt__scalars_record(&b, 1, 0, sp, v), DPT_EINVAL);
	assert_int_equal(dpt__scalars_record(&b, 1, DPT_SCALARS_MAX + 1, sp, v),
			 DPT_EINVAL);

	/* 16 names of 31 bytes: longer than one report value. */
	char big[DPT_SCALARS_MAX][32];
	const char *bn[DPT_SCALARS_MAX];
	double bv[DPT_SCALARS_MAX];
	for (int i = 0; i < DPT_SCALARS_MAX; i++) {
		memset(big[i], 'a' + i, 31);
		big[i][31] = '\0';
		bn[i] = big[i];
		bv[i] = i;
	}
	assert_int_equal(dpt__scalars_record(&b, 1, DPT_SCALARS_MAX, bn, bv),
			 DPT_ETOOBIG);
	/* The buffer is as it was after each refusal. */
	assert_string_equal(b.data, "9 kept=1;");
	dpt__buf_release(&b);

	/* What the coordinator drops. */
	struct dpt__scalars sc;
	const char *junk[] = {"",	    "x loss=1", "1",	   "1 loss",
			      "1 loss=",    "1 loss=x", "1 a b=1", "1 l=1 l=2",
			      "1 loss=inf", "1  l=1",	"-1 l=1",  "1 l=1e999"};
	for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
		assert_int_equal(
			dpt__scalars_parse(junk[i], strlen(junk[i]), &sc),
			DPT_EPROTO);
}

static void pack_whole_records(void **state)
{
	const char *names[] = {"loss", "samples_per_s"};
	char value[DPT_KV_VALUE_MAX + 1];
	struct dpt__buf b;
	size_t off = 0, n, puts = 0, records = 0;
	(void)state;

	dpt__buf_init(&b, 1 << 20);
	for (uint64_t s = 0; s < 1000; s++) {
		double v[] = {1.0 / (double)(s + 1), 12345.678 + (double)s};
		assert_int_equal(dpt__scalars_record(&b, s, 2, names, v), 0);
	}
	/* Every value is whole records that parse, in order, and together
	 * they are every record once. */
	uint64_t next = 0;
	while ((n = dpt__scalars_pack(b.data, b.len, &off, value,
				      sizeof(value))) > 0) {
		const char *p = value;
		assert_true(n <= DPT_KV_VALUE_MAX);
		assert_int_equal(strlen(value), n);
		assert_int_equal(value[n - 1], ';');
		puts++;
		while (*p) {
			const char *e = strchr(p, ';');
			struct dpt__scalars sc;
			assert_non_null(e);
			assert_int_equal(
				dpt__scalars_parse(p, (size_t)(e - p), &sc), 0);
			assert_int_equal(sc.step, next);
			next++;
			records++;
			p = e + 1;
		}
	}
	assert_int_equal(off, b.len);
	assert_int_equal(records, 1000);
	/* About 45 bytes a record: 5 to a put. */
	assert_true(puts >= 1000 / 6 && puts <= 1000 / 4);
	dpt__buf_release(&b);
}

static void events_json_of_scalars(void **state)
{
	struct dpt__buf b;
	(void)state;

	dpt__buf_init(&b, 4096);
	dpt__jsonl_begin(&b);
	dpt__jsonl_str(&b, "event", "log");
	dpt__jsonl_u64(&b, "step", 3);
	assert_int_equal(dpt__jsonl_open(&b, "scalars"), 0);
	dpt__jsonl_real(&b, "loss", 0.125);
	dpt__jsonl_real(&b, "lr", 3e-7);
	dpt__jsonl_real(&b, "bad", NAN);
	assert_int_equal(dpt__jsonl_close(&b), 0);
	dpt__jsonl_end(&b);
	assert_string_equal(b.data, "{\"event\":\"log\",\"step\":3,\"scalars\":"
				    "{\"loss\":0.125,\"lr\":3e-07,\"bad\":null}"
				    "}\n");
	dpt__buf_release(&b);
}

static void progress_bar(void **state)
{
	static const struct {
		uint64_t step, total;
		int width;
		size_t size;
		const char *want;
	} cases[] = {
		{45, 100, 10, 64, "[####......]  45%"},
		{0, 100, 10, 64, "[..........]   0%"},
		{100, 100, 10, 64, "[##########] 100%"},
		{250, 100, 10, 64, "[##########] 100%"},
		{999, 1000, 20, 64, "[###################.]  99%"},
		/* No total, or no room: nothing. */
		{5, 0, 10, 64, ""},
		{5, 10, 10, 12, ""},
	};
	char out[64];
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		dpt__progress_bar(out, cases[i].size, cases[i].step,
				  cases[i].total, cases[i].width);
		assert_string_equal(out, cases[i].want);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(record_and_parse),
		cmocka_unit_test(bad_records_are_refused),
		cmocka_unit_test(pack_whole_records),
		cmocka_unit_test(events_json_of_scalars),
		cmocka_unit_test(progress_bar),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

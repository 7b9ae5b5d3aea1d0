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

#include "parse.h"

static void longs(void **state)
{
	long v = -1;
	(void)state;
	assert_int_equal(dpt__parse_long("42", 0, 100, &v), 0);
	assert_int_equal(v, 42);
	assert_int_equal(dpt__parse_long("-3", -5, 5, &v), 0);
	assert_int_equal(v, -3);
	assert_int_equal(dpt__parse_long("101", 0, 100, &v), DPT_ERANGE);
	assert_int_equal(dpt__parse_long("3x", 0, 100, &v), DPT_EINVAL);
	assert_int_equal(dpt__parse_long("", 0, 100, &v), DPT_EINVAL);
	assert_int_equal(dpt__parse_long(" 3", 0, 100, &v), DPT_EINVAL);
	assert_int_equal(dpt__parse_long(NULL, 0, 100, &v), DPT_EINVAL);
	assert_int_equal(dpt__parse_long("99999999999999999999", 0, 100, &v),
			 DPT_ERANGE);
	assert_int_equal(v, -3);
}

static void ranges(void **state)
{
	static const struct {
		const char *in;
		int rc;
		long min, max;
	} cases[] = {
		{"1-2", 0, 1, 2},
		{"3", 0, 3, 3},
		{"2-2", 0, 2, 2},
		{"2-1", DPT_ERANGE, 0, 0},
		{"0-2", DPT_ERANGE, 0, 0},
		{"1-9", DPT_ERANGE, 0, 0},
		{"1-", DPT_EINVAL, 0, 0},
		{"-2", DPT_EINVAL, 0, 0},
		{"1--2", DPT_ERANGE, 0, 0},
		{"1-2-3", DPT_EINVAL, 0, 0},
		{"a-2", DPT_EINVAL, 0, 0},
		{"", DPT_EINVAL, 0, 0},
		{" 1-2", DPT_EINVAL, 0, 0},
		{"1 -2", DPT_EINVAL, 0, 0},
		{"1-22222222222222222222222222222222222222222222222",
		 DPT_EINVAL, 0, 0},
	};
	long a, b;
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		a = b = -7;
		assert_int_equal(dpt__parse_range(cases[i].in, 1, 8, &a, &b),
				 cases[i].rc);
		if (cases[i].rc == 0) {
			assert_int_equal(a, cases[i].min);
			assert_int_equal(b, cases[i].max);
		} else {
			assert_int_equal(a, -7); /* untouched on error */
			assert_int_equal(b, -7);
		}
	}
	assert_int_equal(dpt__parse_range(NULL, 1, 8, &a, &b), DPT_EINVAL);
}

static void durations(void **state)
{
	static const struct {
		const char *in;
		long want;
	} ok[] = {
		{"10", 600},	  {"05:30", 330},    {"1:02:03", 3723},
		{"2-12", 216000}, {"1-0:30", 88200}, {"1-00:00:10", 86410},
		{"45s", 45},	  {"10m", 600},	     {"2h", 7200},
		{"5d", 432000},	  {"0", 0},
	};
	static const char *const bad[] = {
		"",	     "m",   "10x",  "1:2:3:4", "-5", "1-",
		"1-2:3:4:5", "a:b", "10 m", "1.5h",    "::",
	};
	long v;
	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(dpt__parse_duration(ok[i].in, &v), 0);
		assert_int_equal(v, ok[i].want);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(dpt__parse_duration(bad[i], &v), DPT_EINVAL);
}

static void ckpt_every(void **state)
{
	long secs, steps;
	(void)state;

	assert_int_equal(dpt__parse_ckpt_every("auto", &secs, &steps), 0);
	assert_int_equal(secs, DPT_CKPT_EVERY_AUTO_S);
	assert_int_equal(steps, 0);
	assert_int_equal(dpt__parse_ckpt_every("90s", &secs, &steps), 0);
	assert_int_equal(secs, 90);
	assert_int_equal(steps, 0);
	assert_int_equal(dpt__parse_ckpt_every("1:00:00", &secs, NULL), 0);
	assert_int_equal(secs, 3600);
	assert_int_equal(dpt__parse_ckpt_every("500steps", &secs, &steps), 0);
	assert_int_equal(secs, 0);
	assert_int_equal(steps, 500);
	assert_int_equal(dpt__parse_ckpt_every("500steps", &secs, NULL), 0);
	assert_int_equal(secs, 0);
	const char *bad[] = {"",	"0s",	  "0steps",   "steps",
			     "-3steps", "3stepz", "10 steps", "2000000000steps",
			     "often"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_not_equal(
			dpt__parse_ckpt_every(bad[i], &secs, &steps), 0);
}

static void format_durations(void **state)
{
	char b[32];
	(void)state;
	assert_string_equal(dpt__format_duration(600, b, sizeof(b)), "10m");
	assert_string_equal(dpt__format_duration(90, b, sizeof(b)), "1m30s");
	assert_string_equal(dpt__format_duration(7200, b, sizeof(b)), "2h");
	assert_string_equal(dpt__format_duration(172800, b, sizeof(b)), "2d");
	assert_string_equal(dpt__format_duration(5, b, sizeof(b)), "5s");
}

static void bools(void **state)
{
	bool b;
	(void)state;
	assert_int_equal(dpt__parse_bool("Yes", &b), 0);
	assert_true(b);
	assert_int_equal(dpt__parse_bool("off", &b), 0);
	assert_false(b);
	assert_int_equal(dpt__parse_bool("maybe", &b), DPT_EINVAL);
}

struct seen {
	char text[256];
	int err_line;
};

static int collect(void *ctx, const char *key, const char *value, int lineno)
{
	struct seen *s = ctx;
	size_t n = strlen(s->text);
	snprintf(s->text + n, sizeof(s->text) - n, "%d:%s=%s;", lineno, key,
		 value);
	return 0;
}

static void on_err(void *ctx, int lineno, const char *what)
{
	(void)what;
	((struct seen *)ctx)->err_line = lineno;
}

static void kv_file(void **state)
{
	char path[] = "/tmp/dpt-test-kv-XXXXXX";
	struct seen s = {"", 0};
	int fd;
	FILE *f;
	(void)state;

	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("# comment\n\n ckpt_root = /lustre/%u \ngrace=10m # tail\n", f);
	fclose(f);
	assert_int_equal(dpt__read_kv_file(path, collect, on_err, &s), 0);
	assert_string_equal(s.text, "3:ckpt_root=/lustre/%u;4:grace=10m;");

	f = fopen(path, "w");
	fputs("a=1\nbroken line\n", f);
	fclose(f);
	s.text[0] = '\0';
	assert_int_equal(dpt__read_kv_file(path, collect, on_err, &s),
			 DPT_ECONFIG);
	assert_int_equal(s.err_line, 2);
	unlink(path);
	assert_int_equal(dpt__read_kv_file(path, collect, on_err, &s),
			 DPT_ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(longs),
		cmocka_unit_test(ranges),
		cmocka_unit_test(durations),
		cmocka_unit_test(ckpt_every),
		cmocka_unit_test(format_durations),
		cmocka_unit_test(bools),
		cmocka_unit_test(kv_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

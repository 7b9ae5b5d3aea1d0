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

static void fields_and_types(void **state)
{
	struct dpt__buf b;
	(void)state;
	dpt__buf_init(&b, 4096);
	assert_int_equal(dpt__jsonl_begin(&b), 0);
	assert_int_equal(dpt__jsonl_num(&b, "time", 1712345678.1234, 3), 0);
	assert_int_equal(dpt__jsonl_str(&b, "event", "commit"), 0);
	assert_int_equal(dpt__jsonl_u64(&b, "step", UINT64_MAX), 0);
	assert_int_equal(dpt__jsonl_i64(&b, "status", -1), 0);
	assert_int_equal(dpt__jsonl_str(&b, "run", NULL), 0);
	assert_int_equal(dpt__jsonl_null(&b, "rank"), 0);
	assert_int_equal(dpt__jsonl_num(&b, "bw", NAN, 1), 0);
	assert_int_equal(dpt__jsonl_end(&b), 0);
	assert_string_equal(b.data,
			    "{\"time\":1712345678.123,\"event\":\"commit\","
			    "\"step\":18446744073709551615,\"status\":-1,"
			    "\"run\":null,\"rank\":null,\"bw\":null}\n");
	/* begin empties the buffer: one line per event. */
	assert_int_equal(dpt__jsonl_begin(&b), 0);
	assert_int_equal(dpt__jsonl_end(&b), 0);
	assert_string_equal(b.data, "{}\n");
	dpt__buf_release(&b);
}

static void escapes_any_bytes(void **state)
{
	struct dpt__buf b;
	(void)state;
	dpt__buf_init(&b, 4096);
	dpt__jsonl_begin(&b);
	assert_int_equal(
		dpt__jsonl_str(&b, "k\"", "a\"b\\c\nd\t\x01\x7f\xc3\xa9 ok"),
		0);
	dpt__jsonl_end(&b);
	assert_string_equal(b.data, "{\"k\\\"\":\"a\\\"b\\\\c\\u000ad\\u0009"
				    "\\u0001\\u007f\\u00c3\\u00a9 ok\"}\n");
	/* The line is one line whatever the text held. */
	assert_null(strchr(b.data, '\n') + 1 == b.data + b.len ? NULL : "x");
	dpt__buf_release(&b);
}

static void cap_is_reported(void **state)
{
	struct dpt__buf b;
	char big[200];
	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	dpt__buf_init(&b, 64);
	dpt__jsonl_begin(&b);
	assert_int_equal(dpt__jsonl_str(&b, "reason", big), DPT_ETOOBIG);
	dpt__buf_release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fields_and_types),
		cmocka_unit_test(escapes_any_bytes),
		cmocka_unit_test(cap_is_reported),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

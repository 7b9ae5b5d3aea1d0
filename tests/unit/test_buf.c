#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "buf.h"

static void grows_and_formats(void **state)
{
	struct dpt__buf b;
	(void)state;
	dpt__buf_init(&b, 1 << 20);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(dpt__buf_printf(&b, "%03d,", i % 1000), 0);
	assert_int_equal(b.len, 4000);
	assert_memory_equal(b.data, "000,001,", 8);
	assert_string_equal(b.data + 3996, "999,");
	dpt__buf_reset(&b);
	assert_int_equal(b.len, 0);
	assert_string_equal(b.data, "");
	dpt__buf_release(&b);
	assert_null(b.data);
}

static void cap_is_hard_and_lossless(void **state)
{
	struct dpt__buf b;
	(void)state;
	dpt__buf_init(&b, 8);
	assert_int_equal(dpt__buf_puts(&b, "12345678"), 0);
	assert_int_equal(dpt__buf_puts(&b, "9"), DPT_ETOOBIG);
	assert_int_equal(dpt__buf_printf(&b, "%d", 1), DPT_ETOOBIG);
	assert_string_equal(b.data, "12345678");
	char *s = dpt__buf_steal(&b);
	assert_string_equal(s, "12345678");
	assert_null(b.data);
	free(s);
	s = dpt__buf_steal(&b);
	assert_string_equal(s, "");
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(grows_and_formats),
		cmocka_unit_test(cap_is_hard_and_lossless),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

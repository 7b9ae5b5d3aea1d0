#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <dptrain/error.h>

/* Every code has its own message and name, generated from the one list. */
static void every_code_has_message_and_name(void **state)
{
	(void)state;
	int codes[] = {
#define CODE(name, num, msg) DPT_##name,
		DPT_ERRNO_MAP(CODE)
#undef CODE
	};
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		assert_int_equal(codes[i], -(int)(i + 1));
		assert_string_not_equal(dpt_strerror(codes[i]),
					"unknown error");
		assert_true(strncmp(dpt_err_name(codes[i]), "DPT_E", 5) == 0);
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(dpt_strerror(codes[i]),
						dpt_strerror(codes[j]));
	}
}

static void known_strings(void **state)
{
	(void)state;
	assert_string_equal(dpt_strerror(DPT_OK), "success");
	assert_string_equal(dpt_strerror(DPT_ECORRUPT),
			    "checksum mismatch: data is damaged");
	assert_string_equal(dpt_err_name(DPT_EAUTH), "DPT_EAUTH");
	assert_string_equal(dpt_strerror(-9999), "unknown error");
	assert_string_equal(dpt_err_name(12345), "DPT_UNKNOWN");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_code_has_message_and_name),
		cmocka_unit_test(known_strings),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

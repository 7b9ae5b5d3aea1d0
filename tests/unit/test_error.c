#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <pthread.h>

#include <dptrain/error.h>

#include "log.h"

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

static void quiet(enum dpt__log_level level, const char *msg)
{
	(void)level;
	(void)msg;
}

static void *other_thread(void *arg)
{
	(void)arg;
	dpt__error("cannot write '%s': %s", "/elsewhere",
		   "Disk quota exceeded");
	return NULL;
}

/* The last error logged in a thread is what dpt_last_error() says there:
 * warnings do not replace it, other threads' errors do not reach it. */
static void last_error_is_per_thread(void **state)
{
	pthread_t t;

	(void)state;
	dpt__log_set_sink(quiet);
	dpt_last_error_clear();
	assert_string_equal(dpt_last_error(), "");
	dpt__error("cannot create directory '%s': %s", "/ckpt/run",
		   "Permission denied");
	dpt__warn("retrying");
	assert_string_equal(
		dpt_last_error(),
		"cannot create directory '/ckpt/run': Permission denied");
	assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
	pthread_join(t, NULL);
	assert_string_equal(
		dpt_last_error(),
		"cannot create directory '/ckpt/run': Permission denied");
	dpt__set_last_error("handed over");
	assert_string_equal(dpt_last_error(), "handed over");
	dpt_last_error_clear();
	assert_string_equal(dpt_last_error(), "");
	dpt__log_set_sink(NULL);
}

static int shown_errors;

static void count(enum dpt__log_level level, const char *msg)
{
	(void)msg;
	shown_errors += level == DPT_LOG_ERROR;
}

static void *quiet_thread(void *arg)
{
	(void)arg;
	dpt__error("shown");
	return NULL;
}

/* A quiet thread's errors are kept for dpt_last_error(), not shown;
 * warnings still are, and other threads are not quiet. */
static void quiet_keeps_errors(void **state)
{
	pthread_t t;

	(void)state;
	dpt__log_set_sink(count);
	shown_errors = 0;
	dpt__log_quiet(true);
	dpt__error("cannot append to '%s': %s", "/run/events.jsonl", "EIO");
	assert_int_equal(shown_errors, 0);
	assert_string_equal(dpt_last_error(),
			    "cannot append to '/run/events.jsonl': EIO");
	assert_int_equal(pthread_create(&t, NULL, quiet_thread, NULL), 0);
	pthread_join(t, NULL);
	assert_int_equal(shown_errors, 1);
	dpt__log_quiet(false);
	dpt__error("shown again");
	assert_int_equal(shown_errors, 2);
	dpt__log_set_sink(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_code_has_message_and_name),
		cmocka_unit_test(known_strings),
		cmocka_unit_test(last_error_is_per_thread),
		cmocka_unit_test(quiet_keeps_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The coordinator endpoint that root's slurmstepd builds from a job's
 * environment (common/net.c): only a numeric address and a port of digits
 * become an endpoint; everything libzmq would read more into is refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "net.h"

static void accepted(void **state)
{
	static const struct {
		const char *host, *port, *endpoint;
	} cases[] = {
		{"10.0.0.9", "2049", "tcp://10.0.0.9:2049"},
		{"127.0.0.1", "1", "tcp://127.0.0.1:1"},
		{"192.168.1.20", "65535", "tcp://192.168.1.20:65535"},
		{"10.0.0.9", "08080", "tcp://10.0.0.9:8080"},
		{"::1", "40000", "tcp://[::1]:40000"},
		{"fd00::9:1", "7000", "tcp://[fd00::9:1]:7000"},
		{"::ffff:10.0.0.9", "7000", "tcp://[::ffff:10.0.0.9]:7000"},
	};
	char out[96];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(dpt__tcp_endpoint(cases[i].host, cases[i].port,
						   out, sizeof(out)),
				 0);
		assert_string_equal(out, cases[i].endpoint);
	}
}

static void refused(void **state)
{
	static const struct {
		const char *host, *port;
	} cases[] = {
		/* libzmq: bind source port 1023, then connect elsewhere */
		{"10.0.0.9", "1023;10.0.0.9:2049"},
		{"10.0.0.9;10.0.0.1", "2049"},
		{"10.0.0.9", "0"},
		{"10.0.0.9", "65536"},
		{"10.0.0.9", "100000"},
		{"10.0.0.9", "-1"},
		{"10.0.0.9", "+80"},
		{"10.0.0.9", " 80"},
		{"10.0.0.9", "80 "},
		{"10.0.0.9", "0x50"},
		{"10.0.0.9", ""},
		{"10.0.0.9", "*"},
		{"localhost", "2049"},
		{"evil.example.com", "2049"},
		{"eth0", "2049"},
		{"*", "2049"},
		{"", "2049"},
		{"10.0.0", "2049"},
		{"010.0.0.9", "2049"},
		{"10.0.0.9:2049", "80"},
		{"[::1]", "80"},
		{"fe80::1%eth0", "80"},
		{"10.0.0.9 ", "80"},
		{"10.0.0.9\n", "80"},
		{NULL, "80"},
		{"10.0.0.9", NULL},
	};
	char out[96];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(out, "unchanged", 10);
		assert_int_equal(dpt__tcp_endpoint(cases[i].host, cases[i].port,
						   out, sizeof(out)),
				 DPT_EINVAL);
		assert_string_equal(out, "unchanged");
	}
}

static void too_small(void **state)
{
	char out[19] = "unchanged";

	(void)state;
	/* "tcp://10.0.0.9:2049" needs 20 bytes with its NUL. */
	assert_int_equal(
		dpt__tcp_endpoint("10.0.0.9", "2049", out, sizeof(out)),
		DPT_EINVAL);
	assert_string_equal(out, "unchanged");
	assert_int_equal(dpt__tcp_endpoint("10.0.0.9", "2049", out, 0),
			 DPT_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(accepted),
		cmocka_unit_test(refused),
		cmocka_unit_test(too_small),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

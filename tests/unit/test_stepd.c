/*
 * slurm_spank_task_exit's report (spank/stepd.c), which slurmstepd runs as
 * root, with the job's environment in the attacker's hands: Slurm and the
 * coordinator client are fakes that record what the plugin asked of them.
 * Only srun's numeric address and a port of digits may be connected to,
 * and only by a child that has become the job's owner (nobody, when the
 * test runs as root as slurmstepd does; the test's own user otherwise).
 */
#define _GNU_SOURCE /* pipe2 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include <slurm/spank.h>

#include <dptrain/error.h>

#include "client.h"
#include "plugin.h"

struct dpt__plugin dpt__plugin;

static const char *env_host, *env_port;
static char reported[128], logged[512];
static int reports;
/* The fake client runs in the reporting child: it tells the test through
 * this pipe, one line per report: "EUID ENDPOINT". */
static int report_pipe[2] = {-1, -1};
static gid_t job_groups[1];

/* The job's owner: nobody when root can become it, else ourselves. */
static uid_t job_uid(void)
{
	return geteuid() == 0 ? 65534 : geteuid();
}

static const char secret[] = "00112233445566778899aabbccddeeff"
			     "00112233445566778899aabbccddeeff";

/* ---------------------------------------------------------- fake Slurm */

spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
	const char *v = NULL;

	(void)sp;
	if (!strcmp(var, "SLURM_LAUNCH_NODE_IPADDR"))
		v = env_host;
	else if (!strcmp(var, "DPTRAIN_COORDINATOR_PORT"))
		v = env_port;
	else if (!strcmp(var, "DPTRAIN_SECRET"))
		v = secret;
	if (!v)
		return ESPANK_ENV_NOEXIST;
	if (strlen(v) >= (size_t)len)
		return ESPANK_NOSPACE;
	memcpy(buf, v, strlen(v) + 1);
	return ESPANK_SUCCESS;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val,
			 int overwrite)
{
	(void)sp, (void)var, (void)val, (void)overwrite;
	return ESPANK_SUCCESS;
}

spank_err_t spank_unsetenv(spank_t sp, const char *var)
{
	(void)sp, (void)var;
	return ESPANK_SUCCESS;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	va_list ap;

	(void)sp;
	va_start(ap, item);
	if (item == S_TASK_GLOBAL_ID) {
		*va_arg(ap, uint32_t *) = 3;
	} else if (item == S_TASK_EXIT_STATUS) {
		*va_arg(ap, int *) = 9;
	} else if (item == S_JOB_UID) {
		*va_arg(ap, uid_t *) = job_uid();
	} else if (item == S_JOB_GID) {
		*va_arg(ap, gid_t *) = geteuid() == 0 ? 65534 : getegid();
	} else if (item == S_JOB_SUPPLEMENTARY_GIDS) {
		gid_t **g = va_arg(ap, gid_t **);
		int *n = va_arg(ap, int *);

		job_groups[0] = geteuid() == 0 ? 65534 : getegid();
		*g = job_groups;
		*n = 1;
	}
	va_end(ap);
	return ESPANK_SUCCESS;
}

const char *spank_strerror(spank_err_t err)
{
	(void)err;
	return "fake";
}

void slurm_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(logged, sizeof(logged), fmt, ap);
	va_end(ap);
}

void slurm_debug(const char *fmt, ...)
{
	(void)fmt;
}

/* ------------------------------------------- fake coordinator client */

int dpt__client_report_exit(const char *endpoint, const char *secret_hex,
			    uint32_t task_id, int32_t status, int timeout_ms)
{
	char line[160];
	int n;

	(void)secret_hex, (void)task_id, (void)status, (void)timeout_ms;
	n = snprintf(line, sizeof(line), "%u %s\n", (unsigned)geteuid(),
		     endpoint);
	return write(report_pipe[1], line, (size_t)n) == n ? 0 : DPT_ESYS;
}

int dpt__client_kv_put(const char *endpoint, const char *secret_hex,
		       const char *key, const char *value, int timeout_ms)
{
	(void)endpoint, (void)secret_hex, (void)key, (void)value;
	(void)timeout_ms;
	return DPT_EINVAL;
}

int dpt__client_kv_get(const char *endpoint, const char *secret_hex,
		       const char *key, char *value, size_t size,
		       int timeout_ms)
{
	(void)endpoint, (void)secret_hex, (void)key, (void)value, (void)size;
	(void)timeout_ms;
	return DPT_EINVAL;
}

/* --------------------------------------------------------------- tests */

static void task_exit(const char *host, const char *port)
{
	env_host = host;
	env_port = port;
	reports = 0;
	reported[0] = logged[0] = '\0';
	assert_int_equal(pipe2(report_pipe, O_NONBLOCK), 0);
	dpt__stepd_task_exit(NULL);
	close(report_pipe[1]);
	/* The child has been reaped: whatever it wrote is in the pipe. */
	for (char line[160];; reports++) {
		unsigned uid;
		ssize_t n = read(report_pipe[0], line, sizeof(line) - 1);

		if (n <= 0)
			break;
		line[n] = '\0';
		assert_int_equal(sscanf(line, "%u %127s", &uid, reported), 2);
		assert_int_equal(uid, job_uid());
	}
	close(report_pipe[0]);
}

static void srun_endpoint_reported(void **state)
{
	(void)state;
	task_exit("10.0.0.9", "40123");
	assert_int_equal(reports, 1);
	assert_string_equal(reported, "tcp://10.0.0.9:40123");
	task_exit("fd00::9", "40123");
	assert_int_equal(reports, 1);
	assert_string_equal(reported, "tcp://[fd00::9]:40123");
	assert_string_equal(logged, "");
}

static void hostile_endpoint_refused(void **state)
{
	static const char *const ports[] = {
		"1;10.0.0.9:2049", /* libzmq: bind source port 1 first */
		"1023;10.1.1.1:2", /* the most of that a port's 16 bytes hold */
		"0",
		"65536",
		"+80",
		"80 ",
	};
	static const char *const hosts[] = {
		"nfs.example.com",
		"10.0.0.9;10.0.0.1",
		"10.0.0.9\nforged log line",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(ports) / sizeof(ports[0]); i++) {
		task_exit("10.0.0.9", ports[i]);
		assert_int_equal(reports, 0);
		assert_non_null(strstr(logged, "refusing the coordinator"));
	}
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		task_exit(hosts[i], "2049");
		assert_int_equal(reports, 0);
		assert_non_null(strstr(logged, "numeric IP address"));
		assert_null(strchr(logged, '\n'));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(srun_endpoint_reported),
		cmocka_unit_test(hostile_endpoint_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

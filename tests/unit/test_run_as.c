/*
 * slurmstepd's work on a job's behalf, done as the job's owner
 * (spank/run_as.c): the child has the owner's uid, gid and groups before
 * it does anything, cannot take root back, connects as the owner (the
 * kernel's own record of the socket says so), and is killed at its
 * timeout. Needs root, as slurmstepd has it; skipped otherwise.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "clock.h"
#include "spank/run_as.h"

#define NOBODY 65534

static const gid_t groups[] = {NOBODY};
static const struct dpt__run_as_user nobody = {
	.uid = NOBODY, .gid = NOBODY, .groups = groups, .ngroups = 1};

/* The child's credentials, checked in the child: DPT_EINVAL if any is
 * not the user's, or if root comes back. */
static int credentials(void *arg)
{
	gid_t g[8];
	int n = getgroups(8, g);

	(void)arg;
	if (getuid() != NOBODY || geteuid() != NOBODY || getgid() != NOBODY ||
	    getegid() != NOBODY || n != 1 || g[0] != NOBODY)
		return DPT_EINVAL;
	if (setuid(0) == 0 || seteuid(0) == 0 || setgid(0) == 0)
		return DPT_EINVAL;
	return 0;
}

static void becomes_the_user(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	assert_int_equal(dpt__run_as(&nobody, credentials, NULL, 5000), 0);
}

static int fails_with_auth(void *arg)
{
	(void)arg;
	return DPT_EAUTH;
}

static int sleeps(void *arg)
{
	(void)arg;
	sleep(30);
	return 0;
}

static void result_and_timeout(void **state)
{
	int64_t t0;

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_int_equal(dpt__run_as(&nobody, fails_with_auth, NULL, 5000),
			 DPT_EAUTH);
	t0 = dpt__now_ms();
	assert_int_equal(dpt__run_as(&nobody, sleeps, NULL, 200),
			 DPT_ETIMEDOUT);
	assert_true(dpt__now_ms() - t0 < 2000);
	/* Killed and reaped: no child is left. */
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

/* A user that cannot be become (an invalid group list): nothing runs. */
static void cannot_become(void **state)
{
	struct dpt__run_as_user bad = nobody;

	(void)state;
	if (geteuid() != 0)
		skip();
	bad.ngroups = -1;
	assert_int_equal(dpt__run_as(&bad, credentials, NULL, 5000), DPT_ESYS);
}

static uint16_t port;

static int connects(void *arg)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char c;

	(void)arg;
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		return DPT_ESYS;
	/* Held open until the test has looked at it. */
	(void)read(fd, &c, 1);
	close(fd);
	return 0;
}

/* The owner of the TCP socket from local port LOCAL to remote port
 * REMOTE, from the kernel's table (/proc/net/tcp), or -1. Both ports: a
 * local port alone may also be another socket's, on another address. */
static long socket_uid(unsigned local, unsigned remote)
{
	FILE *f = fopen("/proc/net/tcp", "r");
	char line[512];
	long uid = -1;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned lport, rport, u;

		if (sscanf(line,
			   " %*d: %*x:%x %*x:%x %*x %*x:%*x %*x:%*x %*x %u",
			   &lport, &rport, &u) == 3 &&
		    lport == local && rport == remote)
			uid = (long)u;
	}
	fclose(f);
	return uid;
}

static void connects_as_the_user(void **state)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int ls = socket(AF_INET, SOCK_STREAM, 0), cs, rc, status;
	pid_t runner;

	(void)state;
	if (geteuid() != 0)
		skip();
	assert_true(ls >= 0);
	assert_int_equal(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(ls, 1), 0);
	assert_int_equal(getsockname(ls, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	/* dpt__run_as waits for its child: run it from a process of its
	 * own, so that this one can accept. */
	runner = fork();
	assert_true(runner >= 0);
	if (runner == 0)
		_exit(dpt__run_as(&nobody, connects, NULL, 5000) ? 1 : 0);
	len = sizeof(a);
	cs = accept(ls, (struct sockaddr *)&a, &len);
	assert_true(cs >= 0);
	assert_int_equal(socket_uid(ntohs(a.sin_port), port), NOBODY);
	rc = (int)write(cs, "x", 1);
	assert_int_equal(rc, 1);
	close(cs);
	close(ls);
	assert_int_equal(waitpid(runner, &status, 0), runner);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(becomes_the_user),
		cmocka_unit_test(result_and_timeout),
		cmocka_unit_test(cannot_become),
		cmocka_unit_test(connects_as_the_user),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

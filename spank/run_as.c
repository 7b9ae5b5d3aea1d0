/*
 * Work done as the job's owner in a child of slurmstepd (spank/run_as.h).
 *
 * Why a child and no exec'd helper: the only work is a ZeroMQ exchange of
 * a few bytes through code already loaded; the child runs nothing of the
 * user's, holds no lock that slurmstepd's threads could have held at the
 * fork (glibc's malloc is reset for the child), and exits with _exit.
 */
#define _GNU_SOURCE /* setresuid, setresgid */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "clock.h"
#include "run_as.h"

/* The child's exit status when it could not become the user. */
#define CANNOT_DROP 100

/* Becomes U for good; false when any step fails or root is still within
 * reach. */
static bool become(const struct dpt__run_as_user *u)
{
	/* Before the credentials change: the job's owner must not ptrace
	 * or read the memory of a process that came from slurmstepd. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		return false;
	if (setgroups((size_t)u->ngroups, u->groups) != 0 ||
	    setresgid(u->gid, u->gid, u->gid) != 0 ||
	    setresuid(u->uid, u->uid, u->uid) != 0)
		return false;
	if (getuid() != u->uid || geteuid() != u->uid || getgid() != u->gid ||
	    getegid() != u->gid)
		return false;
	/* A dropped root cannot take it back. */
	return u->uid == 0 || setuid(0) != 0;
}

int dpt__run_as(const struct dpt__run_as_user *u, int (*fn)(void *arg),
		void *arg, int timeout_ms)
{
	int64_t deadline = dpt__now_ms() + timeout_ms;
	int status = 0;
	pid_t pid, got;

	pid = fork();
	if (pid < 0)
		return DPT_ESYS;
	if (pid == 0) {
		int rc;

		if (!become(u))
			_exit(CANNOT_DROP);
		rc = fn(arg);
		_exit(rc < 0 && rc > -CANNOT_DROP ? -rc : rc ? CANNOT_DROP : 0);
	}
	while ((got = waitpid(pid, &status, WNOHANG)) == 0 &&
	       dpt__now_ms() < deadline) {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = 2000000};
		nanosleep(&ts, NULL);
	}
	if (got == 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		return DPT_ETIMEDOUT;
	}
	if (got < 0 || !WIFEXITED(status) || WEXITSTATUS(status) == CANNOT_DROP)
		return DPT_ESYS;
	return -WEXITSTATUS(status);
}

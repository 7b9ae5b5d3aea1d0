/*
 * Work that slurmstepd (root) does on a job's behalf, done as the job's
 * owner instead: in a child process that has dropped to the owner's uid,
 * gid and supplementary groups before it does anything else.
 */
#ifndef DPT_SPANK_RUN_AS_H
#define DPT_SPANK_RUN_AS_H

#include <sys/types.h>

/* The user a child becomes: what Slurm says of the job's owner. */
struct dpt__run_as_user {
	uid_t uid;
	gid_t gid;
	const gid_t *groups; /* supplementary groups, NGROUPS of them */
	int ngroups;
};

/*
 * Forks a child that becomes U (setgroups, setgid, setuid, checked: it
 * exits without running FN when any of them fails or root could be
 * regained), is not dumpable (the owner cannot ptrace it or read its
 * memory), and exits with FN(ARG)'s result. The caller waits at most
 * TIMEOUT_MS, then kills it. Returns FN's result (0 or a dpt_error),
 * DPT_ETIMEDOUT, or DPT_ESYS when the child could not be started, could
 * not become U, or died.
 */
int dpt__run_as(const struct dpt__run_as_user *u, int (*fn)(void *arg),
		void *arg, int timeout_ms);

#endif

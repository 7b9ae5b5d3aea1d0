/*
 * `dptrain status JOBID`: who owns the job and whether it runs, from
 * Slurm, and its status files (doc/protocol.md, "Status requests"), read
 * from its owner's directory only and trusted only when its owner wrote
 * them (doc/RELIABILITY.md, "Status files and plots").
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "status.h"

#define SLURM_WAIT_MS 20000
#define RECORD_MAX    4096 /* a status file: an endpoint and three keys */

extern char **environ;

/* ------------------------------------------------------------ Slurm */

/* Run ARGV (a Slurm client) with its stdout into OUT (SIZE bytes, NUL
 * terminated), its stderr to /dev/null, for SLURM_WAIT_MS at most.
 * Returns 0 when it exited 0, else -1. */
static int slurm_answer(char *const argv[], char *out, size_t size)
{
	posix_spawn_file_actions_t fa;
	size_t len = 0;
	int fds[2], st, rc = -1;
	struct timespec t0, t;
	pid_t pid;

	out[0] = '\0';
	if (pipe(fds) != 0)
		return -1;
	fcntl(fds[0], F_SETFD, FD_CLOEXEC);
	fcntl(fds[1], F_SETFD, FD_CLOEXEC);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null",
					 O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null",
					 O_RDONLY, 0);
	st = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (st != 0) {
		close(fds[0]);
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = {.fd = fds[0], .events = POLLIN};
		long left;
		ssize_t n;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = SLURM_WAIT_MS - ((t.tv_sec - t0.tv_sec) * 1000 +
					(t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&p, 1, (int)left) == 0) {
			kill(pid, SIGKILL);
			break;
		}
		n = read(fds[0], out + len, size - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == size - 1) /* more than a job's line: not ours */
			break;
	}
	out[len] = '\0';
	close(fds[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		rc = 0;
	return rc;
}

/* A number of a line of Slurm's, or 0 ("N/A", "Unknown"). */
static long long field_num(const char *s, char **end)
{
	long long v;

	errno = 0;
	v = strtoll(s, end, 10);
	if (errno || *end == s || v < 0)
		v = 0;
	*end += strcspn(*end, "|\n");
	return v;
}

/* Fill R from TEXT, lines of "UID|STATE|SUBMIT|START[|RESTARTS]" (times
 * in seconds: SLURM_TIME_FORMAT=%s): the newest submission wins, so
 * that of accounting records of one id, the last job's is taken. */
static void parse_records(const char *text, struct dpt__job_record *r)
{
	for (const char *l = text; *l; l += strcspn(l, "\n"), l += !!*l) {
		struct dpt__job_record x = {.known = true, .restarts = -1};
		char *e;
		size_t n;

		x.uid = (uid_t)field_num(l, &e);
		if (e == l || *e != '|')
			continue;
		n = strcspn(e + 1, "|\n");
		x.running = n == 7 && !strncmp(e + 1, "RUNNING", 7);
		e += 1 + n;
		if (*e != '|')
			continue;
		x.submit = (time_t)field_num(e + 1, &e);
		if (*e != '|')
			continue;
		x.start = (time_t)field_num(e + 1, &e);
		if (*e == '|' && e[1] >= '0' && e[1] <= '9')
			x.restarts = (int)field_num(e + 1, &e);
		if (!r->known || x.submit >= r->submit)
			*r = x;
	}
}

bool dpt__job_record_read(const char *job, struct dpt__job_record *r)
{
	char *squeue[] = {"squeue",
			  "-h",
			  "-t",
			  "all",
			  "-j",
			  (char *)job,
			  "-O",
			  "UserId:|,State:|,SubmitTime:|,StartTime:|,"
			  "RestartCnt:|",
			  NULL};
	char *sacct[] = {"sacct", "-n",	       "-X", "-P",
			 "-j",	  (char *)job, "-o", "UID,State,Submit,Start",
			 NULL};
	char text[4096];

	memset(r, 0, sizeof(*r));
	/* Seconds since the epoch, not local time, whatever the site sets. */
	setenv("SLURM_TIME_FORMAT", "%s", 1);
	/* slurmctld knows the jobs that are queued, running, or ended less
	 * than MinJobAge (300 s by default) ago; accounting knows older ones
	 * where the site keeps it. */
	if (slurm_answer(squeue, text, sizeof(text)) == 0)
		parse_records(text, r);
	if (!r->known && slurm_answer(sacct, text, sizeof(text)) == 0)
		parse_records(text, r);
	return r->known;
}

/* ------------------------------------------------------------ owner */

int dpt__status_become(uid_t uid)
{
	struct passwd *pw = getpwuid(uid);

	if (!pw) {
		fprintf(stderr,
			"dptrain: the owner of the job (uid %u) is not in the "
			"user database: cannot read its status as that user\n",
			(unsigned)uid);
		return -1;
	}
	/* Everything from here on (the status files, the coordinator they
	 * name, the run's events) is the owner's to choose: it is read with
	 * the owner's rights, never root's. */
	if (initgroups(pw->pw_name, pw->pw_gid) != 0 ||
	    setgid(pw->pw_gid) != 0 || setuid(uid) != 0 ||
	    (uid != 0 && setuid(0) == 0)) {
		fprintf(stderr,
			"dptrain: cannot become '%s', the owner of the job: "
			"%s\n",
			pw->pw_name, strerror(errno));
		return -1;
	}
	return 0;
}

/* ------------------------------------------------------------ files */

/* Whether ST, of a status directory or file, is safe: owned by OWNER (or,
 * for a directory, by root), and writable by nobody else. Else says why
 * about PATH. */
static bool owned_safely(const struct stat *st, uid_t owner, bool dir,
			 const char *path)
{
	if (st->st_uid != owner && !(dir && st->st_uid == 0)) {
		fprintf(stderr,
			"dptrain: '%s' belongs to uid %u, not to uid %u: "
			"status files are read only from their owner's own "
			"directory (remove it, or set DPTRAIN_STATUS_DIR to "
			"one of yours)\n",
			path, (unsigned)st->st_uid, (unsigned)owner);
		return false;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		fprintf(stderr,
			"dptrain: '%s' is writable by its group or by others: "
			"anyone could plant a status file there (chmod go-w "
			"'%s')\n",
			path, path);
		return false;
	}
	return true;
}

/* Open the directory NAME below AT (AT_FDCWD: an absolute NAME), without
 * following a symbolic link at its last component, and check it. Returns
 * the descriptor, or -1 with errno (0: refused, and said why). */
static int open_dir(int at, const char *name, uid_t owner, const char *path)
{
	int fd = openat(at, name,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !owned_safely(&st, owner, true, path)) {
		close(fd);
		errno = 0;
		return -1;
	}
	return fd;
}

int dpt__status_dir_open(struct dpt__status_dir *d, bool own)
{
	const char *env = getenv("DPTRAIN_STATUS_DIR"), *home = NULL;
	struct passwd *pw = getpwuid(geteuid());
	char parent[PATH_MAX];
	int top;

	d->owner = geteuid();
	d->fd = -1;
	if (own && env && *env) {
		snprintf(d->path, sizeof(d->path), "%s", env);
		d->fd = open_dir(AT_FDCWD, env, d->owner, d->path);
		return d->fd < 0 ? -1 : 0;
	}
	/* Another user's job (root became its owner): the owner's home, not
	 * root's $HOME nor root's DPTRAIN_STATUS_DIR. */
	if (own)
		home = getenv("HOME");
	if (!home || !*home)
		home = pw ? pw->pw_dir : NULL;
	if (!home || snprintf(d->path, sizeof(d->path), "%s/.dptrain/jobs",
			      home) >= (int)sizeof(d->path)) {
		errno = ENOENT;
		return -1;
	}
	/* Both of ~/.dptrain and ~/.dptrain/jobs are the owner's (the
	 * coordinator makes them 0700), and neither is a symbolic link. */
	snprintf(parent, sizeof(parent), "%s/.dptrain", home);
	top = open_dir(AT_FDCWD, parent, d->owner, parent);
	if (top >= 0) {
		d->fd = open_dir(top, "jobs", d->owner, d->path);
		close(top);
	}
	return d->fd < 0 ? -1 : 0;
}

void dpt__status_dir_close(struct dpt__status_dir *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

int dpt__status_record_read(const struct dpt__status_dir *d, const char *job,
			    const char *suffix, char *buf, size_t size,
			    time_t *mtime)
{
	char name[64], path[PATH_MAX + 64];
	struct stat st;
	ssize_t n;
	int fd;

	snprintf(name, sizeof(name), "%s.%s", job, suffix);
	snprintf(path, sizeof(path), "%s/%s", d->path, name);
	/* O_NONBLOCK: a FIFO planted in its place cannot hang the open. */
	fd = openat(d->fd, name,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && (errno == ENOENT || errno == EACCES))
		return -1;
	if (fd < 0 || fstat(fd, &st) != 0) {
		fprintf(stderr, "dptrain: cannot open '%s': %s\n", path,
			errno == ELOOP ? "a symbolic link" : strerror(errno));
		goto refused;
	}
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1 ||
	    st.st_size >= (off_t)size || st.st_size >= RECORD_MAX) {
		fprintf(stderr,
			"dptrain: '%s' is not a status file (a regular file "
			"of one link and under %d bytes): ignored\n",
			path, RECORD_MAX);
		goto refused;
	}
	if (!owned_safely(&st, d->owner, false, path))
		goto refused;
	n = pread(fd, buf, size - 1, 0);
	if (n < 0) {
		fprintf(stderr, "dptrain: cannot read '%s': %s\n", path,
			strerror(errno));
		goto refused;
	}
	buf[n] = '\0';
	*mtime = st.st_mtime;
	close(fd);
	return 0;
refused:
	if (fd >= 0)
		close(fd);
	errno = 0;
	return -1;
}

void dpt__status_record_get(const char *text, const char *key, char *val,
			    size_t size)
{
	size_t kl = strlen(key);

	val[0] = '\0';
	for (const char *l = text; *l; l += strcspn(l, "\n"), l += !!*l)
		if (!strncmp(l, key, kl) && l[kl] == '=')
			snprintf(val, size, "%.*s",
				 (int)strcspn(l + kl + 1, "\n"), l + kl + 1);
}

bool dpt__status_endpoint_ok(const char *ep)
{
	const char *host, *colon;
	size_t n;

	/* tcp://HOST:PORT only: libzmq reads "tcp://PORT;HOST:PORT" as a
	 * source port to bind, and other transports are not the
	 * coordinator's. */
	if (strncmp(ep, "tcp://", 6))
		return false;
	host = ep + 6;
	colon = strrchr(host, ':');
	if (!colon || colon == host || !colon[1] ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
	    strlen(colon + 1) > 5)
		return false;
	n = (size_t)(colon - host);
	if (host[0] == '[')
		return host[n - 1] == ']' &&
		       strspn(host + 1, "0123456789abcdefABCDEF:.") == n - 2;
	return strspn(host,
		      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		      "0123456789.-") == n;
}

/*
 * srun side of the plugin: one dptrain-coordinator per job step.
 *
 * The coordinator runs as the user (srun does), listens on an ephemeral
 * port of every address (the nodes reach srun's host by the address that
 * Slurm gives them in SLURM_LAUNCH_NODE_IPADDR, which is how the task side
 * builds the endpoint), and holds a fresh per-step secret. It exits when
 * srun ends: srun stops it in slurm_spank_exit, and PR_SET_PDEATHSIG plus
 * --parent-pid cover an srun that is killed.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "plugin.h"
#include "setting_names.h"

#define START_TIMEOUT_MS 10000

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int make_secret(char *hex, size_t size)
{
	unsigned char raw[32];
	if (size < 2 * sizeof(raw) + 1 ||
	    getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return -1;
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

/*
 * Close every descriptor above stderr, in the child before exec. srun opens
 * its listening sockets (task I/O, slurmstepd's messages) and others without
 * FD_CLOEXEC: a coordinator that kept them would hold srun's ports after
 * srun is gone. The coordinator needs none of them: stdin and stdout are
 * /dev/null, stderr is srun's, and the endpoint comes back in a file.
 * close_range needs Linux 5.9; older kernels, or a seccomp filter that
 * refuses it, get the loop over /proc/self/fd, read with getdents64 because
 * opendir allocates, which a child of a threaded process must not do.
 */
static void close_inherited_fds(void)
{
	char buf[1024];
	long n;
	int dir;

#ifdef SYS_close_range
	if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0)
		return;
#endif
	dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return;
	while ((n = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			/* struct linux_dirent64: ino, off, reclen, type,
			 * name. */
			unsigned short reclen;
			const char *name = buf + off + 19;
			int fd = 0;

			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			off += reclen;
			if (*name < '0' || *name > '9')
				continue;
			for (; *name >= '0' && *name <= '9'; name++)
				fd = fd * 10 + (*name - '0');
			if (fd > STDERR_FILENO && fd != dir)
				close(fd);
		}
	}
	close(dir);
}

/* In the child, between fork and exec: only async-signal-safe calls. */
static void exec_coordinator(const char *path, char *const argv[], int devnull)
{
	sigset_t none;

	/* srun blocks SIGTERM and friends in its threads; a child inherits
	 * the mask and would ignore our stop request. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* Its own process group: a Ctrl-C at srun is srun's to handle. */
	setpgid(0, 0);
	dup2(devnull, STDIN_FILENO);
	dup2(devnull, STDOUT_FILENO);
	close_inherited_fds();
	execv(path, argv);
	_exit(127);
}

/* Read "tcp://HOST:PORT" from the endpoint file; returns the port or 0. */
static long read_port(const char *path)
{
	char buf[256], *colon, *end;
	long port;
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	colon = strrchr(buf, ':');
	if (!colon)
		return 0;
	port = strtol(colon + 1, &end, 10);
	return (*end || port <= 0 || port > 65535) ? 0 : port;
}

/* What srun knows of the step that the settings do not hold. */
struct step {
	const struct dpt__settings *s;
	uint32_t ntasks, jobid, stepid;
	const char *endpoint_file;
};

/*
 * The value srun passes for setting ID, in VALUE (SIZE bytes) or a
 * constant string; NULL: none. A merged setting's is its row's, in its
 * kind's form (dpt__settings_value); the step's own values, the site's
 * bind address as an endpoint and --dp-verbose as a level are a case
 * each here.
 */
static const char *coord_value(enum dpt__setting id, const struct step *st,
			       char *value, size_t size)
{
	switch (id) {
	case DPT_SET_WORLD_SIZE:
		snprintf(value, size, "%u", st->ntasks);
		return value;
	case DPT_SET_BIND:
		snprintf(value, size, "tcp://%s:*",
			 dpt__plugin.admin.bind_addr);
		return value;
	case DPT_SET_ENDPOINT_FILE:
		return st->endpoint_file;
	case DPT_SET_PARENT_PID:
		snprintf(value, size, "%ld", (long)getpid());
		return value;
	case DPT_SET_JOB_ID:
		snprintf(value, size, "%u", st->jobid);
		return value;
	case DPT_SET_STEP_ID:
		snprintf(value, size, "%u", st->stepid);
		return value;
	case DPT_SET_LOG_LEVEL:
		return st->s->verbose ? "info" : "warn";
	default:
		return dpt__settings_value(st->s, id, DPT_FORM_OPTION, value,
					   size);
	}
}

void dpt__srun_coord_argv(struct dpt__coord_argv *cmd,
			  const struct dpt__settings *s, uint32_t ntasks,
			  uint32_t jobid, uint32_t stepid,
			  const char *endpoint_file)
{
	const struct step st = {s, ntasks, jobid, stepid, endpoint_file};

	*cmd = (struct dpt__coord_argv){
		.v = {(char *)dpt__plugin.admin.coordinator}, .n = 1};
	for (int i = 0; i < DPT_SET_COUNT; i++) {
		char *flag = cmd->flags[cmd->nflags];
		char *value = cmd->values[cmd->nflags];
		const char *v;

		if (!dpt__setting_names[i].flag ||
		    !(v = coord_value(i, &st, value, sizeof(cmd->values[0]))))
			continue;
		if (v != value)
			snprintf(value, sizeof(cmd->values[0]), "%s", v);
		snprintf(flag, sizeof(cmd->flags[0]), "--%s",
			 dpt__setting_names[i].flag);
		cmd->nflags++;
		cmd->v[cmd->n++] = flag;
		cmd->v[cmd->n++] = value;
	}
}

/* The port the coordinator PID wrote to ENDPOINT_FILE once listening, or
 * 0 after a message: it exited, or did not listen within the timeout. */
static long await_port(pid_t pid, const char *endpoint_file)
{
	int status;
	long port;

	for (int waited = 0; waited < START_TIMEOUT_MS; waited += 10) {
		port = read_port(endpoint_file);
		if (port)
			return port;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			dpt__plugin.coordinator_pid = -1;
			slurm_error("dptrain: the coordinator '%s' exited at "
				    "start (status %d); its messages are "
				    "above",
				    dpt__plugin.admin.coordinator,
				    WIFEXITED(status) ? WEXITSTATUS(status)
						      : 128 + WTERMSIG(status));
			return 0;
		}
		sleep_ms(10);
	}
	slurm_error("dptrain: the coordinator did not start listening "
		    "within %d s",
		    START_TIMEOUT_MS / 1000);
	dpt__srun_stop_coordinator();
	return 0;
}

int dpt__srun_start_coordinator(spank_t sp, const struct dpt__settings *s)
{
	const struct dpt__admin *a = &dpt__plugin.admin;
	char secret[65], endpoint_file[320], portstr[8];
	struct dpt__coord_argv cmd;
	uint32_t ntasks = 0, jobid = 0, stepid = 0;
	long port;
	int devnull;
	pid_t pid;

	if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) !=
		    ESPANK_SUCCESS ||
	    ntasks == 0) {
		slurm_error("dptrain: cannot get the step's task count");
		return -1;
	}
	spank_get_item(sp, S_JOB_ID, &jobid);
	spank_get_item(sp, S_JOB_STEPID, &stepid);
	if (s->min_workers > (long)ntasks) {
		slurm_error("dptrain: --dp-min-workers=%ld is larger than the "
			    "step's %u tasks",
			    s->min_workers, ntasks);
		return -1;
	}
	if (access(a->coordinator, X_OK) != 0) {
		slurm_error("dptrain: cannot run the coordinator '%s': %s (ask "
			    "your administrator: coordinator= in "
			    "plugstack.conf)",
			    a->coordinator, strerror(errno));
		return -1;
	}
	if (make_secret(secret, sizeof(secret))) {
		slurm_error("dptrain: cannot create the step secret: %s",
			    strerror(errno));
		return -1;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(dpt__plugin.rundir, sizeof(dpt__plugin.rundir),
		 "%s/dptrain.%u.%u.XXXXXX", tmp && *tmp ? tmp : "/tmp", jobid,
		 stepid);
	if (!mkdtemp(dpt__plugin.rundir)) {
		slurm_error("dptrain: cannot create '%s': %s",
			    dpt__plugin.rundir, strerror(errno));
		dpt__plugin.rundir[0] = '\0';
		return -1;
	}
	snprintf(endpoint_file, sizeof(endpoint_file), "%s/endpoint",
		 dpt__plugin.rundir);
	dpt__srun_coord_argv(&cmd, s, ntasks, jobid, stepid, endpoint_file);

	devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull < 0) {
		slurm_error("dptrain: cannot open /dev/null: %s",
			    strerror(errno));
		return -1;
	}
	/* The secret reaches the coordinator through its environment, never
	 * its command line, which every user can read in ps. */
	if (setenv("DPTRAIN_SECRET", secret, 1)) {
		slurm_error("dptrain: cannot set DPTRAIN_SECRET: %s",
			    strerror(errno));
		close(devnull);
		return -1;
	}
	pid = fork();
	if (pid == 0)
		exec_coordinator(a->coordinator, cmd.v, devnull);
	close(devnull);
	if (pid < 0) {
		slurm_error("dptrain: cannot start the coordinator: %s",
			    strerror(errno));
		return -1;
	}
	dpt__plugin.coordinator_pid = pid;

	port = await_port(pid, endpoint_file);
	if (!port)
		return -1;
	snprintf(portstr, sizeof(portstr), "%ld", port);
	/* srun's own environment is what the tasks receive (spank_setenv
	 * is refused in this context). */
	if (setenv("DPTRAIN_COORDINATOR_PORT", portstr, 1) ||
	    setenv("DPTRAIN_SECRET", secret, 1)) {
		slurm_error("dptrain: cannot export the coordinator's "
			    "address to the tasks");
		dpt__srun_stop_coordinator();
		return -1;
	}
	if (s->verbose)
		slurm_info("dptrain: coordinator %ld listening on port %ld for "
			   "%u tasks",
			   (long)pid, port, ntasks);
	return 0;
}

void dpt__srun_stop_coordinator(void)
{
	pid_t pid = dpt__plugin.coordinator_pid;
	int status;

	if (pid > 0) {
		/* After a clean step the coordinator has exited already;
		 * otherwise ask, then insist. */
		kill(pid, SIGTERM);
		for (int i = 0; i < 200; i++) {
			if (waitpid(pid, &status, WNOHANG) == pid) {
				pid = -1;
				break;
			}
			sleep_ms(10);
		}
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
		dpt__plugin.coordinator_pid = -1;
	}
	if (dpt__plugin.rundir[0]) {
		char f[320];
		snprintf(f, sizeof(f), "%s/endpoint", dpt__plugin.rundir);
		unlink(f);
		rmdir(dpt__plugin.rundir);
		dpt__plugin.rundir[0] = '\0';
	}
}

/*
 * Two sources of the coordinator's loop (coordinator/service.h): signals
 * (a signalfd) and the exit of srun, its parent (a pidfd, else a look
 * every 200 ms). While the step runs, SIGUSR1 asks for the agreed stop and
 * the other signals or srun's exit shut it down; while it waits for its
 * tasks' exit reports (lingering), SIGUSR1 changes nothing and the others
 * end the wait.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "log.h"
#include "service.h"

#define PARENT_POLL_MS 200

static int open_signalfd(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* A descriptor that becomes readable when PID exits (Linux 5.3+), or -1:
 * then the loop checks PID at every turn. */
static int open_pidfd(long pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
	(void)pid;
	return -1;
#endif
}

bool dpt__process_gone(long pid)
{
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int dpt__signals_open(struct dpt__service *s)
{
	long parent = s->o.parent_pid;

	s->sfd = open_signalfd();
	if (!parent)
		return 0;
	s->child_of_parent = getppid() == (pid_t)parent;
	s->pidfd = open_pidfd(parent);
	if (dpt__process_gone(parent)) {
		dpt__error("parent process %ld is not running", parent);
		return DPT_ESYS;
	}
	return 0;
}

static void signals_ready(void *arg, const zmq_pollitem_t *items, size_t n,
			  int64_t now)
{
	struct dpt__service *s = arg;
	struct signalfd_siginfo si;
	char why[64];

	(void)items, (void)n;
	if (read(s->sfd, &si, sizeof(si)) != sizeof(si))
		return; /* nothing to act on */
	if (s->lingering) {
		/* A late SIGUSR1 asks for a stop that is done: the wait goes
		 * on. Any other signal ends it. */
		s->linger_over |= si.ssi_signo != SIGUSR1;
	} else if (si.ssi_signo == SIGUSR1) {
		/* scancel --signal=USR1 with --full or -b reaches the batch
		 * step, this process included: the same stop as a rank's. */
		dpt__coord_stop(s->coord, "the coordinator got SIGUSR1", now);
	} else {
		snprintf(why, sizeof(why), "the coordinator got signal %u",
			 si.ssi_signo);
		dpt__coord_shutdown(s->coord, why, now);
	}
}

struct dpt__loop_source dpt__signals_source(struct dpt__service *s)
{
	return (struct dpt__loop_source){
		.name = "signals",
		.item = dpt__loop_item(NULL, s->sfd, ZMQ_POLLIN),
		.ready = signals_ready,
		.arg = s,
	};
}

static size_t parent_prepare(void *arg, zmq_pollitem_t *items, size_t max,
			     int64_t now, int64_t *deadline)
{
	struct dpt__service *s = arg;

	(void)max;
	if (s->pidfd >= 0) {
		items[0] = dpt__loop_item(NULL, s->pidfd, ZMQ_POLLIN);
		return 1;
	}
	dpt__loop_deadline(deadline, now + PARENT_POLL_MS);
	return 0;
}

static void parent_ready(void *arg, const zmq_pollitem_t *items, size_t n,
			 int64_t now)
{
	struct dpt__service *s = arg;
	char why[96];

	if (n ? !(items[0].revents & ZMQ_POLLIN)
	      : !dpt__process_gone(s->o.parent_pid))
		return;
	if (s->lingering) {
		s->linger_over = true;
		return;
	}
	snprintf(why, sizeof(why),
		 "the coordinator's parent process %ld exited",
		 s->o.parent_pid);
	dpt__coord_shutdown(s->coord, why, now);
}

/* For a coordinator started with --parent-pid only. */
struct dpt__loop_source dpt__parent_source(struct dpt__service *s)
{
	return (struct dpt__loop_source){
		.name = "parent",
		.prepare = parent_prepare,
		.ready = parent_ready,
		.arg = s,
	};
}

/*
 * Failure semantics of the CPU backend, between real processes:
 *  - a rank killed with SIGKILL in the middle of allreduces: every
 *    survivor's collective returns DPT_EPEERLOST within 3 s, through
 *    shared memory, TCP, or both;
 *  - dpt__cpu_comm_abort from another thread ends a blocked collective
 *    with DPT_EGENERATION promptly, later calls fail the same way, and
 *    the peers that enter afterwards get DPT_EPEERLOST, not a hang;
 *  - a peer that stops (SIGSTOP) without closing anything: the others give
 *    up with DPT_EPEERLOST after the communicator's timeout;
 *  - none of it leaves a segment in /dev/shm.
 */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dptrain/dptrain.h>

#include "harness.h"
#include "worker/cpu_comm.h"

#define MAX_WORLD 8
#define COUNT	  (4u << 20) /* 16 MiB of float32 per allreduce */

enum kind { KILL, STOP, ABORT };

struct scenario {
	const char *what;
	enum kind kind;
	int world;
	uint32_t nodes[MAX_WORLD];
	int victim;	/* killed, stopped, or aborted by its own thread */
	int timeout_ms; /* the communicators' */
	double limit_s; /* survivors must return within this */
};

static const struct scenario scenarios[] = {
	{"SIGKILL, shared memory", KILL, 3, {0, 0, 0}, 2, 20000, 3.0},
	{"SIGKILL, TCP", KILL, 3, {0, 1, 2}, 1, 20000, 3.0},
	{"SIGKILL of a non-leader, mixed",
	 KILL,
	 4,
	 {0, 0, 1, 1},
	 1,
	 20000,
	 3.0},
	{"SIGKILL of a leader, mixed", KILL, 4, {0, 0, 1, 1}, 2, 20000, 3.0},
	{"SIGSTOP, shared memory, timeout 1 s", STOP, 2, {0, 0}, 1, 1000, 3.0},
	{"SIGSTOP, mixed, timeout 1 s", STOP, 3, {0, 0, 1}, 2, 1000, 3.0},
	{"abort, blocked in shared memory", ABORT, 2, {0, 0}, 0, 20000, 1.0},
	{"abort, blocked in TCP", ABORT, 2, {0, 1}, 0, 20000, 1.0},
	{"abort, mixed", ABORT, 3, {0, 0, 1}, 0, 20000, 1.0},
};

struct shared {
	int ready[MAX_WORLD];
	int rc[MAX_WORLD];	   /* of the collective that failed */
	int again[MAX_WORLD];	   /* of the next call */
	double entered[MAX_WORLD]; /* when the failing call began */
	double left[MAX_WORLD];	   /* when it returned */
	double event;		   /* kill, stop or abort */
};

struct run {
	const struct scenario *sc;
	struct shared *sh;
};

struct aborter {
	struct dpt__cpu_comm *c;
	struct shared *sh;
};

static void *abort_later(void *arg)
{
	struct aborter *a = arg;

	usleep(300000);
	a->sh->event = harness_now();
	dpt__cpu_comm_abort(a->c);
	return NULL;
}

static int rank_main(struct dpt__cpu_comm *c, int rank, void *arg)
{
	struct run *run = arg;
	const struct scenario *sc = run->sc;
	struct shared *sh = run->sh;
	float *buf = malloc(COUNT * sizeof(float));
	double give_up = harness_now() + 30;
	pthread_t thread;
	struct aborter ab = {.c = c, .sh = sh};
	int rc = 0, threaded = 0;

	alarm(60);
	if (!buf)
		return 1;
	for (size_t i = 0; i < COUNT; i++)
		buf[i] = 1.0f;
	dpt__cpu_comm_set_timeout(c, sc->timeout_ms);
	if (sc->kind == ABORT) {
		/* The victim blocks in an allreduce that the others enter
		 * only after it has been aborted. */
		if (rank == sc->victim) {
			threaded = !pthread_create(&thread, NULL, abort_later,
						   &ab);
		} else {
			usleep(800000);
		}
		sh->entered[rank] = harness_now();
		rc = dpt__cpu_allreduce(c, buf, buf, COUNT, DPT_FLOAT32,
					DPT_SUM);
	} else {
		if (dpt__cpu_barrier(c))
			return 1;
		sh->ready[rank] = 1;
		while (!rc && harness_now() < give_up) {
			sh->entered[rank] = harness_now();
			rc = dpt__cpu_allreduce(c, buf, buf, COUNT, DPT_FLOAT32,
						DPT_SUM);
		}
	}
	sh->left[rank] = harness_now();
	sh->rc[rank] = rc;
	sh->again[rank] = dpt__cpu_barrier(c);
	if (threaded)
		pthread_join(thread, NULL);
	free(buf);
	return 0;
}

static int all_ready(const struct shared *sh, int world)
{
	for (int r = 0; r < world; r++)
		if (!sh->ready[r])
			return 0;
	return 1;
}

/* Run one scenario; print its TAP line (number N); 0 when it passed. */
static int run_one(const struct scenario *sc, struct shared *sh, int n)
{
	static struct harness_shm_seen before;
	char session[64], why[256] = "", leaked[64];
	pid_t pids[MAX_WORLD];
	int status[MAX_WORLD];
	struct run run = {.sc = sc, .sh = sh};
	int expect = sc->kind == ABORT ? DPT_EGENERATION : DPT_EPEERLOST;

	memset(sh, 0, sizeof(*sh));
	snprintf(session, sizeof(session), "test-coll-fail-%ld-%d",
		 (long)getpid(), n);
	harness_shm_snapshot(&before);
	if (harness_spawn(sc->world, sc->nodes, session, rank_main, &run,
			  pids)) {
		snprintf(why, sizeof(why), "cannot start the ranks");
		goto out;
	}
	if (sc->kind != ABORT) {
		double end = harness_now() + 20;

		while (!all_ready(sh, sc->world) && harness_now() < end)
			usleep(1000);
		/* Let them get well into the allreduces. */
		usleep(200000);
		sh->event = harness_now();
		kill(pids[sc->victim], sc->kind == KILL ? SIGKILL : SIGSTOP);
	}
	if (sc->kind == STOP) {
		/* The stopped rank never exits by itself: end it once the
		 * others have given up on it. */
		double end = harness_now() + 10;
		int left = 0;

		while (left < sc->world - 1 && harness_now() < end) {
			usleep(1000);
			left = 0;
			for (int r = 0; r < sc->world; r++)
				left += r != sc->victim && sh->left[r] > 0;
		}
		kill(pids[sc->victim], SIGKILL);
	}
	harness_wait(sc->world, pids, status, 40);
	for (int r = 0; r < sc->world && !why[0]; r++) {
		double late;
		int rc = sh->rc[r];

		if (r == sc->victim && sc->kind != ABORT)
			continue;
		if (r != sc->victim && sc->kind == ABORT) {
			/* Entered after the abort: a quick EPEERLOST. */
			late = sh->left[r] - sh->entered[r];
			if (rc != DPT_EPEERLOST || late > 3.0)
				snprintf(why, sizeof(why),
					 "rank %d entering after the abort got "
					 "%s after %.2f s, want DPT_EPEERLOST",
					 r, dpt_err_name(rc), late);
			continue;
		}
		late = sh->left[r] - sh->event;
		if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]))
			snprintf(why, sizeof(why),
				 "rank %d did not exit cleanly (status 0x%x)",
				 r, status[r]);
		else if (rc != expect || late > sc->limit_s)
			snprintf(why, sizeof(why),
				 "rank %d got %s %.2f s after the event, "
				 "want %s within %.1f s",
				 r, dpt_err_name(rc), late,
				 dpt_err_name(expect), sc->limit_s);
		/* The timeout runs from a rank's last progress, which may
		 * come before the SIGSTOP by the time the victim was already
		 * late (long on a loaded machine): half is the bound. */
		else if (sc->kind == STOP &&
			 late < sc->timeout_ms / 1000.0 * 0.5)
			snprintf(why, sizeof(why),
				 "rank %d gave up after %.2f s, before the "
				 "%d ms timeout",
				 r, late, sc->timeout_ms);
		else if (sh->again[r] != expect)
			snprintf(why, sizeof(why),
				 "rank %d: the next call got %s, want %s", r,
				 dpt_err_name(sh->again[r]),
				 dpt_err_name(expect));
	}
	if (!why[0] && harness_shm_leaked(&before, leaked, sizeof(leaked)))
		snprintf(why, sizeof(why), "segment '%s' is left in /dev/shm",
			 leaked);
out:
	printf("%s %d - %s\n", why[0] ? "not ok" : "ok", n, sc->what);
	if (why[0])
		printf("# %s\n", why);
	for (int r = 0; r < sc->world; r++)
		if (sh->left[r] > 0)
			printf("# rank %d: %s after %.3f s\n", r,
			       dpt_err_name(sh->rc[r]),
			       sh->left[r] - (sh->event > sh->entered[r]
						      ? sh->event
						      : sh->entered[r]));
	fflush(stdout);
	return why[0] != 0;
}

int main(void)
{
	size_t n = sizeof(scenarios) / sizeof(scenarios[0]);
	struct shared *sh = harness_shared(sizeof(*sh));
	int failed = 0;

	if (!sh) {
		printf("1..0 # SKIP cannot map shared memory\n");
		return 0;
	}
	printf("1..%zu\n", n);
	for (size_t i = 0; i < n; i++)
		failed |= run_one(&scenarios[i], sh, (int)i + 1);
	return failed;
}

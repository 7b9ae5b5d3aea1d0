/*
 * The grow check (doc/shapes.md, "Growing back"): every --grow-check
 * while the step runs, whether a larger shape of --shapes could start now
 * and would end sooner by more than --grow-margin restarts. If so, the
 * step stops at the next agreed step, as at the end time, and its requeue
 * (walltime.c) gives the job that shape. A check asks slurmctld and reads
 * the run's events, which may take seconds: it runs in a thread of its
 * own, and the loop only starts it and reads its verdict.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "clock.h"
#include "log.h"
#include "service.h"
#include "shape_requeue.h"

/* While a check runs, the loop looks for its verdict this often. */
#define GROW_POLL_MS 200

struct dpt__grow {
	pthread_t thread;
	bool live;	  /* THREAD runs or is to be joined */
	atomic_bool done; /* THREAD has set RC and PLAN */
	struct dpt__shape_grow_in in;
	char run_uri[4096]; /* IN's, copied: the state machine's may move */
	struct dpt__shape_plan plan;
	int rc;
	int64_t next_ms; /* monotonic: the next check */
};

static void *check_main(void *arg)
{
	struct dpt__grow *g = arg;

	g->rc = dpt__shape_grow_check(&g->in, &g->plan);
	atomic_store(&g->done, true);
	return NULL;
}

struct dpt__shape_requeue_in dpt__shape_in(const struct options *o)
{
	return (struct dpt__shape_requeue_in){
		.job_id = (uint32_t)o->job_id,
		.shapes = &o->shapes,
		.global_batch = o->global_batch,
		.efficiency = (double)o->scaling_efficiency / 100.0,
		.grace = o->grace,
		.committed = -1,
		.max_changes = o->max_shape_changes,
		.min_interval_s = (double)o->min_shape_interval,
	};
}

int dpt__grow_start(struct dpt__service *s)
{
	const struct options *o = &s->o;
	struct dpt__grow *g;

	if (!o->shapes.n || !o->grow_check || !o->job_id || !s->walltime)
		return 0;
	/* A grow is a stop and a requeue: none where no requeue follows. */
	if (!o->requeue ||
	    (o->max_requeues >= 0 && o->restart_count >= o->max_requeues)) {
		dpt__info("no grow check: this step's stop would not be "
			  "requeued (--requeue, --max-requeues)");
		return 0;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return DPT_ENOMEM;
	g->in = (struct dpt__shape_grow_in){
		.rq = dpt__shape_in(o),
		.margin = (double)o->grow_margin,
	};
	g->next_ms = dpt__now_ms() + o->grow_check * 1000;
	s->grow = g;
	return 0;
}

void dpt__grow_free(struct dpt__service *s)
{
	if (!s->grow)
		return;
	if (s->grow->live)
		pthread_join(s->grow->thread, NULL);
	free(s->grow);
	s->grow = NULL;
}

/* Start a check, with the run's events where the state machine knows
 * them (a program without dptrain checkpoints has none: no check). */
static void start_check(struct dpt__service *s, struct dpt__grow *g)
{
	const char *run = dpt__coord_kv_value(s->coord, DPT_KV_RUN);
	int rc;

	if (!run || !*run ||
	    (size_t)snprintf(g->run_uri, sizeof(g->run_uri), "%s", run) >=
		    sizeof(g->run_uri)) {
		dpt__info("no grow check: the run's events are unknown yet");
		return;
	}
	g->in.rq.run_uri = g->run_uri;
	atomic_store(&g->done, false);
	rc = pthread_create(&g->thread, NULL, check_main, g);
	if (rc) {
		dpt__warn("no grow check: cannot start its thread: %s",
			  strerror(rc));
		return;
	}
	g->live = true;
}

/* The verdict of a check that ended: a grow stops the step. */
static void take_verdict(struct dpt__service *s, struct dpt__grow *g,
			 int64_t now)
{
	pthread_join(g->thread, NULL);
	g->live = false;
	if (g->rc) {
		dpt__info("no grow: %s", g->plan.msg);
		return;
	}
	if (s->stopped || dpt__coord_stop_sent(s->coord))
		return; /* a stop came first: it chooses at its requeue */
	s->shape = g->plan;
	s->growing = true;
	s->stopped = true;
	dpt__coord_stop(s->coord, g->plan.msg, now);
}

static size_t grow_prepare(void *arg, zmq_pollitem_t *items, size_t max,
			   int64_t now, int64_t *deadline)
{
	struct dpt__service *s = arg;
	struct dpt__grow *g = s->grow;

	(void)items, (void)max;
	if (g->live)
		dpt__loop_deadline(deadline, now + GROW_POLL_MS);
	else if (!s->stopped)
		dpt__loop_deadline(deadline, g->next_ms);
	return 0;
}

static void grow_ready(void *arg, const zmq_pollitem_t *items, size_t n,
		       int64_t now)
{
	struct dpt__service *s = arg;
	struct dpt__grow *g = s->grow;

	(void)items, (void)n;
	if (g->live) {
		if (atomic_load(&g->done))
			take_verdict(s, g, now);
		return;
	}
	if (now < g->next_ms || s->stopped || dpt__coord_stop_sent(s->coord))
		return;
	g->next_ms = now + s->o.grow_check * 1000;
	start_check(s, g);
}

struct dpt__loop_source dpt__grow_source(struct dpt__service *s)
{
	return (struct dpt__loop_source){
		.name = "grow",
		.prepare = grow_prepare,
		.ready = grow_ready,
		.arg = s,
		.every_turn = true,
	};
}

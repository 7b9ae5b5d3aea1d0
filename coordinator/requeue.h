/*
 * The requeue guard (doc/walltime.md, "Requeue guard"): whether a stopped
 * step's job goes back to the queue, is held there, or ends. The decision
 * is pure, so that a unit test can walk every case; walltime.c carries it
 * out through libslurm.
 */
#ifndef DPT_COORDINATOR_REQUEUE_H
#define DPT_COORDINATOR_REQUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "shape.h"
#include "shape_requeue.h"

/* What is known when the step has stopped cleanly. */
struct dpt__requeue_facts {
	uint32_t job_id;
	long restart_count;    /* requeues of the job so far */
	long max_requeues;     /* -1: no cap */
	const char *resumed;   /* DPT_KV_RESUMED's value, or NULL */
	const char *committed; /* DPT_KV_COMMITTED's value, or NULL */
	long nodes_min;	       /* --nodes: the range given back after */
	long nodes_max;	       /* the requeue; 0: none */
	const char *run_uri;   /* DPT_KV_RUN's value, or NULL */
	/* --shapes: the sizes the requeued job chooses from (shapes->n 0:
	 * none), and what the choice reads (coordinator/shape_requeue.h;
	 * run_uri and committed are filled at the stop). */
	struct dpt__shape_requeue_in shape_in;
	/* In: a grow's shape, chosen while the step ran (chosen false:
	 * choose at the stop); out: what the requeue gave the job. */
	struct dpt__shape_plan *shape;
};

enum dpt__requeue_verdict {
	DPT_RQ_REQUEUE, /* back to the queue: it resumes when it starts */
	DPT_RQ_CAPPED,	/* requeued max_requeues times already: it ends */
	DPT_RQ_HOLD,	/* no progress: requeued held, released by hand */
};

/* The verdict for F, and in MSG (SIZE bytes) the sentence that says it
 * with the last good step, for the job's output and its comment. */
enum dpt__requeue_verdict
dpt__requeue_decide(const struct dpt__requeue_facts *f, char *msg, size_t size);

#endif

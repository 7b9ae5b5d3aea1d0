/*
 * A job's next size (doc/shapes.md, "The decision" and "Growing back"):
 * the facts from the run's events and from Slurm, the choice at a stop or
 * the grow check while it runs, the pending job's update. Run as the
 * job's user; each call asks slurmctld, and may take seconds.
 */
#ifndef DPT_COORDINATOR_SHAPE_REQUEUE_H
#define DPT_COORDINATOR_SHAPE_REQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shape.h"

struct dpt__shape_requeue_in {
	uint32_t job_id;
	const struct dpt__shapes *shapes; /* --shapes */
	long global_batch;     /* --global-batch, 0: none (the program may
				* declare one too) */
	double efficiency;     /* --scaling-efficiency, 0 to 1 */
	long grace;	       /* --grace, seconds */
	const char *run_uri;   /* the run's, NULL: no events */
	long committed;	       /* the step resumed from; -1: none */
	long max_changes;      /* max_shape_changes; < 0: no cap */
	double min_interval_s; /* min_shape_interval */
};

/* What a grow check reads besides: the site's margin. */
struct dpt__shape_grow_in {
	struct dpt__shape_requeue_in rq; /* committed unused: the events' */
	double margin;			 /* grow_margin, restarts */
};

/* The choice, and the sentence users see: "requeued as 1 node x 2 GPUs:
 * starts now, ..." or why the job keeps its request. */
struct dpt__shape_plan {
	bool chosen;
	bool changed; /* the shape is not the job's */
	struct dpt__shape shape;
	char msg[512];
};

/*
 * dpt__shape_plan - choose IN's job's shape into *P. Asked before the
 * requeue, while the job still holds its resources until its end:
 * Slurm's estimates for a pending job count its own planned start against
 * its other shapes (doc/shapes.md). Returns 0, or -1 (P->msg says why).
 */
int dpt__shape_plan(const struct dpt__shape_requeue_in *in,
		    struct dpt__shape_plan *p);

/*
 * dpt__shape_grow_check - while IN's job runs: whether a larger shape of
 * its --shapes starts now (the extra nodes or GPUs free beside what it
 * holds) and ends sooner by the margin, into *P (chosen, and the sentence
 * "growing to ..."). Returns 0 for a grow, or -1 with why not in P->msg.
 */
int dpt__shape_grow_check(const struct dpt__shape_grow_in *in,
			  struct dpt__shape_plan *p);

/*
 * dpt__shape_apply - after the requeue, update job JOB_ID, pending, to
 * P's shape with P's sentence in its Comment. Returns 0, or -1 with
 * P->msg saying why the job keeps its request.
 */
int dpt__shape_apply(uint32_t job_id, struct dpt__shape_plan *p);

#endif

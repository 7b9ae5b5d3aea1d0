/*
 * The size a stopped job is requeued at, and whether a running one grows
 * (doc/shapes.md, "The decision" and "Growing back"). Pure: facts in,
 * verdict out, so that a unit test walks every case; the coordinator
 * gathers the facts (Slurm's start estimates, the run's measured rates)
 * and carries the verdict out.
 */
#ifndef DPT_COORDINATOR_SHAPE_CHOICE_H
#define DPT_COORDINATOR_SHAPE_CHOICE_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "shape.h"

/* The restart cost assumed until the run has measured one or a start. */
#define DPT_SHAPE_RESTART_S 120.0
/* Slurm's part of a restart (the requeue delay, scheduling, the launch)
 * until the run has measured a restart: bench/restart.sh measured about
 * 6 s on the test cluster; a busy controller takes longer. */
#define DPT_SHAPE_REQUEUE_S 15.0

struct dpt__shape_facts {
	const struct dpt__shape *shapes; /* dpt__shapes_expand's */
	int n;
	/* When Slurm would start each shape, seconds from now; < 0: no
	 * estimate (refused or failed), the shape is left out. */
	const double *start_in;
	const struct dpt__rate *rates; /* one a world measured */
	int nrates;
	double efficiency; /* scaling_efficiency, (0, 1] */
	double restart_s;  /* R measured; <= 0: DPT_SHAPE_RESTART_S */
	double work;	   /* steps left; < 0: unknown (no total_steps) */
	double limit_s;	   /* time limit less the grace; <= 0: none */
	int current;	   /* index of the job's shape; -1: none */
	/* The job runs at the current shape (a grow check): it pays no
	 * start and no restart to go on. */
	bool running;
};

/* What the decision worked out for one shape. */
struct dpt__shape_estimate {
	double rate;   /* steps a second, measured or scaled */
	bool measured; /* the run trained at this world */
	double starts; /* s from now it would start; < 0: no estimate */
	long stops;    /* walltime stops still to come, k(s) */
	double finish; /* s from now; < 0: no estimate */
};

/*
 * dpt__shape_rate - steps a second at WORLD: measured when RATES has it,
 * else scaled from the measured world nearest to it (in their ratio; at
 * equal distance the larger): down linearly, up with EFFICIENCY per
 * doubling. 0 when nothing was measured. *MEASURED says which.
 */
double dpt__shape_rate(const struct dpt__rate *rates, int nrates, long world,
		       double efficiency, bool *measured);

/*
 * dpt__shape_choose - fill EST (F->n entries) and return the index of the
 * shape that ends first (without work: that starts first, then trains
 * fastest); a tie within a second goes to the current shape, then to the
 * larger world. -1 when no shape has an estimate and a rate.
 */
int dpt__shape_choose(const struct dpt__shape_facts *f,
		      struct dpt__shape_estimate *est);

/* What a size change may do: the site's bounds and the run's history. */
struct dpt__shape_bounds {
	double margin;	       /* grow_margin: restarts the gain must beat */
	double since_change_s; /* since the last size change (HUGE_VAL: none) */
	double min_interval_s; /* min_shape_interval */
	long changes;	       /* size changes so far */
	long max_changes;      /* max_shape_changes; < 0: no cap */
};

/*
 * dpt__shape_bounded - whether B forbids any size change now: the run
 * changed size max_changes times, or its last change is less than
 * min_interval_s old; the reason in WHY (SIZE bytes).
 * Checked before a grow and before the choice at a stop.
 */
bool dpt__shape_bounded(const struct dpt__shape_bounds *b, char *why,
			size_t size);

/*
 * dpt__shape_grow - for a running job (F->running, F->current set): the
 * index of the larger shape to grow to, the one that ends first among
 * those that end sooner than the current by more than MARGIN restarts;
 * else -1 with the reason in WHY (SIZE bytes). EST as dpt__shape_choose.
 */
int dpt__shape_grow(const struct dpt__shape_facts *f,
		    const struct dpt__shape_bounds *b,
		    struct dpt__shape_estimate *est, char *why, size_t size);

/*
 * dpt__shape_verdict - the sentence users see for CHOSEN (srun's stderr,
 * the job's Comment, dptrain status), times local from NOW: "requeued as
 * 1 node x 3 GPUs: starts now, ends about 14:20; 2 nodes x 8 GPUs would
 * start about 18:00". The alternative named is the largest world not
 * chosen that has an estimate.
 */
void dpt__shape_verdict(const struct dpt__shape_facts *f,
			const struct dpt__shape_estimate *est, int chosen,
			time_t now, char *msg, size_t size);

/*
 * dpt__shape_grow_verdict - the sentence of a grow to TO that
 * dpt__shape_grow chose: "growing to 2 nodes x 8 GPUs: it can start now
 * and ends about 14:20; 1 node x 8 GPUs would end about 18:00".
 */
void dpt__shape_grow_verdict(const struct dpt__shape_facts *f,
			     const struct dpt__shape_estimate *est, int to,
			     time_t now, char *msg, size_t size);

#endif

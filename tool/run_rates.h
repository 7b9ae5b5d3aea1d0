/*
 * What a run's events say of its speed at each world size and of the cost
 * of its restarts (doc/shapes.md, "The decision"): the facts the size
 * decision starts from, and what `dptrain status` shows of them.
 *
 * Speed: the run's time is cut into segments, one a generation, from its
 * first progress point (a `log` or `commit` line) to its last; a world's
 * rate is the steps of all its segments over their seconds. A restart:
 * from a `stop` line to the last line of that coordinator, plus from the
 * next coordinator's `start` to its first progress point.
 */
#ifndef DPT_TOOL_RUN_RATES_H
#define DPT_TOOL_RUN_RATES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "event_line.h"
#include "shape.h"

#define DPT_RUN_RATES_MAX 32 /* world sizes kept (the first ones seen) */
/* A segment shorter than this says nothing: the progress points of a
 * run's log are up to 2 s late (doc/checkpoint-format.md, "Events"). */
#define DPT_RUN_RATES_MIN_S 10.0

struct dpt__run_rates {
	struct {
		long world;
		double steps, seconds;
	} w[DPT_RUN_RATES_MAX];
	int n;
	double restart_s;      /* the last restart measured; 0: none */
	uint64_t total_steps;  /* the program's declared total; 0: none */
	uint64_t global_batch; /* its declared global batch; 0: none */
	/* The open segment: its world (0: none) and progress points. */
	long world;
	int64_t s_first, s_last;
	double t_first, t_last;
	bool has_point;
	/* The restart being measured: its stop, its coordinator's last line,
	 * the next start; 0: not yet. */
	double t_stop, t_down, t_start;
	double t_line; /* the last line's time */
	/* The last start's time to its first progress point (the program's
	 * start, its load, a step), and that start's time until then. */
	double startup_s, t_begin;
	int64_t step; /* the newest step reached; -1: none */
	/* The run's changes of size (`shape` lines that changed it), the
	 * time of the last (0: none), and the last sentence said. */
	long shape_changes;
	double t_shape_change;
	char shape_why[256];
};

void dpt__run_rates_init(struct dpt__run_rates *r);
/* Fold one line of the run's events, in their order. */
void dpt__run_rates_add(struct dpt__run_rates *r,
			const struct dpt__event_line *l);
/* The measured rates into OUT (at most MAX), the open segment included;
 * returns how many. */
int dpt__run_rates_get(const struct dpt__run_rates *r, struct dpt__rate *out,
		       int max);

/* What `dptrain status` shows of R: into O (keys "rates", a list of
 * {"world", "steps_per_s"}, "restart_s", null when unmeasured, and
 * "shape", the last size verdict or null) when O is set, else as lines to
 * F (none when nothing was measured or said). */
void dpt__run_rates_show(FILE *f, json_t *o, const struct dpt__run_rates *r);

#endif

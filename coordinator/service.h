/*
 * The coordinator process's parts, shared by the sources of its loop
 * (doc/architecture.md, "The coordinator's loop"): its options, sockets,
 * state machine, end time, metrics and reporter. main.c builds it; each
 * source's file makes its source from it.
 */
#ifndef DPT_COORDINATOR_SERVICE_H
#define DPT_COORDINATOR_SERVICE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "coord.h"
#include "events.h"
#include "loop.h"
#include "metrics.h"
#include "options.h"
#include "shape_requeue.h"
#include "walltime.h"
#include "wire.h"
#include "zap.h"

#define DPT_ENDPOINT_MAX 512

/* The reporter of the state machine (report.c): the run's events, at each
 * commit the job's Comment, and the counters of the metrics page. */
struct dpt__reporter {
	struct dpt__events *events; /* NULL: none could be opened */
	struct dpt__walltime *walltime;
	struct dpt__coord *coord;
	uint32_t restarts;
	long grace;
	struct dpt__metrics_counters counters;
};

struct dpt__service {
	struct options o;
	struct dpt__curve_keys keys;
	struct dpt__zap zap;
	void *ctx, *router, *mon;
	int sfd, pidfd;	      /* -1: none */
	bool child_of_parent; /* srun forked us (--parent-pid) */
	struct dpt__coord *coord;
	struct dpt__walltime *walltime;
	struct dpt__metrics_server *metrics;
	int metrics_port; /* -1: none */
	struct dpt__reporter rep;
	char endpoint[DPT_ENDPOINT_MAX]; /* what workers connect to */
	char status_dir[PATH_MAX];	 /* "": no status files */
	uint64_t started_ms;		 /* wall clock */
	int exit_code;			 /* the process's, once the loop ends */
	int64_t linger_until;		 /* monotonic ms */
	bool backlog;	  /* the router left messages unread this turn */
	bool stopped;	  /* the end time's (or a grow's) stop was asked */
	bool lingering;	  /* waiting for the tasks' exit reports */
	bool linger_over; /* a signal, srun's exit or the time ended it */
	/* --shapes: the grow check (NULL: none); whether the stop is its
	 * grow to SHAPE; a grow's shape, then what the requeue gave. */
	struct dpt__grow *grow;
	bool growing;
	struct dpt__shape_plan shape;
	/* chosen: this start is at SHAPE because a grow's fallback job set
	 * the job back (doc/shapes.md), MSG saying why. */
	struct dpt__shape_plan fell_back;
};

/* router.c: the CURVE ROUTER, its monitor and the endpoint. */
int dpt__router_open(struct dpt__service *s);
void dpt__router_send_init(struct dpt__service *s,
			   struct dpt__coord_sender *sender);
int dpt__endpoint_file_write(const char *path, const char *endpoint);
void dpt__endpoint_file_remove(const struct options *o, bool parent_dir);
struct dpt__loop_source dpt__monitor_source(struct dpt__service *s);
struct dpt__loop_source dpt__router_source(struct dpt__service *s);

/* signals.c: signals and srun's exit. */
int dpt__signals_open(struct dpt__service *s);
bool dpt__process_gone(long pid);
struct dpt__loop_source dpt__signals_source(struct dpt__service *s);
struct dpt__loop_source dpt__parent_source(struct dpt__service *s);

/* walltime.c: the job's end time, checked every second. */
struct dpt__loop_source dpt__walltime_source(struct dpt__service *s);

/* shape_grow.c: with --shapes, the grow check while the step runs; none
 * (S->grow NULL) without --shapes, --grow-check or a job. The choice's
 * inputs from O, for the grow check and the requeue at a stop. */
int dpt__grow_start(struct dpt__service *s);
struct dpt__shape_requeue_in dpt__shape_in(const struct options *o);
void dpt__grow_free(struct dpt__service *s);
struct dpt__loop_source dpt__grow_source(struct dpt__service *s);

/* status_file.c: JOB.live while the step runs, JOB.run after it. */
void dpt__status_file_write(struct dpt__service *s);
void dpt__status_file_end(struct dpt__service *s);

/* report.c: the state machine's notes, and the metrics page. */
void dpt__report_note(void *arg, const struct dpt__coord_note *n);
int dpt__report_metrics_page(void *arg, struct dpt__buf *out);

#endif

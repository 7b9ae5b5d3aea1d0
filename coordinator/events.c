/*
 * The run's events: see events.h and doc/checkpoint-format.md.
 */
#include "config.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dptrain/error.h>

#include "clock.h"
#include "event_log.h"
#include "events.h"
#include "log.h"
#include "scalars.h"
#include "storage/storage.h"
#include "wire.h"

#define LINE_MAX_BYTES 2048

struct dpt__events {
	uint32_t job_id, restarts;
	uint64_t started_ms;
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	/* Under LOCK. */
	bool quit;
	char *run;	       /* the run's URI, or NULL */
	struct dpt__buf queue; /* lines not written yet */
	size_t queued;	       /* lines in QUEUE */
	size_t dropped;	       /* lines lost to the queue's cap */
	/* The thread's own. */
	struct dpt__storage *st;		/* the run's, once there */
	struct dpt__storage_appender *appender; /* to the object of PART */
	uint64_t appended;			/* bytes in that object */
	uint32_t part; /* own objects: the object's part, 0: the first */
	bool warned;
};

/* The note a line is written from, and what the coordinator adds. */
struct line {
	const struct dpt__coord_note *n;
	uint32_t job_id, restarts;
	uint64_t time_ms;
};

/* Field F of event E's line (a dpt__event_value_fn): which member of the
 * note each field of common/event_log.h is written from. No default: a
 * field added there does not compile until it has its source here. */
static void value_of(void *arg, enum dpt__event e, enum dpt__event_field f,
		     struct dpt__event_value *v)
{
	const struct line *l = arg;
	const struct dpt__coord_note *n = l->n;

	switch (f) {
	case DPT_EVF_TIME:
		v->d = (double)l->time_ms / 1000.0;
		break;
	case DPT_EVF_EVENT:
		v->s = dpt__event_name(e);
		break;
	case DPT_EVF_JOB:
		v->u = l->job_id;
		break;
	case DPT_EVF_RESTARTS:
		v->u = l->restarts;
		break;
	case DPT_EVF_EXPECTED: /* start: the world size expected */
	case DPT_EVF_WORLD:
		v->u = n->world;
		break;
	case DPT_EVF_END_TIME:
		v->i = n->end_time;
		break;
	case DPT_EVF_GENERATION:
		v->u = n->generation;
		break;
	case DPT_EVF_RANK:
		v->u = n->rank;
		break;
	case DPT_EVF_TASK:
		v->u = n->task;
		break;
	case DPT_EVF_HOST:
		v->s = n->host;
		break;
	case DPT_EVF_NODE:
		v->u = n->node;
		break;
	case DPT_EVF_NODES:
		v->u = n->nodes;
		break;
	case DPT_EVF_BACKEND:
		v->s = n->backend;
		break;
	case DPT_EVF_VERDICT: /* requeue: the guard's verdict */
		v->s = n->reason;
		break;
	case DPT_EVF_REASON: /* requeue: its text; else a code or a text */
		v->s = e == DPT_EV_REQUEUE ? n->why : n->reason;
		break;
	case DPT_EVF_WHY:
		v->s = n->why;
		break;
	case DPT_EVF_STEP:
	case DPT_EVF_COMMITTED:
	case DPT_EVF_TOTAL_STEPS:
		v->u = e == DPT_EV_LOG ? n->scalars->step : n->step;
		break;
	case DPT_EVF_GLOBAL_BATCH: /* carried in step, as total_steps */
		v->u = n->step;
		break;
	case DPT_EVF_BYTES:
		v->u = n->bytes;
		break;
	case DPT_EVF_SECONDS:
		v->d = n->seconds;
		break;
	case DPT_EVF_BANDWIDTH: /* null without a duration */
		v->d = n->seconds > 0 ? (double)n->bytes / n->seconds : NAN;
		break;
	case DPT_EVF_SCALARS:
		v->scalars = n->scalars;
		break;
	case DPT_EVF_STATUS:
		v->i = n->status;
		break;
	case DPT_EVF_SHAPE:
		v->s = n->shape;
		break;
	}
}

int dpt__events_format(const struct dpt__coord_note *n, uint32_t job_id,
		       uint32_t restarts, uint64_t time_ms,
		       struct dpt__buf *out)
{
	struct line l = {n, job_id, restarts, time_ms};

	if ((unsigned)n->event >= DPT_EV_COUNT ||
	    (n->event == DPT_EV_LOG && !n->scalars))
		return 1;
	return dpt__event_format(out, n->event, value_of, &l);
}

void dpt__events_note(void *arg, const struct dpt__coord_note *n)
{
	struct dpt__events *ev = arg;
	struct dpt__buf line;
	int rc;

	if (!ev)
		return;
	dpt__buf_init(&line, LINE_MAX_BYTES);
	rc = dpt__events_format(n, ev->job_id, ev->restarts, dpt__wall_ms(),
				&line);
	pthread_mutex_lock(&ev->lock);
	if (rc == 1 && !ev->run && n->reason && n->reason[0]) {
		ev->run = strdup(n->reason);
	} else if (rc == 0) {
		if (ev->queued >= DPT_EVENTS_QUEUE_MAX ||
		    dpt__buf_append(&ev->queue, line.data, line.len))
			ev->dropped++;
		else
			ev->queued++;
	}
	pthread_cond_signal(&ev->wake);
	pthread_mutex_unlock(&ev->lock);
	dpt__buf_release(&line);
}

const char *dpt__events_run(struct dpt__events *ev)
{
	const char *run;

	pthread_mutex_lock(&ev->lock);
	run = ev->run;
	pthread_mutex_unlock(&ev->lock);
	return run;
}

/* One warning for the life of the coordinator: events never fail a job.
 * WHY is the storage's message (kept, not shown: dpt__log_quiet), or the
 * error RC when it said none. */
static void warn_once(struct dpt__events *ev, const char *run, int rc)
{
	const char *why = dpt_last_error();

	if (ev->warned)
		return;
	ev->warned = true;
	dpt__warn("cannot write the run's events to '%s': %s (training goes "
		  "on; the events are kept and tried again)",
		  run, why[0] ? why : dpt_strerror(rc));
}

/* Whether each of this run's coordinators writes an object of its own:
 * where an append rewrites the whole object (no DPT__STORAGE_CAP_APPEND),
 * so that coordinators of the run do not replace each other's lines. */
static bool own_objects(const struct dpt__events *ev)
{
	return ev->st && !(dpt__storage_caps(ev->st) & DPT__STORAGE_CAP_APPEND);
}

/* Where the lines go (doc/checkpoint-format.md, "Events"): the run's one
 * events.jsonl that every coordinator appends to, or this coordinator's
 * own object under events/, part PART. The part's "~NNNNNN" sorts after
 * the first object's ".jsonl" ('~' is the largest printable byte) and
 * the parts in their order. */
static void events_key(const struct dpt__events *ev, char *key, size_t size)
{
	if (!own_objects(ev))
		snprintf(key, size, "events.jsonl");
	else if (ev->part)
		snprintf(key, size,
			 "events/%013" PRIu64 "-%" PRIu32 "-%" PRIu32
			 "~%06" PRIu32 ".jsonl",
			 ev->started_ms, ev->job_id, ev->restarts, ev->part);
	else
		snprintf(key, size,
			 "events/%013" PRIu64 "-%" PRIu32 "-%" PRIu32 ".jsonl",
			 ev->started_ms, ev->job_id, ev->restarts);
}

/* The appender for LEN more bytes: the run's storage opened on first use
 * (0, or 1 while the run's root is not there yet), and with own objects a
 * new part past DPT_EVENTS_REWRITE_PART_MAX, so that a run that logs
 * every step neither rewrites a growing object every interval nor
 * reaches the appender's cap. Returns 0, 1, or a dpt_error. */
static int appender_for(struct dpt__events *ev, const char *run, size_t len)
{
	char key[96];
	int rc;

	if (!ev->st) {
		struct dpt__storage_opts so;

		dpt__storage_opts_init(&so);
		/* A slow store delays only this thread, but the exit waits
		 * for it: give up early, the next run writes its own. */
		so.retries = 1;
		so.connect_timeout_ms = 5000;
		so.stall_timeout_ms = 10000;
		/* The library makes the run's root with its first save: until
		 * then the lines wait, without a warning. */
		so.no_create = true;
		rc = dpt__storage_open(run, &so, &ev->st);
		if (rc)
			return rc == DPT_ENOENT ? 1 : rc;
	}
	if (ev->appender && own_objects(ev) && ev->appended &&
	    ev->appended + len > DPT_EVENTS_REWRITE_PART_MAX) {
		dpt__storage_appender_destroy(&ev->appender);
		ev->part++;
		ev->appended = 0;
	}
	if (ev->appender)
		return 0;
	events_key(ev, key, sizeof(key));
	return dpt__storage_appender_new(ev->st, key, &ev->appender);
}

/* Appends LINES to the run's events. Returns 0, or -1 to try again
 * later. The storage's messages are kept for the one warning. */
static int write_lines(struct dpt__events *ev, const char *run,
		       const char *lines, size_t len)
{
	int rc;

	dpt__log_quiet(true);
	dpt_last_error_clear();
	rc = appender_for(ev, run, len);
	if (rc == 0)
		rc = dpt__storage_append(ev->appender, lines, len);
	if (rc == 0)
		ev->appended += len;
	else if (rc != 1)
		warn_once(ev, run, rc);
	dpt__log_quiet(false);
	return rc ? -1 : 0;
}

/* Waits on EV's condition for up to SECONDS (EV's lock held); 0 when
 * woken, else pthread_cond_timedwait's error (ETIMEDOUT). */
static int wait_s(struct dpt__events *ev, int seconds)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += seconds;
	return pthread_cond_timedwait(&ev->wake, &ev->lock, &until);
}

static void *writer_main(void *arg)
{
	struct dpt__events *ev = arg;
	uint64_t last_batch = 0;
	bool retry = false;

	pthread_mutex_lock(&ev->lock);
	for (;;) {
		struct dpt__buf batch;
		char *run;
		bool batched;
		int rc;

		while (!ev->quit && (!ev->run || ev->queued == 0 || retry))
			if (wait_s(ev, retry ? 5 : 1) != 0)
				retry = false;
		if (!ev->run || ev->queued == 0) {
			if (ev->quit)
				break;
			continue;
		}
		/* Where an append rewrites the object: one per interval at
		 * most, with what came since. */
		batched = own_objects(ev);
		if (batched && !ev->quit &&
		    dpt__wall_ms() - last_batch < DPT_EVENTS_REWRITE_EVERY_MS) {
			wait_s(ev, 1);
			continue;
		}
		batch = ev->queue;
		dpt__buf_init(&ev->queue,
			      (size_t)DPT_EVENTS_QUEUE_MAX * LINE_MAX_BYTES);
		size_t nlines = ev->queued;
		ev->queued = 0;
		run = ev->run;
		pthread_mutex_unlock(&ev->lock);

		rc = write_lines(ev, run, batch.data, batch.len);
		last_batch = dpt__wall_ms();

		pthread_mutex_lock(&ev->lock);
		if (rc) {
			/* Put the batch back in front of what came since. */
			if (!dpt__buf_append(&batch, ev->queue.data,
					     ev->queue.len)) {
				dpt__buf_release(&ev->queue);
				ev->queue = batch;
				ev->queued += nlines;
				dpt__buf_init(&batch, 0);
			}
			retry = true;
			if (ev->quit)
				break;
		}
		dpt__buf_release(&batch);
	}
	pthread_mutex_unlock(&ev->lock);
	return NULL;
}

int dpt__events_new(struct dpt__events **out, uint32_t job_id,
		    uint32_t restarts, uint64_t started_ms)
{
	struct dpt__events *ev = calloc(1, sizeof(*ev));

	*out = NULL;
	if (!ev)
		return DPT_ENOMEM;
	ev->job_id = job_id;
	ev->restarts = restarts;
	ev->started_ms = started_ms;
	pthread_mutex_init(&ev->lock, NULL);
	pthread_cond_init(&ev->wake, NULL);
	dpt__buf_init(&ev->queue,
		      (size_t)DPT_EVENTS_QUEUE_MAX * LINE_MAX_BYTES);
	if (pthread_create(&ev->thread, NULL, writer_main, ev) != 0) {
		dpt__events_destroy(&ev);
		return DPT_ESYS;
	}
	ev->running = true;
	*out = ev;
	return 0;
}

void dpt__events_destroy(struct dpt__events **evp)
{
	struct dpt__events *ev = *evp;

	if (!ev)
		return;
	if (ev->running) {
		/* The thread writes what is queued, once, then exits. */
		pthread_mutex_lock(&ev->lock);
		ev->quit = true;
		pthread_cond_broadcast(&ev->wake);
		pthread_mutex_unlock(&ev->lock);
		pthread_join(ev->thread, NULL);
	}
	if (ev->dropped)
		dpt__warn("%zu event(s) of the run were dropped: more than %d "
			  "waited to be written",
			  ev->dropped, DPT_EVENTS_QUEUE_MAX);
	dpt__storage_appender_destroy(&ev->appender);
	dpt__storage_destroy(&ev->st);
	dpt__buf_release(&ev->queue);
	free(ev->run);
	pthread_cond_destroy(&ev->wake);
	pthread_mutex_destroy(&ev->lock);
	free(ev);
	*evp = NULL;
}

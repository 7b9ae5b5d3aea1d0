/*
 * The run's events: see events.h and doc/checkpoint-format.md.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
	struct dpt__storage *st; /* s3 */
	struct dpt__buf written; /* s3: every line of PART, rewritten whole */
	uint32_t part;		 /* s3: the object's part, 0: the first */
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

/* One warning for the life of the coordinator: events never fail a job. */
static void warn_once(struct dpt__events *ev, const char *what, const char *why)
{
	if (ev->warned)
		return;
	ev->warned = true;
	dpt__warn("cannot write the run's events to '%s': %s (training goes "
		  "on; the events are kept and tried again)",
		  what, why);
}

/* Why an events.jsonl that another user may have planted is not written
 * to: WHAT it is. */
#define PLANTED(what)                                                          \
	"it is " what ", which another user who can write the run directory "  \
	"may have made: remove it"

/* posix: append LINES to RUN/events.jsonl, 0600 in a private run
 * directory. Returns 0, or -1 to try again later. */
static int append_posix(struct dpt__events *ev, const char *dir,
			const char *lines, size_t len)
{
	char path[4096];
	struct stat sb;
	mode_t mode = 0644;
	size_t off = 0;
	int fd;

	if (snprintf(path, sizeof(path), "%s/events.jsonl", dir) >=
	    (int)sizeof(path)) {
		warn_once(ev, dir, "path too long");
		return -1;
	}
	/* The run directory appears with the first save: until then the
	 * lines wait, without a warning. */
	if (stat(dir, &sb) != 0)
		return -1;
	if ((sb.st_mode & 077) == 0)
		mode = 0600;
	/* Whoever else can write the run directory (a team's, a 1777 root
	 * used as one) could have made events.jsonl first: a link to a file
	 * of the coordinator's user, a FIFO that would block this thread,
	 * and the exit that waits for it, for good (O_NONBLOCK: no reader is
	 * ENXIO), or a file of their own that would receive every line. Only
	 * a regular file of this user's with one link is appended to. */
	fd = open(path,
		  O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
			  O_CLOEXEC,
		  mode);
	if (fd < 0) {
		int err = errno;

		warn_once(ev, path,
			  err == ELOOP	 ? PLANTED("a symbolic link")
			  : err == ENXIO ? PLANTED("a FIFO")
					 : strerror(err));
		return -1;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) ||
	    sb.st_uid != geteuid() || sb.st_nlink != 1) {
		warn_once(ev, path,
			  PLANTED("no regular file of this user's with one "
				  "link"));
		close(fd);
		return -1;
	}
	/* A run made private after its events file was created (an earlier
	 * run was not, or the library made the directory private after our
	 * first line): the file follows, as the library's older files do. */
	if (mode == 0600 && fstat(fd, &sb) == 0 && (sb.st_mode & 077) &&
	    fchmod(fd, 0600) != 0) {
		warn_once(ev, path, strerror(errno));
		close(fd);
		return -1;
	}
	/* Whole lines with O_APPEND: another step's coordinator appending
	 * to the same run interleaves lines, never bytes of a line (one
	 * write each, below PIPE_BUF-sized lines on local and Lustre file
	 * systems). */
	while (off < len) {
		const char *nl = memchr(lines + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (lines + off)) + 1 : len - off;
		ssize_t w = write(fd, lines + off, n);

		if (w != (ssize_t)n) {
			warn_once(ev, path,
				  w < 0 ? strerror(errno) : "short write");
			close(fd);
			return -1;
		}
		off += n;
	}
	fdatasync(fd);
	close(fd);
	return 0;
}

/* s3: rewrite this coordinator's own object with every line so far. */
static int rewrite_s3(struct dpt__events *ev, const char *run,
		      const char *lines, size_t len)
{
	struct dpt__storage_writer *w = NULL;
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
		rc = dpt__storage_open(run, &so, &ev->st);
		if (rc) {
			warn_once(ev, run, dpt_strerror(rc));
			return -1;
		}
	}
	/* Each flush rewrites the whole object: past PART_MAX the lines go
	 * on in a new one, so that a run that logs every step neither PUTs
	 * a growing object every 2 s nor reaches the buffer's cap. The
	 * part's "~NNNNNN" sorts after the first object's ".jsonl" ('~' is
	 * the largest printable byte) and the parts in their order. */
	if (ev->written.len && ev->written.len + len > DPT_EVENTS_S3_PART_MAX) {
		ev->part++;
		dpt__buf_reset(&ev->written);
	}
	if (dpt__buf_append(&ev->written, lines, len)) {
		warn_once(ev, run, "more than the object's cap of events");
		return -1;
	}
	if (ev->part)
		snprintf(key, sizeof(key),
			 "events/%013" PRIu64 "-%" PRIu32 "-%" PRIu32
			 "~%06" PRIu32 ".jsonl",
			 ev->started_ms, ev->job_id, ev->restarts, ev->part);
	else
		snprintf(key, sizeof(key),
			 "events/%013" PRIu64 "-%" PRIu32 "-%" PRIu32 ".jsonl",
			 ev->started_ms, ev->job_id, ev->restarts);
	rc = dpt__storage_writer_new(ev->st, key, &w);
	if (!rc)
		rc = dpt__storage_writer_write_at(w, ev->written.data,
						  ev->written.len, 0);
	if (!rc)
		rc = dpt__storage_writer_finish(&w);
	else
		dpt__storage_writer_abort(&w);
	if (rc) {
		/* Dropped from WRITTEN: they go back to the queue. */
		ev->written.len -= len;
		ev->written.data[ev->written.len] = '\0';
		warn_once(ev, run, dpt_strerror(rc));
		return -1;
	}
	return 0;
}

static void *writer_main(void *arg)
{
	struct dpt__events *ev = arg;
	uint64_t last_s3 = 0;
	bool retry = false;

	pthread_mutex_lock(&ev->lock);
	for (;;) {
		struct dpt__buf batch;
		char *run;
		bool s3;
		int rc;

		while (!ev->quit && (!ev->run || ev->queued == 0 || retry)) {
			struct timespec until;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += retry ? 5 : 1;
			if (pthread_cond_timedwait(&ev->wake, &ev->lock,
						   &until) != 0)
				retry = false;
		}
		if (!ev->run || ev->queued == 0) {
			if (ev->quit)
				break;
			continue;
		}
		s3 = strncmp(ev->run, "file://", 7) != 0;
		if (s3 && !ev->quit &&
		    dpt__wall_ms() - last_s3 < DPT_EVENTS_S3_EVERY_MS) {
			/* Coalesce: one PUT per interval at most. */
			struct timespec until;
			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += 1;
			pthread_cond_timedwait(&ev->wake, &ev->lock, &until);
			continue;
		}
		batch = ev->queue;
		dpt__buf_init(&ev->queue,
			      (size_t)DPT_EVENTS_QUEUE_MAX * LINE_MAX_BYTES);
		size_t nlines = ev->queued;
		ev->queued = 0;
		run = ev->run;
		pthread_mutex_unlock(&ev->lock);

		if (s3) {
			rc = rewrite_s3(ev, run, batch.data, batch.len);
			last_s3 = dpt__wall_ms();
		} else {
			rc = append_posix(ev, run + 7, batch.data, batch.len);
		}

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
	dpt__buf_init(&ev->written, 64u << 20);
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
	dpt__storage_destroy(&ev->st);
	dpt__buf_release(&ev->queue);
	dpt__buf_release(&ev->written);
	free(ev->run);
	pthread_cond_destroy(&ev->wake);
	pthread_mutex_destroy(&ev->lock);
	free(ev);
	*evp = NULL;
}

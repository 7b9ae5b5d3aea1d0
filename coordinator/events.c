/*
 * The run's events: see events.h and doc/checkpoint-format.md.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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
#include "events.h"
#include "jsonl.h"
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

static int put_common(struct dpt__buf *b, const struct dpt__coord_note *n,
		      uint32_t job_id, uint32_t restarts, uint64_t time_ms)
{
	int rc = dpt__jsonl_begin(b);

	if (!rc)
		rc = dpt__jsonl_num(b, "time", (double)time_ms / 1000.0, 3);
	if (!rc)
		rc = dpt__jsonl_str(b, "event", n->event);
	if (!rc)
		rc = dpt__jsonl_u64(b, "job", job_id);
	if (!rc)
		rc = dpt__jsonl_u64(b, "restarts", restarts);
	return rc;
}

static int put_step(struct dpt__buf *b, const char *key, uint64_t step)
{
	return step == DPT_STATUS_NO_STEP ? dpt__jsonl_null(b, key)
					  : dpt__jsonl_u64(b, key, step);
}

static int put_rank(struct dpt__buf *b, const char *key, uint32_t v)
{
	return v == DPT_WIRE_NO_RANK ? dpt__jsonl_null(b, key)
				     : dpt__jsonl_u64(b, key, v);
}

int dpt__events_format(const struct dpt__coord_note *n, uint32_t job_id,
		       uint32_t restarts, uint64_t time_ms,
		       struct dpt__buf *out)
{
	const char *e = n->event;
	int rc;

	if (!e || !strcmp(e, "run"))
		return 1;
	rc = put_common(out, n, job_id, restarts, time_ms);
	if (rc)
		return rc;
	if (!strcmp(e, "start")) {
		rc = dpt__jsonl_u64(out, "expected", n->world);
		if (!rc)
			rc = n->end_time > 0 ? dpt__jsonl_i64(out, "end_time",
							      n->end_time)
					     : dpt__jsonl_null(out, "end_time");
	} else if (!strcmp(e, "join") || !strcmp(e, "evict")) {
		rc = dpt__jsonl_u64(out, "generation", n->generation);
		if (!rc && !strcmp(e, "evict"))
			rc = put_rank(out, "rank", n->rank);
		if (!rc)
			rc = put_rank(out, "task", n->task);
		if (!rc)
			rc = dpt__jsonl_str(out, "host", n->host);
		if (!rc)
			rc = dpt__jsonl_u64(out, "node", n->node);
		if (!rc && !strcmp(e, "evict"))
			rc = dpt__jsonl_str(out, "reason", n->reason);
		if (!rc && !strcmp(e, "evict"))
			rc = dpt__jsonl_str(out, "why", n->why);
	} else if (!strcmp(e, "generation")) {
		rc = dpt__jsonl_u64(out, "generation", n->generation);
		if (!rc)
			rc = dpt__jsonl_u64(out, "world", n->world);
		if (!rc)
			rc = dpt__jsonl_u64(out, "nodes", n->nodes);
		if (!rc)
			rc = dpt__jsonl_str(out, "backend", n->backend);
	} else if (!strcmp(e, "generation_end")) {
		rc = dpt__jsonl_u64(out, "generation", n->generation);
		if (!rc)
			rc = put_rank(out, "rank", n->rank);
		if (!rc)
			rc = dpt__jsonl_str(out, "reason", n->reason);
		if (!rc)
			rc = dpt__jsonl_str(out, "why", n->why);
	} else if (!strcmp(e, "resume") || !strcmp(e, "commit")) {
		rc = put_step(out, "step", n->step);
	} else if (!strcmp(e, "save")) {
		rc = put_step(out, "step", n->step);
		if (!rc)
			rc = dpt__jsonl_u64(out, "bytes", n->bytes);
		if (!rc)
			rc = dpt__jsonl_num(out, "seconds", n->seconds, 3);
		if (!rc)
			rc = n->seconds > 0
				     ? dpt__jsonl_num(
					       out, "bandwidth",
					       (double)n->bytes / n->seconds, 0)
				     : dpt__jsonl_null(out, "bandwidth");
	} else if (!strcmp(e, "requeue")) {
		rc = dpt__jsonl_str(out, "verdict", n->reason);
		if (!rc)
			rc = dpt__jsonl_str(out, "reason", n->why);
		if (!rc)
			rc = put_step(out, "committed", n->step);
	} else if (!strcmp(e, "log") && n->scalars) {
		const struct dpt__scalars *sc = n->scalars;

		rc = dpt__jsonl_u64(out, "step", sc->step);
		if (!rc)
			rc = dpt__jsonl_open(out, "scalars");
		for (size_t i = 0; !rc && i < sc->n; i++)
			rc = dpt__jsonl_real(out, sc->names[i], sc->values[i]);
		if (!rc)
			rc = dpt__jsonl_close(out);
	} else if (!strcmp(e, "total_steps")) {
		rc = put_step(out, "total_steps", n->step);
	} else if (!strcmp(e, "end")) {
		rc = dpt__jsonl_i64(out, "status", n->status);
	} else {
		/* stop, failure */
		rc = dpt__jsonl_str(out, "reason", n->reason);
	}
	return rc ? rc : dpt__jsonl_end(out);
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

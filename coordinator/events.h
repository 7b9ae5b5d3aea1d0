/*
 * The run's events (doc/checkpoint-format.md, "Events"): the coordinator
 * formats each note of the state machine (and its own start, requeue and
 * end) as one JSON line and queues it; a thread of its own writes the
 * lines next to the run's checkpoints once the library has said where
 * they are. Nothing here blocks the event loop, and no error of it
 * reaches the job: a failed write is one warning, and the lines wait for
 * the next try.
 */
#ifndef DPT_COORDINATOR_EVENTS_H
#define DPT_COORDINATOR_EVENTS_H

#include <stdint.h>

#include "buf.h"
#include "coord.h"

#define DPT_EVENTS_QUEUE_MAX 4096 /* lines kept while unwritten */
/* Where an append rewrites the whole object (a storage without
 * DPT__STORAGE_CAP_APPEND, such as s3), each coordinator writes objects of its
 * own: at most one append per this interval, and a new object (a part)
 * past this many bytes. */
#define DPT_EVENTS_REWRITE_EVERY_MS 2000
#ifndef DPT_EVENTS_REWRITE_PART_MAX
#define DPT_EVENTS_REWRITE_PART_MAX (4u << 20)
#endif

struct dpt__events;

/*
 * dpt__events_format - the line of note N, written at TIME_MS (Unix ms)
 * by job JOB_ID after RESTARTS requeues, into OUT (emptied first), laid
 * out as common/event_log.h defines N's event. Returns 0, 1 for a note
 * that is no line (DPT_COORD_NOTE_RUN, the run's URI), or DPT_ETOOBIG.
 * Pure: the unit tests' entry.
 */
int dpt__events_format(const struct dpt__coord_note *n, uint32_t job_id,
		       uint32_t restarts, uint64_t time_ms,
		       struct dpt__buf *out);

/* Start the writer thread. STARTED_MS names this coordinator's own
 * objects. Returns 0 or DPT_ENOMEM/DPT_ESYS. */
int dpt__events_new(struct dpt__events **out, uint32_t job_id,
		    uint32_t restarts, uint64_t started_ms);

/* Queue note N (a dpt__coord_reporter; ARG is the events). A note "run"
 * sets where the lines go (the first one wins). */
void dpt__events_note(void *arg, const struct dpt__coord_note *n);

/* Where the lines go, NULL before the library said. Owned by EV. */
const char *dpt__events_run(struct dpt__events *ev);

/*
 * Write what is queued (one try: a remote store gets one retry and 10 s
 * without progress), stop the thread and free everything; accepts NULL,
 * nulls *EV.
 */
void dpt__events_destroy(struct dpt__events **ev);

#endif

/*
 * The run's event log, once (doc/checkpoint-format.md, "Events"): each
 * field's key and kind, each event's name and the fields its line has,
 * in order. The coordinator writes the lines through dpt__event_format
 * (coordinator/events.c says where each value comes from); `dptrain
 * status` and `dptrain plot` recognise an event and read its fields by
 * the same ids (tool/event_line.h). A renamed event or field changes both
 * sides at once; a misspelt id does not compile; a field added here and
 * not given a value by the coordinator does not compile either (its
 * switch has no default), and tests/unit/test_event_log.c writes every
 * event and reads it back.
 */
#ifndef DPT_COMMON_EVENT_LOG_H
#define DPT_COMMON_EVENT_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct dpt__scalars;

/*
 * How a field is written and read (the kinds of doc/checkpoint-format.md,
 * "Fields"); what a kind writes as null is said on its line.
 */
enum dpt__event_kind {
	DPT_EVK_U64,	 /* an unsigned integer */
	DPT_EVK_I64,	 /* a signed integer */
	DPT_EVK_STEP,	 /* a step; null: DPT_STATUS_NO_STEP */
	DPT_EVK_RANK,	 /* a rank or task id; null: DPT_WIRE_NO_RANK */
	DPT_EVK_EPOCH,	 /* Unix seconds; null: 0 or less */
	DPT_EVK_STR,	 /* a string, escaped (jsonl.h); null: NULL */
	DPT_EVK_SECONDS, /* seconds, 3 decimals; null: not finite */
	DPT_EVK_RATE,	 /* a rate, no decimals; null: not finite */
	DPT_EVK_SCALARS, /* an object: name -> number, null if not finite */
};

/* A field: its id, its key in the line, its kind. A key has one kind. */
/* clang-format off */
#define DPT_EVENT_FIELD_MAP(X)                                                \
	X(TIME, "time", SECONDS)                                              \
	X(EVENT, "event", STR)                                                \
	X(JOB, "job", U64)                                                    \
	X(RESTARTS, "restarts", U64)                                          \
	X(EXPECTED, "expected", U64)                                          \
	X(END_TIME, "end_time", EPOCH)                                        \
	X(GENERATION, "generation", U64)                                      \
	X(RANK, "rank", RANK)                                                 \
	X(TASK, "task", RANK)                                                 \
	X(HOST, "host", STR)                                                  \
	X(NODE, "node", U64)                                                  \
	X(WORLD, "world", U64)                                                \
	X(NODES, "nodes", U64)                                                \
	X(BACKEND, "backend", STR)                                            \
	X(VERDICT, "verdict", STR)                                            \
	X(REASON, "reason", STR)                                              \
	X(WHY, "why", STR)                                                    \
	X(STEP, "step", STEP)                                                 \
	X(BYTES, "bytes", U64)                                                \
	X(SECONDS, "seconds", SECONDS)                                        \
	X(BANDWIDTH, "bandwidth", RATE)                                       \
	X(COMMITTED, "committed", STEP)                                       \
	X(SCALARS, "scalars", SCALARS)                                        \
	X(TOTAL_STEPS, "total_steps", STEP)                                   \
	X(STATUS, "status", I64)                                              \
	X(SHAPE, "shape", STR)                                                \
	X(GLOBAL_BATCH, "global_batch", STEP)

/* The fields every line starts with, in order. */
#define DPT_EVENT_COMMON(F) F(TIME) F(EVENT) F(JOB) F(RESTARTS)

/*
 * An event: its id, its name (the line's "event"), and its own fields
 * after the common ones, in the line's order, each F(FIELD). New events
 * go at the end; readers ignore a name they do not know.
 */
#define DPT_EVENT_MAP(X, F)                                                   \
	X(START, "start", F(EXPECTED) F(END_TIME))                            \
	X(JOIN, "join", F(GENERATION) F(TASK) F(HOST) F(NODE))                \
	X(EVICT, "evict", F(GENERATION) F(RANK) F(TASK) F(HOST) F(NODE)      \
				  F(REASON) F(WHY))                           \
	X(GENERATION, "generation",                                           \
	  F(GENERATION) F(WORLD) F(NODES) F(BACKEND))                         \
	X(GENERATION_END, "generation_end",                                   \
	  F(GENERATION) F(RANK) F(REASON) F(WHY))                             \
	X(RESUME, "resume", F(STEP))                                          \
	X(SAVE, "save", F(STEP) F(BYTES) F(SECONDS) F(BANDWIDTH))             \
	X(COMMIT, "commit", F(STEP))                                          \
	X(STOP, "stop", F(REASON))                                            \
	X(REQUEUE, "requeue", F(VERDICT) F(REASON) F(COMMITTED))              \
	X(FAILURE, "failure", F(REASON))                                      \
	X(END, "end", F(STATUS))                                              \
	X(LOG, "log", F(STEP) F(SCALARS))                                     \
	X(TOTAL_STEPS, "total_steps", F(TOTAL_STEPS))                         \
	X(SHAPE, "shape", F(REASON) F(SHAPE) F(WORLD) F(WHY))                 \
	X(GLOBAL_BATCH, "global_batch", F(GLOBAL_BATCH))
/* clang-format on */

enum dpt__event_field {
#define X(id, key, kind) DPT_EVF_##id,
	DPT_EVENT_FIELD_MAP(X)
#undef X
};

enum dpt__event {
#define X(id, name, fields) DPT_EV_##id,
	DPT_EVENT_MAP(X, )
#undef X
};

/* How many fields and events there are (not enumerators, so that a
 * switch over the ids needs no case for them). */
#define DPT__EVENT_ONE(...) +1
enum {
	DPT_EVF_COUNT = 0 DPT_EVENT_FIELD_MAP(DPT__EVENT_ONE),
	DPT_EV_COUNT = 0 DPT_EVENT_MAP(DPT__EVENT_ONE, ),
};

/* Field F's key and kind. */
const char *dpt__event_key(enum dpt__event_field f);
enum dpt__event_kind dpt__event_kind(enum dpt__event_field f);

/* Event E's name; NULL for an id out of range. */
const char *dpt__event_name(enum dpt__event e);

/* The event named NAME, or DPT_EV_COUNT for a name this build does not
 * know (a newer writer's: readers skip it). */
enum dpt__event dpt__event_by_name(const char *name);

/*
 * Event E's own fields, in the line's order after DPT_EVENT_COMMON: sets
 * *FIELDS to a static array and returns its length (0 for an id out of
 * range). dpt__event_common: the common fields, the same way.
 */
size_t dpt__event_fields(enum dpt__event e,
			 const enum dpt__event_field **fields);
size_t dpt__event_common(const enum dpt__event_field **fields);

/* A field's value, as the writer gives it: the member its kind reads. */
struct dpt__event_value {
	uint64_t u;			    /* U64, STEP, RANK */
	int64_t i;			    /* I64, EPOCH */
	double d;			    /* SECONDS, RATE */
	const char *s;			    /* STR */
	const struct dpt__scalars *scalars; /* SCALARS (NULL: null) */
};

/* The writer's source of values: sets *OUT to field F of event E's line
 * (OUT is zeroed first). */
typedef void dpt__event_value_fn(void *arg, enum dpt__event e,
				 enum dpt__event_field f,
				 struct dpt__event_value *out);

/*
 * dpt__event_format - the line of event E into OUT (emptied first): the
 * common fields, then E's, each from VALUE (ARG passed on), written by its
 * kind, and a newline. Returns 0, DPT_EINVAL (E out of range) or
 * DPT_ETOOBIG (OUT's cap: the line is incomplete, drop it).
 */
int dpt__event_format(struct dpt__buf *out, enum dpt__event e,
		      dpt__event_value_fn *value, void *arg);

#endif

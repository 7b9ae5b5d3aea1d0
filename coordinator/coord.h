/*
 * The coordinator's state machine (doc/protocol.md, "Coordinator state
 * machine"): peers, generations, barriers and liveness. It owns no socket
 * setup and no event loop: coordinator/main.c receives frames and timers
 * and hands them over here; this module sends its replies through the
 * sender it is given (struct dpt__coord_sender), so that it can run, and
 * be tested, without a socket and without a clock.
 */
#ifndef DPT_COORDINATOR_COORD_H
#define DPT_COORDINATOR_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "event_log.h"

struct dpt__coord_config {
	uint32_t world_size;	  /* workers expected in generation 1 */
	uint32_t min_workers;	  /* smallest generation allowed */
	uint32_t heartbeat_ms;	  /* how often each side speaks */
	uint32_t timeout_ms;	  /* silence after which a peer is evicted */
	uint32_t join_timeout_ms; /* 0: wait for joins without limit */
	int64_t save_every_ms;	  /* VOTE_DONE says SAVE this often; 0: never */
	int64_t grace_s;	  /* the walltime stop: end time - grace */
};

struct dpt__coord;
struct dpt__msg;

/*
 * Where the state machine's (and the key-value store's) messages go:
 * coordinator/main.c sends them on its ROUTER socket, the unit tests
 * record them. SEND queues MSG, one encoded protocol message, for the
 * peer with routing id ID (ID_LEN bytes), without blocking; MSG stays the
 * caller's (zmq_msg_copy shares its buffer: the roster is encoded once
 * for all members). Returns 0, or -1 when it could not be queued: the
 * message is lost, and the protocol recovers through its timeouts.
 */
struct dpt__coord_sender {
	int (*send)(void *arg, const uint8_t *id, size_t id_len,
		    zmq_msg_t *msg);
	void *arg;
};

/* Encode M (any message but ROSTER) and send it through S; returns what
 * S's send returns, or the encoder's error. */
int dpt__coord_send(const struct dpt__coord_sender *s, const uint8_t *id,
		    size_t id_len, const struct dpt__msg *m);

/*
 * Create the state machine. Its messages go through SENDER, which is
 * copied (what SENDER's arg points to stays the caller's and must outlive
 * the state machine). NOW is the monotonic time in milliseconds: the
 * state machine reads no clock, every call is given the time. Returns 0
 * or DPT_ENOMEM.
 */
int dpt__coord_new(struct dpt__coord **out, const struct dpt__coord_config *cfg,
		   const struct dpt__coord_sender *sender, int64_t now);
/* Free everything; accepts NULL; nulls *C. */
void dpt__coord_destroy(struct dpt__coord **c);

/*
 * One message from the ROUTER: the sender's routing identity ID (ID_LEN
 * bytes), the frame's DATA (LEN bytes, untrusted) and the descriptor of
 * the connection it came from (ZMQ_SRCFD; -1 if unknown). Malformed input
 * is dropped with a rate-limited warning.
 */
void dpt__coord_on_message(struct dpt__coord *c, const void *id, size_t id_len,
			   const void *data, size_t len, int fd, int64_t now);

/*
 * The connection on descriptor FD closed at NOW (the ROUTER's monitor):
 * the peer whose messages came from it, if any, is evicted by the first
 * dpt__coord_on_tick that is not BEHIND 100 ms later, after the messages
 * it sent before the close (a LEAVE, say). Every close must be reported
 * before the messages that arrived after it, or a reused descriptor would
 * be blamed on its new owner.
 */
void dpt__coord_on_disconnect(struct dpt__coord *c, int fd, int64_t now);

/* Run the timers that are due: heartbeats, evictions, join timeouts.
 * BEHIND: messages are waiting unread, so nobody may be judged silent. */
void dpt__coord_on_tick(struct dpt__coord *c, int64_t now, int behind);

/* When dpt__coord_on_tick should next run (monotonic milliseconds). */
int64_t dpt__coord_next_deadline(const struct dpt__coord *c);

/* Stop: tell every peer why (WHY is logged and sent) and finish. */
void dpt__coord_shutdown(struct dpt__coord *c, const char *why, int64_t now);

/*
 * Stop the step (doc/walltime.md): from now on every VOTE_DONE carries
 * DPT_VOTE_STOP. WHY is logged the first time. Idempotent.
 */
void dpt__coord_stop(struct dpt__coord *c, const char *why, int64_t now);

/* Whether a VOTE_DONE with DPT_VOTE_STOP has been sent. */
bool dpt__coord_stop_sent(const struct dpt__coord *c);

/* The value of KEY in the step's key-value store, or NULL. */
const char *dpt__coord_kv_value(struct dpt__coord *c, const char *key);

/* Whether the coordinator gave up on the job (too few workers, a failed
 * rendezvous...): the workers were told, the exit status is 1. */
bool dpt__coord_gave_up(const struct dpt__coord *c);

/* The tasks of the step whose exit has not been reported (TASK_EXIT);
 * reports are still taken once the coordinator is finished. */
uint32_t dpt__coord_tasks_running(const struct dpt__coord *c);

/*
 * For tests and the protocol document: the state machine's table by name
 * (doc/protocol.md, "Transitions"). A cell is one state and one event and
 * the name of the handler that executes it there; the strings are
 * static.
 */
struct dpt__coord_cell {
	const char *state;
	const char *event;
	const char *handler;
};

/* Fills CELLS with up to MAX cells, every state times every event;
 * returns how many cells the table has. */
size_t dpt__coord_table(struct dpt__coord_cell *cells, size_t max);

/* The same for the tasks' table (doc/protocol.md, "Tasks"): every task
 * state times every task event, each cell's HANDLER being the state the
 * task goes to. */
size_t dpt__coord_task_table(struct dpt__coord_cell *cells, size_t max);

/* Called after each event the state machine executes: the cell, and the
 * state it led to. */
typedef void dpt__coord_observer(void *arg, const struct dpt__coord_cell *cell,
				 const char *next);

/* Calls FN with ARG after every event from now on (NULL: stop). */
void dpt__coord_observe(struct dpt__coord *c, dpt__coord_observer *fn,
			void *arg);

/* Whether the coordinator is finished; *EXIT_CODE receives its status
 * (0 when every member left cleanly). */
int dpt__coord_done(const struct dpt__coord *c, int *exit_code);

/*
 * What happened, for the run's events (doc/checkpoint-format.md,
 * "Events"): one call per event, from the event loop, with the fields that
 * apply to EVENT (common/event_log.h; coordinator/events.c says which
 * member each field of its line is written from; and DPT_COORD_NOTE_RUN,
 * which is no line: the library reported the run's URI, in REASON).
 * Strings are valid during the call only. The reporter must not block: it
 * queues.
 */
#define DPT_COORD_NOTE_RUN ((enum dpt__event)DPT_EV_COUNT)
struct dpt__scalars;
struct dpt__coord_note {
	enum dpt__event event;
	uint32_t generation;
	uint32_t rank; /* DPT_WIRE_NO_RANK: none */
	uint32_t task; /* DPT_WIRE_NO_TASK: none */
	const char *host;
	uint32_t node;
	uint32_t world, nodes;
	const char *backend;
	const char *reason; /* a code's name ("peer_lost") or a text */
	const char *why;    /* evict: the text logged */
	uint64_t step;	    /* DPT_STATUS_NO_STEP: none */
	uint64_t bytes;
	double seconds;
	int64_t end_time;		    /* start: Unix s, 0: none */
	int status;			    /* end: the exit status */
	const struct dpt__scalars *scalars; /* log: the record */
	const char *shape;		    /* shape: NODESxGPUS[:TASKS] */
};
typedef void dpt__coord_reporter(void *arg, const struct dpt__coord_note *n);
void dpt__coord_set_reporter(struct dpt__coord *c, dpt__coord_reporter *fn,
			     void *arg);
/* Tell the reporter N (nothing without one): the state machine's notes,
 * and the event loop's own (start, requeue, end). */
void dpt__coord_note(struct dpt__coord *c, const struct dpt__coord_note *n);

/* The job's facts that a STATUS_REPLY carries and the state machine does
 * not know: the job id, its restart count, the coordinator's start (Unix
 * ms), and its end time (Unix s, 0: none), which changes. */
void dpt__coord_set_job(struct dpt__coord *c, uint32_t job_id,
			uint32_t restarts, uint64_t started_ms);
void dpt__coord_set_end_time(struct dpt__coord *c, int64_t end);

/* The newest committed step the library reported (DPT_STATUS_NO_STEP:
 * none yet). */
uint64_t dpt__coord_committed(const struct dpt__coord *c);

/* What the metrics page (metrics.h) needs besides STATUS_REPLY's facts:
 * the generation being formed or live (1 while the first is formed),
 * the workers joined to it, and the STATUS requests answered so far. */
struct dpt__coord_counts {
	uint32_t generation;
	uint32_t joined;
	uint64_t status_answered;
};
void dpt__coord_counts(const struct dpt__coord *c,
		       struct dpt__coord_counts *out);

/* Fill *ST with the step's state, as STATUS_REPLY sends it. */
struct dpt__msg_status;
void dpt__coord_status(const struct dpt__coord *c, struct dpt__msg_status *st);

#endif

/*
 * The coordinator's insides, shared by coord.c (the event handlers, the
 * [state][event] table and the interface of coord.h) and coord_gen.c (the
 * peers, sending, and the actions on generations the handlers take).
 * Private to the coordinator and its unit tests.
 */
#ifndef DPT_COORDINATOR_COORD_INT_H
#define DPT_COORDINATOR_COORD_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "coord.h"
#include "kv.h"
#include "peers.h"
#include "ratelimit.h"
#include "wire.h"

/*
 * States and events of doc/protocol.md, "Coordinator state machine". The
 * names are the document's: tests/unit/test_coord.c checks that its table
 * and TRANSITIONS (coord.c) agree cell for cell.
 */
/* clang-format off: it indents X-macro lists as continuation lines */
#define COORD_STATES(X)                                                        \
	X(GATHERING) /* generation G is being formed */                        \
	X(ID_WAIT)   /* G formed (NCCL): waiting for rank 0's unique ID */     \
	X(RUNNING)   /* G is live */                                           \
	X(DONE)	     /* finished: the event loop exits (or lingers) */

enum coord_state {
#define X(name) ST_##name,
	COORD_STATES(X)
#undef X
		ST_COUNT
};

#define COORD_EVENTS(X)                                                        \
	X(JOIN)		/* JOIN message */                                     \
	X(UNIQUE_ID)	/* UNIQUE_ID message */                                \
	X(BARRIER)	/* BARRIER or VOTE message */                          \
	X(LEAVE)	/* LEAVE message */                                    \
	X(FAULT)	/* FAULT message */                                    \
	X(TASK_EXIT)	/* TASK_EXIT message, from anyone */                   \
	X(STRANGER)	/* a member's message from a peer not tracked */       \
	X(PEER_EXPIRED) /* a peer was silent for timeout_ms */                 \
	X(PEER_CLOSED)	/* a peer's connection closed CLOSE_GRACE_MS ago */    \
	X(JOIN_TIMEOUT) /* the join (or unique ID) deadline passed */          \
	X(SHUTDOWN)	/* a signal, or the parent process exited */           \
	X(STOP)		/* the job's end time is within the grace */

enum coord_event {
#define X(name) EV_##name,
	COORD_EVENTS(X)
#undef X
		EV_COUNT
};

/* clang-format on */

enum peer_role {
	ROLE_JOINING, /* sent JOIN for the generation being formed */
	ROLE_MEMBER,  /* in the current generation */
	ROLE_WAITING, /* was in the previous generation, expected back */
};

#define CLOSE_GRACE_MS 100 /* see evict_closed */

struct peer {
	/* First: the peer table's part (peers.h); peer_of converts back. */
	struct dpt__peer_entry entry;
	int64_t last_sent;
	enum peer_role role;
	uint32_t rank; /* ROLE_MEMBER */
	uint32_t barrier_seq;
	/* It arrived at barrier BARRIER_SEQ with a VOTE, and its code. */
	bool voted;
	int32_t vote;
	uint32_t vote_flags;
	uint64_t join_order;
	struct dpt__msg_join join;
};

/*
 * Each task of the step (by Slurm task id) has a state of its own,
 * doc/protocol.md "Tasks": its table is task_next in coord_gen.c, and
 * dpt__coord_task_event the one place that moves it.
 */
enum task_state {
	TASK_UNSEEN = 0, /* no connection has joined as it yet */
	TASK_JOINED,	 /* a peer joined as it */
	TASK_GONE,	 /* its peer left or was dropped */
	TASK_EXITED,	 /* Slurm reported its exit: final */
	TASK_STATE_COUNT
};
enum task_event {
	TASK_EV_CLAIM,	 /* a connection joins as the task */
	TASK_EV_RELEASE, /* its peer joins again as another task */
	TASK_EV_LOST,	 /* its peer leaves or is dropped */
	TASK_EV_EXIT,	 /* TASK_EXIT: Slurm reported the task's exit */
	TASK_EVENT_COUNT
};

struct task {
	struct peer *peer; /* while TASK_JOINED */
	uint8_t state;
};

/* Executes EV for task ID (no task: nothing); P is the peer that claims it
 * (TASK_EV_CLAIM). */
void dpt__coord_task_event(struct dpt__coord *c, uint32_t id,
			   enum task_event ev, struct peer *p);

/* Malformed messages: at most RL_BURST lines per RL_WINDOW_MS. */
#define RL_BURST     5
#define RL_WINDOW_MS 10000

struct dpt__coord {
	struct dpt__coord_config cfg;
	struct dpt__coord_sender sender;
	enum coord_state state;
	int exit_code;
	uint32_t generation; /* being formed (GATHERING) or live */
	bool formed_any;     /* generation 1 has been formed */

	/* All tracked peers: by routing id, by descriptor, and by the time
	 * they were last heard from (the oldest first). */
	struct dpt__peer_table peers;
	/* Peers whose connection closed, by routing id, descriptor and when,
	 * evicted CLOSE_GRACE_MS later, once the messages they sent before
	 * the close have been handled. */
	struct closed_id {
		int64_t at;
		int fd;
		uint8_t len;
		uint8_t id[DPT_PEER_ID_MAX];
	} * closed;
	size_t nclosed, closed_cap;
	uint32_t n_joining, n_waiting;
	uint64_t join_counter;
	uint32_t lost_before_first;   /* tasks gone before generation 1 */
	uint32_t failed_before_first; /* of those, exited with status != 0 */

	/* The live generation: members by rank, NULL once a member left. */
	struct peer **members;
	uint32_t world;
	uint32_t active;
	uint8_t backend;
	bool any_left;
	/* The step was stopped (doc/walltime.md): every VOTE_DONE says so
	 * from then on; STOP_SENT once one has. */
	bool stopping;
	bool stop_sent;
	bool gave_up;	      /* dpt__coord_fail */
	int64_t last_save;    /* when SAVE was last sent (or the start) */
	uint32_t barrier_seq; /* barriers completed in this generation */
	uint32_t barrier_count;
	uint8_t last_id[DPT_NCCL_ID_SIZE];
	bool have_last_id;

	struct task *tasks; /* indexed by task id, world_size entries */
	int64_t next_heartbeat;
	int64_t join_deadline; /* 0: none */
	struct dpt__ratelimit rl_malformed;
	struct dpt__kv *kv; /* MASTER_ADDR/MASTER_PORT for the tasks */
	struct dpt__ratelimit rl_status; /* STATUS requests answered */
	uint64_t status_answered;	 /* and their count (metrics) */
	dpt__coord_reporter *reporter;	 /* the run's events */
	void *reporter_arg;
	/* STATUS_REPLY's facts (dpt__coord_set_job, the library's
	 * reports, the last generation's end or the stop). */
	uint32_t job_id, restarts;
	uint64_t started_ms;
	int64_t end_time;
	uint64_t step, committed, committed_at_ms;
	char run[DPT_WIRE_TEXT_MAX + 1];
	char last[DPT_WIRE_TEXT_MAX + 1];
	dpt__coord_observer *observer; /* tests: every executed cell */
	void *observer_arg;
};

/* ------------------------------------------------------------ coord_gen.c */

/* Logging: a peer and an exit status described. */
const char *dpt__coord_describe(const struct peer *p, char *buf, size_t size);
void dpt__coord_format_status(int32_t status, char *buf, size_t size);

/* The peer registry of peers.h, holding struct peer. */
struct peer *dpt__coord_peer_find(struct dpt__coord *c, const uint8_t *id,
				  size_t len);
struct peer *dpt__coord_oldest_peer(const struct dpt__coord *c);
struct peer *dpt__coord_newer_peer(const struct dpt__coord *c, struct peer *p);
void dpt__coord_peer_heard(struct dpt__coord *c, struct peer *p, int64_t now);
struct peer *dpt__coord_peer_add(struct dpt__coord *c, const uint8_t *id,
				 size_t len, int64_t now);
void dpt__coord_set_role(struct dpt__coord *c, struct peer *p,
			 enum peer_role r);
void dpt__coord_peer_set_fd(struct dpt__coord *c, struct peer *p, int fd);
void dpt__coord_peer_remove(struct dpt__coord *c, struct peer *p);

/* Sending, through the injected sender. */
void dpt__coord_send_msg(struct dpt__coord *c, struct peer *p,
			 const struct dpt__msg *m, int64_t now);
void dpt__coord_send_to_id(struct dpt__coord *c, const uint8_t *id,
			   size_t id_len, const struct dpt__msg *m);
void dpt__coord_text_msg(struct dpt__msg *m, enum dpt__msg_type type,
			 uint32_t generation, int32_t code, uint32_t lost_rank,
			 const char *text);
void dpt__coord_send_error(struct dpt__coord *c, struct peer *p, int code,
			   const char *text, int64_t now);
/* coord_report.c: KEY was put in the key-value store (a report of the
 * library's, when it is a dptrain.* key); a STATUS from ID to answer. */
void dpt__coord_on_report(struct dpt__coord *c, const char *key, int64_t now);
void dpt__coord_answer_status(struct dpt__coord *c, const void *id,
			      size_t id_len, uint32_t seq, int64_t now);
/* A note of EVENT (DPT_EV_STOP, DPT_EV_FAILURE) with REASON and nothing else:
 * no rank, task or step. */
void dpt__coord_note_reason(struct dpt__coord *c, enum dpt__event event,
			    const char *reason);

/*
 * Actions on the generation; each returns the next state, which only the
 * table (coord.c) assigns.
 */
enum coord_state dpt__coord_finish(struct dpt__coord *c, int exit_code);
enum coord_state dpt__coord_fail(struct dpt__coord *c, int code,
				 const char *why, int64_t now);
enum coord_state dpt__coord_form_generation(struct dpt__coord *c, int64_t now);
enum coord_state dpt__coord_end_generation(struct dpt__coord *c,
					   uint32_t reason, uint32_t lost_rank,
					   const char *why, int64_t now);
enum coord_state dpt__coord_drop_peer(struct dpt__coord *c, struct peer *p,
				      uint32_t reason, const char *why,
				      int64_t now);
enum coord_state dpt__coord_gather(struct dpt__coord *c, int64_t now);
void dpt__coord_check_barrier(struct dpt__coord *c, int64_t now);
const char *dpt__coord_end_reason_name(uint32_t reason);
bool dpt__coord_room_for_newcomer(struct dpt__coord *c, const uint8_t *id,
				  size_t id_len);

#endif

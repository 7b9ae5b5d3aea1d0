/*
 * The coordinator's state machine (doc/protocol.md, "Coordinator state
 * machine"): the event handlers, the [state][event] table that is the one
 * place the state changes, and the interface of coord.h. The actions the
 * handlers take on generations and peers are in coord_gen.c.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <zmq.h>

#include <dptrain/error.h>

#include "assertion.h"
#include "buf.h"
#include "clock.h"
#include "coord_int.h"
#include "kv.h"
#include "log.h"
#include "peers.h"
#include "scalars.h"
#include "wire.h"

/* clang-format off */
static const char *const state_names[] = {
#define X(name) #name,
	COORD_STATES(X)
#undef X
};

static const char *const event_names[] = {
#define X(name) #name,
	COORD_EVENTS(X)
#undef X
};
/* clang-format on */

/* ------------------------------------------------------------ events */

struct event_ctx {
	const uint8_t *id; /* sender's routing identity (message events) */
	size_t id_len;
	int fd; /* the descriptor the message came from, or -1 */
	const struct dpt__msg *msg; /* NULL for timers, SHUTDOWN's reason */
	int64_t now;
};

/*
 * The handlers: one per distinct action of doc/protocol.md's table, named
 * there. Each gets the peer concerned (NULL for a sender that is not
 * tracked and for timers that concern no peer) and returns the next
 * state.
 */
typedef enum coord_state handler_fn(struct dpt__coord *c, struct peer *p,
				    const struct event_ctx *e);

/* An event with nothing to do in this state: a message of a generation
 * that ended, a timer that a state change disarmed, anything once DONE. */
static enum coord_state on_ignore(struct dpt__coord *c, struct peer *p,
				  const struct event_ctx *e)
{
	(void)p;
	(void)e;
	return c->state;
}

static enum coord_state on_join(struct dpt__coord *c, struct peer *p,
				const struct event_ctx *e)
{
	const struct dpt__msg_join *j = &e->msg->u.join;
	char desc[200], why[240];
	struct task *t =
		j->task_id < c->cfg.world_size ? &c->tasks[j->task_id] : NULL;
	enum coord_state st = c->state;

	if (t && t->state == TASK_JOINED && t->peer != p) {
		struct dpt__msg m;
		snprintf(why, sizeof(why),
			 "task %" PRIu32 " has already joined from another "
			 "connection",
			 j->task_id);
		dpt__warn("refused a join from %s pid %" PRIu32 ": %s",
			  j->addr.host, j->pid, why);
		dpt__coord_text_msg(&m, DPT_MSG_ERROR, c->generation,
				    DPT_EEXIST, DPT_WIRE_NO_RANK, why);
		dpt__coord_send_to_id(c, e->id, e->id_len, &m);
		return st;
	}
	if (t && t->state == TASK_EXITED) {
		/* A late message from a task that Slurm reported dead. */
		struct dpt__msg m;
		snprintf(why, sizeof(why),
			 "task %" PRIu32 " was reported exited", j->task_id);
		dpt__coord_text_msg(&m, DPT_MSG_ERROR, c->generation,
				    DPT_ECLOSED, DPT_WIRE_NO_RANK, why);
		dpt__coord_send_to_id(c, e->id, e->id_len, &m);
		return st;
	}

	if (!p) {
		if (!dpt__coord_room_for_newcomer(c, e->id, e->id_len))
			return st;
		if (st != ST_GATHERING)
			st = dpt__coord_end_generation(
				c, DPT_END_GROW, DPT_WIRE_NO_RANK,
				"a new worker wants to join", e->now);
		if (st == ST_DONE)
			return st;
		p = dpt__coord_peer_add(c, e->id, e->id_len, e->now);
		if (!p) {
			dpt__error("out of memory: dropped a join");
			return st;
		}
		dpt__coord_peer_set_fd(c, p, e->fd);
	} else if (p->role == ROLE_MEMBER) {
		/* A member re-joins: its data plane broke, or it called
		 * dpt_rejoin. The generation is over for everyone. */
		snprintf(why, sizeof(why), "%s re-joined",
			 dpt__coord_describe(p, desc, sizeof(desc)));
		st = dpt__coord_end_generation(c, DPT_END_FAULT, p->rank, why,
					       e->now);
		if (st == ST_DONE)
			return st;
	}
	/* A JOIN repeated while joining keeps its place in the order. */
	if (p->role != ROLE_JOINING || p->join_order == 0)
		p->join_order = ++c->join_counter;
	if (p->join.task_id < c->cfg.world_size &&
	    p->join.task_id != j->task_id &&
	    c->tasks[p->join.task_id].peer == p)
		/* The same connection now claims another task id. */
		dpt__coord_task_event(c, p->join.task_id, TASK_EV_RELEASE,
				      NULL);
	p->join = *j;
	dpt__coord_set_role(c, p, ROLE_JOINING);
	dpt__coord_task_event(c, j->task_id, TASK_EV_CLAIM, p);
	dpt__coord_note(c, &(struct dpt__coord_note){
				   .event = DPT_EV_JOIN,
				   .generation = c->generation,
				   .rank = DPT_WIRE_NO_RANK,
				   .task = p->join.task_id,
				   .host = p->join.name[0] ? p->join.name
							   : p->join.addr.host,
				   .node = p->join.node,
				   .step = DPT_STATUS_NO_STEP,
			   });
	dpt__info("%s joins generation %" PRIu32 " (%" PRIu32 " of %" PRIu32
		  ")",
		  dpt__coord_describe(p, desc, sizeof(desc)), c->generation,
		  c->n_joining,
		  c->formed_any ? c->n_joining + c->n_waiting
				: c->cfg.world_size - c->lost_before_first);
	/* Formed generations end above: a JOIN always finds GATHERING
	 * here, or a generation that is already being formed again. */
	return st == ST_GATHERING ? dpt__coord_gather(c, e->now) : st;
}

static enum coord_state on_unique_id(struct dpt__coord *c, struct peer *p,
				     const struct event_ctx *e)
{
	struct dpt__msg m;

	if (!p || p->role != ROLE_MEMBER || p->rank != 0 ||
	    e->msg->generation != c->generation) {
		dpt__debug("ignored a unique id not from rank 0 of generation "
			   "%" PRIu32,
			   c->generation);
		return c->state;
	}
	if (c->have_last_id &&
	    memcmp(c->last_id, e->msg->u.unique_id, DPT_NCCL_ID_SIZE) == 0)
		return dpt__coord_end_generation(
			c, DPT_END_FAULT, 0,
			"rank 0 sent the previous generation's "
			"nccl unique id",
			e->now);
	memcpy(c->last_id, e->msg->u.unique_id, DPT_NCCL_ID_SIZE);
	c->have_last_id = true;
	dpt__msg_init(&m, DPT_MSG_UNIQUE_ID, c->generation);
	memcpy(m.u.unique_id, e->msg->u.unique_id, DPT_NCCL_ID_SIZE);
	for (uint32_t r = 0; r < c->world; r++)
		if (c->members[r])
			dpt__coord_send_msg(c, c->members[r], &m, e->now);
	c->join_deadline = 0;
	dpt__info("generation %" PRIu32 ": nccl unique id relayed to %" PRIu32
		  " members",
		  c->generation, c->active);
	return ST_RUNNING;
}

static enum coord_state on_barrier(struct dpt__coord *c, struct peer *p,
				   const struct event_ctx *e)
{
	uint32_t seq = e->msg->seq;

	if (!p || p->role != ROLE_MEMBER || e->msg->generation != c->generation)
		return c->state;
	/* A member holds its rank's slot until it leaves or the generation
	 * ends (dpt__coord_peer_remove, dpt__coord_end_generation): its
	 * arrival is counted against the members of that generation. */
	DPT_ASSERT(p->rank < c->world && c->members[p->rank] == p);
	if (seq != c->barrier_seq + 1 || p->barrier_seq >= seq) {
		/* A duplicate, or a member that miscounts: counting it would
		 * release a barrier too early. */
		dpt__debug("ignored barrier %" PRIu32 " from rank %" PRIu32
			   " (expecting %" PRIu32 ")",
			   seq, p->rank, c->barrier_seq + 1);
		return c->state;
	}
	p->barrier_seq = seq;
	p->voted = e->msg->type == DPT_MSG_VOTE;
	p->vote = p->voted ? e->msg->u.vote.code : 0;
	p->vote_flags = p->voted ? e->msg->u.vote.flags : 0;
	if ((p->vote_flags & DPT_VOTE_STOP) && !c->stopping) {
		/* A rank was asked to stop (dpt_request_stop: a signal,
		 * preemption): the same stop as the walltime's, from the
		 * VOTE_DONE of this very vote on, so that every rank stops
		 * at the same step. */
		char desc[200];
		char why[240];
		snprintf(why, sizeof(why), "stop requested by %s",
			 dpt__coord_describe(p, desc, sizeof(desc)));
		dpt__warn("%s: the workers are told to stop at this vote", why);
		c->stopping = true;
		snprintf(c->last, sizeof(c->last), "%s", why);
		dpt__coord_note_reason(c, DPT_EV_STOP, why);
	}
	c->barrier_count++;
	dpt__coord_check_barrier(c, e->now);
	return c->state;
}

static enum coord_state on_leave(struct dpt__coord *c, struct peer *p,
				 const struct event_ctx *e)
{
	char desc[200], why[240];

	if (!p)
		return c->state;
	dpt__coord_describe(p, desc, sizeof(desc));
	if (p->role == ROLE_MEMBER && c->state == ST_ID_WAIT) {
		snprintf(why, sizeof(why),
			 "%s left before the generation "
			 "was running",
			 desc);
		return dpt__coord_drop_peer(c, p, DPT_END_LEFT, why, e->now);
	}
	dpt__info("%s left", desc);
	if (p->role == ROLE_MEMBER) {
		c->any_left = true;
		/* The member left, so it cannot count in a barrier any more:
		 * un-count it if it had arrived. */
		if (p->barrier_seq == c->barrier_seq + 1) {
			DPT_ASSERT(c->barrier_count > 0);
			c->barrier_count--;
		}
		dpt__coord_peer_remove(c, p); /* its task: GONE */
		if (c->active == 0 && c->n_joining == 0 && c->n_waiting == 0) {
			dpt__info("every member of generation %" PRIu32
				  " left: exiting",
				  c->generation);
			return dpt__coord_finish(c, 0);
		}
		dpt__coord_check_barrier(c, e->now);
		return c->state;
	}
	if (!c->formed_any)
		c->lost_before_first++;
	dpt__coord_peer_remove(c, p);
	if (c->formed_any && c->peers.count == 0) {
		/* The survivors of a broken generation chose to finish
		 * rather than re-join: that is a clean end too. */
		dpt__info("every worker left: exiting");
		return dpt__coord_finish(c, 0);
	}
	return c->state == ST_GATHERING ? dpt__coord_gather(c, e->now)
					: c->state;
}

static enum coord_state on_fault(struct dpt__coord *c, struct peer *p,
				 const struct event_ctx *e)
{
	char desc[200], why[240];

	if (!p || p->role != ROLE_MEMBER || e->msg->generation != c->generation)
		return c->state;
	snprintf(why, sizeof(why), "%s reported a failed collective (%s)",
		 dpt__coord_describe(p, desc, sizeof(desc)),
		 dpt_strerror(e->msg->u.fault_code));
	return dpt__coord_end_generation(c, DPT_END_FAULT, p->rank, why,
					 e->now);
}

/* Every TASK_EXIT is acknowledged (slurmstepd waits for the ACK); returns
 * the task, or NULL for a task id the step does not have. */
static struct task *ack_task_exit(struct dpt__coord *c,
				  const struct event_ctx *e, char *st,
				  size_t size)
{
	uint32_t id = e->msg->u.task_exit.task_id;
	struct dpt__msg ack;

	dpt__msg_init(&ack, DPT_MSG_ACK, c->generation);
	ack.seq = e->msg->seq;
	dpt__coord_send_to_id(c, e->id, e->id_len, &ack);
	dpt__coord_format_status(e->msg->u.task_exit.status, st, size);
	if (id >= c->cfg.world_size) {
		dpt__warn("task %" PRIu32 " exited (%s): no such task in a "
			  "step of %" PRIu32,
			  id, st, c->cfg.world_size);
		return NULL;
	}
	return &c->tasks[id];
}

static enum coord_state on_task_exit(struct dpt__coord *c, struct peer *p,
				     const struct event_ctx *e)
{
	uint32_t id = e->msg->u.task_exit.task_id;
	int32_t status = e->msg->u.task_exit.status;
	char st[48], desc[200], why[240];
	struct task *t = ack_task_exit(c, e, st, sizeof(st));
	enum coord_state next;

	(void)p; /* the reporter is slurmstepd, not the task's worker */
	if (!t)
		return c->state;
	switch (t->state) {
	case TASK_UNSEEN:
		/* A clean exit without a join is a task that does not use
		 * libdptrain (it only read its environment): no failure. */
		if (status == 0)
			dpt__debug("task %" PRIu32
				   " exited (%s) without joining",
				   id, st);
		else
			dpt__warn("task %" PRIu32
				  " exited (%s) before it joined",
				  id, st);
		dpt__coord_task_event(c, id, TASK_EV_EXIT, NULL);
		if (!c->formed_any) {
			c->lost_before_first++;
			c->failed_before_first += status != 0;
			return c->state == ST_GATHERING
				       ? dpt__coord_gather(c, e->now)
				       : c->state;
		}
		return c->state;
	case TASK_GONE:
	case TASK_EXITED:
		dpt__debug("task %" PRIu32 " exited (%s) after it left", id,
			   st);
		dpt__coord_task_event(c, id, TASK_EV_EXIT, NULL);
		return c->state;
	}
	snprintf(why, sizeof(why), "%s exited (%s)",
		 dpt__coord_describe(t->peer, desc, sizeof(desc)), st);
	dpt__warn("evicting %s: its task exited (%s)", desc, st);
	next = dpt__coord_drop_peer(c, t->peer, DPT_END_TASK_EXIT, why, e->now);
	dpt__coord_task_event(c, id, TASK_EV_EXIT, NULL);
	return next;
}

/* The linger before a requeue (doc/walltime.md): a finished coordinator
 * still counts its tasks' exits. */
static enum coord_state on_task_exit_done(struct dpt__coord *c, struct peer *p,
					  const struct event_ctx *e)
{
	char st[48];
	struct task *t = ack_task_exit(c, e, st, sizeof(st));

	(void)p;
	if (t) {
		dpt__debug("task %" PRIu32 " exited (%s)",
			   e->msg->u.task_exit.task_id, st);
		dpt__coord_task_event(c, e->msg->u.task_exit.task_id,
				      TASK_EV_EXIT, NULL);
	}
	return ST_DONE;
}

/* A member's message from a routing id that is not (or no longer) a
 * peer: an evicted worker still talking. It is told, so that it re-joins
 * instead of waiting for a coordinator that ignores it. */
static enum coord_state on_stranger(struct dpt__coord *c, struct peer *p,
				    const struct event_ctx *e)
{
	struct dpt__msg end;

	(void)p;
	dpt__coord_text_msg(&end, DPT_MSG_GEN_END, e->msg->generation,
			    DPT_END_EVICTED, DPT_WIRE_NO_RANK,
			    "this worker is not a member: it was evicted");
	dpt__coord_send_to_id(c, e->id, e->id_len, &end);
	return c->state;
}

static enum coord_state on_peer_expired(struct dpt__coord *c, struct peer *p,
					const struct event_ctx *e)
{
	char desc[200], why[240];

	snprintf(why, sizeof(why), "%s was silent for %" PRIu32 " ms",
		 dpt__coord_describe(p, desc, sizeof(desc)), c->cfg.timeout_ms);
	dpt__warn("evicting %s: silent for %" PRIu32 " ms", desc,
		  c->cfg.timeout_ms);
	return dpt__coord_drop_peer(c, p, DPT_END_PEER_LOST, why, e->now);
}

static enum coord_state on_peer_closed(struct dpt__coord *c, struct peer *p,
				       const struct event_ctx *e)
{
	char desc[200], why[240];

	snprintf(why, sizeof(why), "%s lost its connection",
		 dpt__coord_describe(p, desc, sizeof(desc)));
	dpt__warn("evicting %s: its connection closed", desc);
	return dpt__coord_drop_peer(c, p, DPT_END_PEER_LOST, why, e->now);
}

/* GATHERING: whoever has not (re-)joined by now is dropped; the
 * generation forms with the others if they are enough. */
static enum coord_state on_join_timeout(struct dpt__coord *c, struct peer *p,
					const struct event_ctx *e)
{
	char desc[200], why[240];

	(void)p;
	c->join_deadline = 0;
	for (struct peer *q = dpt__coord_oldest_peer(c), *next; q; q = next) {
		next = dpt__coord_newer_peer(c, q);
		if (q->role != ROLE_WAITING)
			continue;
		snprintf(why, sizeof(why),
			 "%s did not re-join generation %" PRIu32
			 " within %" PRIu32 " ms",
			 dpt__coord_describe(q, desc, sizeof(desc)),
			 c->generation, c->cfg.join_timeout_ms);
		dpt__warn("dropping %s", why);
		dpt__coord_send_error(c, q, DPT_ETIMEDOUT, why, e->now);
		dpt__coord_peer_remove(c, q);
	}
	if (!c->formed_any)
		dpt__warn("%" PRIu32 " of %" PRIu32
			  " workers joined within %" PRIu32 " ms",
			  c->n_joining, c->cfg.world_size,
			  c->cfg.join_timeout_ms);
	return dpt__coord_form_generation(c, e->now);
}

/* ID_WAIT: rank 0 did not send the NCCL unique ID within the join
 * timeout; it is evicted and the generation ends. */
static enum coord_state on_id_timeout(struct dpt__coord *c, struct peer *p,
				      const struct event_ctx *e)
{
	char desc[200], why[240];

	(void)p;
	c->join_deadline = 0;
	p = c->members[0];
	if (!p)
		return c->state;
	snprintf(why, sizeof(why),
		 "%s did not send the nccl unique id within %" PRIu32 " ms",
		 dpt__coord_describe(p, desc, sizeof(desc)),
		 c->cfg.join_timeout_ms);
	dpt__warn("evicting %s: no nccl unique id within %" PRIu32 " ms", desc,
		  c->cfg.join_timeout_ms);
	return dpt__coord_drop_peer(c, p, DPT_END_PEER_LOST, why, e->now);
}

static enum coord_state on_shutdown(struct dpt__coord *c, struct peer *p,
				    const struct event_ctx *e)
{
	const char *why = e->msg ? e->msg->u.text.text : "shutdown";

	(void)p;
	/* The step ended without a worker connected (its tasks did not
	 * use libdptrain, or all left): a normal end, not a failure. */
	if (!dpt__coord_oldest_peer(c)) {
		dpt__info("%s: no worker is connected, exiting", why);
		return dpt__coord_finish(c, 0);
	}
	return dpt__coord_fail(c, DPT_ECLOSED, why, e->now);
}

static enum coord_state on_stop(struct dpt__coord *c, struct peer *p,
				const struct event_ctx *e)
{
	(void)p;
	(void)e;
	c->stopping = true;
	return c->state;
}

/*
 * The table of doc/protocol.md, "Transitions": the handler of an event in a
 * state. A cell left out is ignored (the document's last row, as zproto's
 * superstate: the event is logged at debug level and the state stays);
 * tests/unit/test_coord.c checks every cell, listed or not, against the
 * document's table.
 */
/* clang-format off */
#define TRANSITIONS(X)                                                        \
	X(GATHERING, JOIN, join)                                              \
	X(GATHERING, LEAVE, leave)                                            \
	X(GATHERING, TASK_EXIT, task_exit)                                    \
	X(GATHERING, STRANGER, stranger)                                      \
	X(GATHERING, PEER_EXPIRED, peer_expired)                              \
	X(GATHERING, PEER_CLOSED, peer_closed)                                \
	X(GATHERING, JOIN_TIMEOUT, join_timeout)                              \
	X(GATHERING, SHUTDOWN, shutdown)                                      \
	X(GATHERING, STOP, stop)                                              \
	X(ID_WAIT, JOIN, join)                                                \
	X(ID_WAIT, UNIQUE_ID, unique_id)                                      \
	X(ID_WAIT, BARRIER, barrier)                                          \
	X(ID_WAIT, LEAVE, leave)                                              \
	X(ID_WAIT, FAULT, fault)                                              \
	X(ID_WAIT, TASK_EXIT, task_exit)                                      \
	X(ID_WAIT, STRANGER, stranger)                                        \
	X(ID_WAIT, PEER_EXPIRED, peer_expired)                                \
	X(ID_WAIT, PEER_CLOSED, peer_closed)                                  \
	X(ID_WAIT, JOIN_TIMEOUT, id_timeout)                                  \
	X(ID_WAIT, SHUTDOWN, shutdown)                                        \
	X(ID_WAIT, STOP, stop)                                                \
	X(RUNNING, JOIN, join)                                                \
	X(RUNNING, BARRIER, barrier)                                          \
	X(RUNNING, LEAVE, leave)                                              \
	X(RUNNING, FAULT, fault)                                              \
	X(RUNNING, TASK_EXIT, task_exit)                                      \
	X(RUNNING, STRANGER, stranger)                                        \
	X(RUNNING, PEER_EXPIRED, peer_expired)                                \
	X(RUNNING, PEER_CLOSED, peer_closed)                                  \
	X(RUNNING, SHUTDOWN, shutdown)                                        \
	X(RUNNING, STOP, stop)                                                \
	X(DONE, TASK_EXIT, task_exit_done)

static const struct transition {
	handler_fn *fn;
	const char *name;
} transitions[ST_COUNT][EV_COUNT] = {
#define X(state, event, handler)                                              \
	[ST_##state][EV_##event] = {on_##handler, #handler},
	TRANSITIONS(X)
#undef X
};
/* clang-format on */

/* The cell of EV in state S, the default row where the table has none. */
static const struct transition *transition(int s, int ev)
{
	static const struct transition ignored = {on_ignore, "ignore"};

	return transitions[s][ev].fn ? &transitions[s][ev] : &ignored;
}

/*
 * Execute event EV in the current state: the one place where the state
 * machine of doc/protocol.md runs, and the only assignment of c->state.
 * P is the peer concerned (NULL for a sender that is not tracked, and for
 * timers that concern no peer).
 */
static void coord_execute(struct dpt__coord *c, enum coord_event ev,
			  struct peer *p, const struct event_ctx *e)
{
	const struct transition *t;
	enum coord_state before = c->state, next;

	/* Only this function assigns c->state, from handlers that return
	 * named states; a value out of the table would index past it. */
	DPT_ASSERT((unsigned)c->state < ST_COUNT && (unsigned)ev < EV_COUNT);
	t = transition(c->state, ev);
	next = t->fn(c, p, e);
	DPT_ASSERT((unsigned)next < ST_COUNT);
	if (t->fn == on_ignore)
		dpt__debug("%s ignored in %s", event_names[ev],
			   state_names[before]);
	if (c->observer)
		c->observer(c->observer_arg,
			    &(struct dpt__coord_cell){state_names[before],
						      event_names[ev], t->name},
			    state_names[next]);
	c->state = next;
	if (next != before)
		dpt__debug("%s: %s -> %s (generation %" PRIu32 ")",
			   event_names[ev], state_names[before],
			   state_names[next], c->generation);
}

size_t dpt__coord_table(struct dpt__coord_cell *cells, size_t max)
{
	size_t n = 0;

	for (int s = 0; s < ST_COUNT; s++)
		for (int ev = 0; ev < EV_COUNT; ev++, n++)
			if (n < max)
				cells[n] = (struct dpt__coord_cell){
					state_names[s], event_names[ev],
					transition(s, ev)->name};
	return n;
}

void dpt__coord_observe(struct dpt__coord *c, dpt__coord_observer *fn,
			void *arg)
{
	c->observer = fn;
	c->observer_arg = arg;
}

/* ------------------------------------------------------------ interface */

int dpt__coord_new(struct dpt__coord **out, const struct dpt__coord_config *cfg,
		   const struct dpt__coord_sender *sender, int64_t now)
{
	struct dpt__coord *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return DPT_ENOMEM;
	c->cfg = *cfg;
	c->sender = *sender;
	c->state = ST_GATHERING; /* then only coord_execute changes it */
	c->generation = 1;
	c->tasks = calloc(cfg->world_size, sizeof(*c->tasks));
	if (dpt__peer_table_init(&c->peers, cfg->world_size) || !c->tasks ||
	    dpt__kv_new(&c->kv, &c->sender)) {
		dpt__coord_destroy(&c);
		return DPT_ENOMEM;
	}
	c->next_heartbeat = now + cfg->heartbeat_ms;
	c->last_save = now;
	c->join_deadline =
		cfg->join_timeout_ms ? now + cfg->join_timeout_ms : 0;
	c->rl_malformed.window_start = now;
	c->rl_status.window_start = now;
	c->step = DPT_STATUS_NO_STEP;
	c->committed = DPT_STATUS_NO_STEP;
	*out = c;
	return 0;
}

void dpt__coord_destroy(struct dpt__coord **cp)
{
	struct dpt__coord *c = *cp;

	if (!c)
		return;
	if (c->peers.buckets)
		while (dpt__coord_oldest_peer(c))
			dpt__coord_peer_remove(c, dpt__coord_oldest_peer(c));
	dpt__peer_table_release(&c->peers);
	free(c->members);
	free(c->closed);
	free(c->tasks);
	dpt__kv_destroy(&c->kv);
	free(c);
	*cp = NULL;
}

/* The event of a message type from a worker (dpt__msg_from_worker);
 * EV_COUNT for any other: never executed. */
static enum coord_event event_of(uint8_t type)
{
	switch (type) {
	case DPT_MSG_JOIN:
		return EV_JOIN;
	case DPT_MSG_UNIQUE_ID:
		return EV_UNIQUE_ID;
	case DPT_MSG_BARRIER:
	case DPT_MSG_VOTE:
		return EV_BARRIER;
	case DPT_MSG_LEAVE:
		return EV_LEAVE;
	case DPT_MSG_FAULT:
		return EV_FAULT;
	case DPT_MSG_TASK_EXIT:
		return EV_TASK_EXIT;
	default:
		return EV_COUNT;
	}
}

/* Whether the connection on FD of the peer ID was reported closed and the
 * peer waits for its eviction: a message read after the close but sent
 * before it (ZeroMQ hands the two over through separate queues) must not
 * tie the peer to the descriptor again, or only the heartbeat timeout
 * would evict it. */
static bool closed_before(const struct dpt__coord *c, const void *id,
			  size_t len, int fd)
{
	for (size_t i = 0; i < c->nclosed; i++)
		if (c->closed[i].fd == fd && c->closed[i].len == len &&
		    memcmp(c->closed[i].id, id, len) == 0)
			return true;
	return false;
}

void dpt__coord_on_message(struct dpt__coord *c, const void *id, size_t id_len,
			   const void *data, size_t len, int fd, int64_t now)
{
	struct event_ctx e = {.id = id, .id_len = id_len, .fd = fd, .now = now};
	enum coord_event ev;
	struct peer *p;
	struct dpt__msg m;
	int rc;

	if (id_len == 0 || id_len > DPT_PEER_ID_MAX)
		return;
	rc = dpt__wire_decode(data, len, DPT_WIRE_IN_MAX, &m);
	p = dpt__coord_peer_find(c, id, id_len);
	/* Any traffic from a tracked peer proves it alive, even a message
	 * that turns out malformed. */
	if (p) {
		dpt__coord_peer_heard(c, p, now);
		if (!closed_before(c, id, id_len, fd))
			dpt__coord_peer_set_fd(c, p, fd);
	}
	if (rc == DPT_EVERSION && m.type == DPT_MSG_JOIN) {
		struct dpt__msg err;
		char why[160];
		snprintf(why, sizeof(why),
			 "protocol version %u is not supported: this "
			 "coordinator speaks version %d (use the same dptrain "
			 "release for the job and its workers)",
			 m.version, DPT_WIRE_VERSION);
		dpt__warn("refused a join: %s", why);
		dpt__coord_text_msg(&err, DPT_MSG_ERROR, 0, DPT_EVERSION,
				    DPT_WIRE_NO_RANK, why);
		dpt__coord_send_to_id(c, id, id_len, &err);
		return;
	}
	if (rc == 0 && !dpt__msg_from_worker(m.type))
		rc = DPT_EPROTO;
	if (rc) {
		long n = dpt__ratelimit(&c->rl_malformed, now, RL_BURST,
					RL_WINDOW_MS);

		if (n)
			dpt__warn("dropped a %zu-byte message from %s: %s%s",
				  len, p ? "a worker" : "an unknown peer",
				  dpt_strerror(rc),
				  n > 1 ? " (and more, not logged)" : "");
		return;
	}
	e.msg = &m;
	if (m.type == DPT_MSG_KV_PUT || m.type == DPT_MSG_KV_GET) {
		dpt__kv_on_message(c->kv, id, id_len, &m, now);
		if (m.type == DPT_MSG_KV_PUT)
			dpt__coord_on_report(c, m.u.kv.key, now);
		return;
	}
	if (m.type == DPT_MSG_STATUS) {
		dpt__coord_answer_status(c, id, id_len, m.seq, now);
		return;
	}
	/* A HEARTBEAT only refreshes its peer (above). Members' messages
	 * from a routing id that is not a peer are one event, STRANGER:
	 * only a JOIN makes a peer, and a TASK_EXIT comes from slurmstepd,
	 * which never is one. */
	if (m.type == DPT_MSG_HEARTBEAT && p)
		ev = EV_COUNT;
	else if (!p && m.type != DPT_MSG_JOIN && m.type != DPT_MSG_TASK_EXIT)
		ev = EV_STRANGER;
	else
		ev = event_of(m.type);
	if (ev != EV_COUNT)
		coord_execute(c, ev, p, &e);
	dpt__msg_release(&m);
}

void dpt__coord_on_disconnect(struct dpt__coord *c, int fd, int64_t now)
{
	struct dpt__peer_entry *p = dpt__peer_table_take_fd(&c->peers, fd);

	if (!p)
		return; /* a client that was not a peer, or a failed handshake
			 */
	if (dpt__array_room(&c->closed, c->nclosed, &c->closed_cap,
			    sizeof(*c->closed)))
		return; /* out of memory: the timeout finds it */
	c->closed[c->nclosed].at = now;
	c->closed[c->nclosed].fd = fd;
	c->closed[c->nclosed].len = p->id_len;
	memcpy(c->closed[c->nclosed].id, p->id, p->id_len);
	c->nclosed++;
}

/* Evict the peers whose connection closed CLOSE_GRACE_MS ago or more,
 * unless they left meanwhile (their LEAVE came before the close) or came
 * back on a new connection. The grace is for the last messages: ZeroMQ's
 * I/O thread hands a message to the socket and the close to the monitor
 * through two queues, and the close can be seen first (a worker's LEAVE
 * right before it exits was, under load: its clean exit taken for a
 * crash). */
static void evict_closed(struct dpt__coord *c, int64_t now)
{
	struct event_ctx e = {.fd = -1, .now = now};
	size_t kept = 0;

	for (size_t i = 0; i < c->nclosed; i++) {
		struct peer *p;

		if (now - c->closed[i].at < CLOSE_GRACE_MS) {
			c->closed[kept++] = c->closed[i];
			continue;
		}
		p = dpt__coord_peer_find(c, c->closed[i].id, c->closed[i].len);
		if (p && p->entry.fd < 0 && c->state != ST_DONE)
			coord_execute(c, EV_PEER_CLOSED, p, &e);
	}
	c->nclosed = kept;
}

void dpt__coord_on_tick(struct dpt__coord *c, int64_t now, int behind)
{
	struct event_ctx e = {.now = now};
	struct peer *p;

	/* Evictions first: the list is ordered by last contact, so only its
	 * head can be due. Each eviction removes the head. */
	if (!behind)
		evict_closed(c, now);
	while (!behind && c->state != ST_DONE &&
	       (p = dpt__coord_oldest_peer(c)) &&
	       now - p->entry.last_heard >= (int64_t)c->cfg.timeout_ms)
		coord_execute(c, EV_PEER_EXPIRED, p, &e);

	dpt__kv_on_tick(c->kv, now);
	if (c->state != ST_DONE && c->join_deadline && now >= c->join_deadline)
		coord_execute(c, EV_JOIN_TIMEOUT, NULL, &e);

	if (c->state != ST_DONE && now >= c->next_heartbeat) {
		struct dpt__msg m;
		dpt__msg_init(&m, DPT_MSG_HEARTBEAT, c->generation);
		for (p = dpt__coord_oldest_peer(c); p;
		     p = dpt__coord_newer_peer(c, p))
			if (now - p->last_sent >= (int64_t)c->cfg.heartbeat_ms)
				dpt__coord_send_msg(c, p, &m, now);
		c->next_heartbeat = now + c->cfg.heartbeat_ms / 2;
	}
}

int64_t dpt__coord_next_deadline(const struct dpt__coord *c)
{
	const struct dpt__peer_entry *oldest =
		dpt__peer_table_oldest(&c->peers);
	int64_t t = c->next_heartbeat;

	if (oldest) {
		int64_t exp = oldest->last_heard + c->cfg.timeout_ms;
		if (exp < t)
			t = exp;
	}
	if (c->join_deadline && c->join_deadline < t)
		t = c->join_deadline;
	if (c->nclosed && c->closed[0].at + CLOSE_GRACE_MS < t)
		t = c->closed[0].at + CLOSE_GRACE_MS;
	return t;
}

void dpt__coord_shutdown(struct dpt__coord *c, const char *why, int64_t now)
{
	struct dpt__msg m;
	struct event_ctx e = {.msg = &m, .now = now};

	dpt__coord_text_msg(&m, DPT_MSG_ERROR, c->generation, DPT_ECLOSED,
			    DPT_WIRE_NO_RANK, why);
	coord_execute(c, EV_SHUTDOWN, NULL, &e);
}

void dpt__coord_stop(struct dpt__coord *c, const char *why, int64_t now)
{
	struct event_ctx e = {.now = now};

	if (!c->stopping && c->state != ST_DONE) {
		dpt__warn("%s: the workers are told to stop at their next "
			  "vote",
			  why);
		snprintf(c->last, sizeof(c->last), "%s", why);
		dpt__coord_note_reason(c, DPT_EV_STOP, why);
	}
	coord_execute(c, EV_STOP, NULL, &e);
}

#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <zmq.h>

#include <dptrain/error.h>

#include "buf.h"
#include "coord.h"
#include "kv.h"
#include "log.h"
#include "peers.h"
#include "wire.h"

/* ------------------------------------------------------------ types */

/*
 * States and events of doc/protocol.md, "Coordinator state machine". The
 * names are the document's: tests/unit/test_coord.c checks that its table
 * and TRANSITIONS below agree cell for cell.
 */
/* clang-format off: it indents X-macro lists as continuation lines */
#define COORD_STATES(X)                                                       \
	X(GATHERING) /* generation G is being formed */                       \
	X(ID_WAIT)   /* G formed (NCCL): waiting for rank 0's unique ID */    \
	X(RUNNING)   /* G is live */                                          \
	X(DONE)	     /* finished: the event loop exits (or lingers) */

enum coord_state {
#define X(name) ST_##name,
	COORD_STATES(X)
#undef X
	ST_COUNT
};

static const char *const state_names[] = {
#define X(name) #name,
	COORD_STATES(X)
#undef X
};

#define COORD_EVENTS(X)                                                       \
	X(JOIN)		/* JOIN message */                                   \
	X(UNIQUE_ID)	/* UNIQUE_ID message */                              \
	X(BARRIER)	/* BARRIER or VOTE message */                        \
	X(LEAVE)	/* LEAVE message */                                  \
	X(FAULT)	/* FAULT message */                                  \
	X(TASK_EXIT)	/* TASK_EXIT message, from anyone */                 \
	X(STRANGER)	/* a member's message from a peer not tracked */     \
	X(PEER_EXPIRED) /* a peer was silent for timeout_ms */               \
	X(PEER_CLOSED)	/* a peer's connection closed CLOSE_GRACE_MS ago */  \
	X(JOIN_TIMEOUT) /* the join (or unique ID) deadline passed */        \
	X(SHUTDOWN)	/* a signal, or the parent process exited */        \
	X(STOP)		/* the job's end time is within the grace */

enum coord_event {
#define X(name) EV_##name,
	COORD_EVENTS(X)
#undef X
	EV_COUNT
};

static const char *const event_names[] = {
#define X(name) #name,
	COORD_EVENTS(X)
#undef X
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

enum task_state { TASK_UNSEEN = 0, TASK_JOINED, TASK_GONE, TASK_EXITED };

struct task {
	struct peer *peer; /* while TASK_JOINED */
	uint8_t state;
};

/* At most BURST messages of one kind per WINDOW_MS, then a count of the
 * suppressed ones: a hostile or broken client cannot flood the log. */
struct ratelimit {
	int64_t window_start;
	int count;
	long suppressed;
};
#define RL_BURST 5
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
	/* Peers whose connection closed, by routing id and when, evicted
	 * CLOSE_GRACE_MS later, once the messages they sent before the close
	 * have been handled. */
	struct closed_id {
		int64_t at;
		uint8_t len;
		uint8_t id[DPT_PEER_ID_MAX];
	} *closed;
	size_t nclosed, closed_cap;
	uint32_t n_joining, n_waiting;
	uint64_t join_counter;
	uint32_t lost_before_first; /* tasks gone before generation 1 */
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
	int64_t last_save; /* when SAVE was last sent (or the start) */
	uint32_t barrier_seq; /* barriers completed in this generation */
	uint32_t barrier_count;
	uint8_t last_id[DPT_NCCL_ID_SIZE];
	bool have_last_id;

	struct task *tasks; /* indexed by task id, world_size entries */
	int64_t next_heartbeat;
	int64_t join_deadline; /* 0: none */
	struct ratelimit rl_malformed;
	struct dpt__kv *kv; /* MASTER_ADDR/MASTER_PORT for the tasks */
	dpt__coord_observer *observer; /* tests: every executed cell */
	void *observer_arg;
};

/* ------------------------------------------------------------ logging */

static bool rl_allow(struct ratelimit *rl, int64_t now)
{
	if (now - rl->window_start >= RL_WINDOW_MS) {
		if (rl->suppressed)
			dpt__warn("%ld similar messages suppressed",
				  rl->suppressed);
		rl->window_start = now;
		rl->count = 0;
		rl->suppressed = 0;
	}
	if (rl->count < RL_BURST) {
		rl->count++;
		return true;
	}
	rl->suppressed++;
	return false;
}

/* "rank 3 (task 3, node-1 10.0.0.5 pid 812)": what an admin needs to find
 * the process. */
static const char *describe(const struct peer *p, char *buf, size_t size)
{
	char rank[32] = "worker", task[32] = "";

	if (p->role == ROLE_MEMBER)
		snprintf(rank, sizeof(rank), "rank %" PRIu32, p->rank);
	if (p->join.task_id != DPT_WIRE_NO_TASK)
		snprintf(task, sizeof(task), "task %" PRIu32 ", ",
			 p->join.task_id);
	snprintf(buf, size, "%s (%s%s%s%s pid %" PRIu32 ")", rank, task,
		 p->join.name, p->join.name[0] ? " " : "", p->join.addr.host,
		 p->join.pid);
	return buf;
}

static void format_status(int32_t status, char *buf, size_t size)
{
	int s = (int)status;
	if (WIFEXITED(s))
		snprintf(buf, size, "exit code %d", WEXITSTATUS(s));
	else if (WIFSIGNALED(s))
		snprintf(buf, size, "signal %d", WTERMSIG(s));
	else
		snprintf(buf, size, "status %d", s);
}

/* ------------------------------------------------------------ peers */

static struct peer *peer_of(struct dpt__peer_entry *e)
{
	/* The entry is the first member of its peer. */
	return (struct peer *)e;
}

static struct peer *peer_find(struct dpt__coord *c, const uint8_t *id,
			      size_t len)
{
	struct dpt__peer_entry *e = dpt__peer_table_find(&c->peers, id, len);

	return e ? peer_of(e) : NULL;
}

/* The least recently heard peer, or NULL; the next one after P. */
static struct peer *oldest_peer(const struct dpt__coord *c)
{
	struct dpt__peer_entry *e = dpt__peer_table_oldest(&c->peers);

	return e ? peer_of(e) : NULL;
}

static struct peer *newer_peer(const struct dpt__coord *c, struct peer *p)
{
	struct dpt__peer_entry *e = dpt__peer_table_newer(&c->peers, &p->entry);

	return e ? peer_of(e) : NULL;
}

/* Any traffic from a peer proves it alive: O(1), whatever the number of
 * peers. */
static void peer_heard(struct dpt__coord *c, struct peer *p, int64_t now)
{
	dpt__peer_table_heard(&c->peers, &p->entry, now);
}

static struct peer *peer_add(struct dpt__coord *c, const uint8_t *id,
			     size_t len, int64_t now)
{
	struct peer *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	if (dpt__peer_table_add(&c->peers, &p->entry, id, len, now) != 0) {
		free(p);
		return NULL;
	}
	p->last_sent = now;
	p->role = ROLE_JOINING;
	c->n_joining++;
	return p;
}

static void set_role(struct dpt__coord *c, struct peer *p, enum peer_role r)
{
	if (p->role == ROLE_JOINING)
		c->n_joining--;
	else if (p->role == ROLE_WAITING)
		c->n_waiting--;
	if (r == ROLE_JOINING)
		c->n_joining++;
	else if (r == ROLE_WAITING)
		c->n_waiting++;
	p->role = r;
}

/* P's messages come from descriptor FD (-1: unknown); see
 * dpt__peer_table_set_fd. */
static void peer_set_fd(struct dpt__coord *c, struct peer *p, int fd)
{
	dpt__peer_table_set_fd(&c->peers, &p->entry, fd);
}

/* Forget P. Its task, if any, is marked gone; as a member, its rank's slot
 * is emptied (the caller decides what that means for the generation). */
static void peer_remove(struct dpt__coord *c, struct peer *p)
{
	dpt__peer_table_remove(&c->peers, &p->entry);
	if (p->role == ROLE_JOINING)
		c->n_joining--;
	else if (p->role == ROLE_WAITING)
		c->n_waiting--;
	else if (p->rank < c->world && c->members[p->rank] == p) {
		c->members[p->rank] = NULL;
		c->active--;
	}
	if (p->join.task_id < c->cfg.world_size &&
	    c->tasks[p->join.task_id].peer == p) {
		c->tasks[p->join.task_id].peer = NULL;
		c->tasks[p->join.task_id].state = TASK_GONE;
	}
	free(p);
}

/* ------------------------------------------------------------ sending */

int dpt__coord_send(const struct dpt__coord_sender *s, const uint8_t *id,
		    size_t id_len, const struct dpt__msg *m)
{
	uint8_t buf[DPT_WIRE_IN_MAX];
	long len = dpt__wire_encode(m, buf, sizeof(buf));
	zmq_msg_t msg;
	int rc;

	if (len < 0) {
		dpt__error("cannot encode %s: %s", dpt__msg_type_name(m->type),
			   dpt_strerror((int)len));
		return (int)len;
	}
	if (zmq_msg_init_size(&msg, (size_t)len) != 0)
		return DPT_ENOMEM;
	memcpy(zmq_msg_data(&msg), buf, (size_t)len);
	rc = s->send(s->arg, id, id_len, &msg);
	zmq_msg_close(&msg);
	return rc;
}

static void send_raw(struct dpt__coord *c, struct peer *p, zmq_msg_t *msg,
		     int64_t now)
{
	/* Never blocks: a peer whose queue is full loses the message, and
	 * the protocol recovers from that through timeouts. */
	if (c->sender.send(c->sender.arg, p->entry.id, p->entry.id_len, msg) !=
	    0)
		return;
	p->last_sent = now;
}

static void send_msg(struct dpt__coord *c, struct peer *p,
		     const struct dpt__msg *m, int64_t now)
{
	if (dpt__coord_send(&c->sender, p->entry.id, p->entry.id_len, m) == 0)
		p->last_sent = now;
}

/* Reply to an identity that is not (or no longer) a tracked peer. */
static void send_to_id(struct dpt__coord *c, const uint8_t *id, size_t id_len,
		       const struct dpt__msg *m)
{
	dpt__coord_send(&c->sender, id, id_len, m);
}

static void text_msg(struct dpt__msg *m, enum dpt__msg_type type,
		     uint32_t generation, int32_t code, uint32_t lost_rank,
		     const char *text)
{
	dpt__msg_init(m, type, generation);
	m->u.text.code = code;
	m->u.text.lost_rank = lost_rank;
	/* Texts are built from validated fields and our own words; cut at
	 * the protocol's limit. */
	size_t n = strlen(text);
	if (n > DPT_WIRE_TEXT_MAX)
		n = DPT_WIRE_TEXT_MAX;
	memcpy(m->u.text.text, text, n);
	m->u.text.text[n] = '\0';
}

static void send_error(struct dpt__coord *c, struct peer *p, int code,
		       const char *text, int64_t now)
{
	struct dpt__msg m;
	text_msg(&m, DPT_MSG_ERROR, c->generation, code, DPT_WIRE_NO_RANK,
		 text);
	send_msg(c, p, &m, now);
}

/* ------------------------------------------------------------ actions */

/*
 * The actions of doc/protocol.md. Those that can change the state return
 * the state that follows; only coord_execute assigns it. A handler that
 * calls an action must go on from the state the action returned, not
 * from c->state, which is still the state the event arrived in.
 */

static enum coord_state gather(struct dpt__coord *c, int64_t now);

/* Finish with EXIT_CODE. */
static enum coord_state finish(struct dpt__coord *c, int exit_code)
{
	c->exit_code = exit_code;
	return ST_DONE;
}

/* fail: fewer than --min-workers can still take part, or a fatal
 * configuration: tell everyone, finish with status 1. */
static enum coord_state fail(struct dpt__coord *c, int code, const char *why,
			     int64_t now)
{
	dpt__error("%s: the job cannot go on", why);
	for (struct peer *p = oldest_peer(c); p; p = newer_peer(c, p))
		send_error(c, p, code, why, now);
	return finish(c, 1);
}

static int cmp_join(const void *a, const void *b)
{
	const struct peer *p = *(struct peer *const *)a;
	const struct peer *q = *(struct peer *const *)b;

	if (p->join.node != q->join.node)
		return p->join.node < q->join.node ? -1 : 1;
	if (p->join.local_rank != q->join.local_rank)
		return p->join.local_rank < q->join.local_rank ? -1 : 1;
	return p->join_order < q->join_order ? -1 : 1;
}

/* Returns 0 or DPT_ENOMEM (nothing was sent). */
static int send_roster(struct dpt__coord *c, int64_t now)
{
	struct dpt__peer *peers = calloc(c->world, sizeof(*peers));
	struct dpt__msg m;
	zmq_msg_t roster;
	size_t size;

	if (!peers)
		return DPT_ENOMEM;
	for (uint32_t r = 0; r < c->world; r++) {
		peers[r] = c->members[r]->join.addr;
		peers[r].node = c->members[r]->join.node;
	}
	dpt__msg_init(&m, DPT_MSG_ROSTER, c->generation);
	m.world = c->world;
	m.roster = peers;
	size = dpt__wire_size(&m);
	if (!size || zmq_msg_init_size(&roster, size) != 0) {
		free(peers);
		return DPT_ENOMEM;
	}
	dpt__wire_encode(&m, zmq_msg_data(&roster), size);
	free(peers);
	/* One encoding for all: the sender shares the buffer (zmq_msg_copy),
	 * so N members cost N sends, not N encodings and copies. */
	for (uint32_t r = 0; r < c->world; r++)
		send_raw(c, c->members[r], &roster, now);
	zmq_msg_close(&roster);
	return 0;
}

/* form: every expected peer has joined (or the join timeout passed). */
static enum coord_state form_generation(struct dpt__coord *c, int64_t now)
{
	uint32_t n = c->n_joining, i = 0, caps = DPT_CAP_CPU | DPT_CAP_NCCL;
	uint32_t nodes = 0, start = 0;
	struct peer **m;
	char why[200];

	if (n < c->cfg.min_workers || n == 0) {
		snprintf(why, sizeof(why),
			 "only %" PRIu32 " workers for generation %" PRIu32
			 " (--min-workers %" PRIu32 ")",
			 n, c->generation, c->cfg.min_workers);
		return fail(c, DPT_EPEERLOST, why, now);
	}
	m = realloc(c->members, n * sizeof(*m));
	if (!m)
		return fail(c, DPT_ENOMEM, "out of memory", now);
	c->members = m;
	for (struct peer *p = oldest_peer(c); p; p = newer_peer(c, p))
		if (p->role == ROLE_JOINING) {
			m[i++] = p;
			caps &= p->join.caps;
		}
	if (!caps)
		return fail(c, DPT_ECONFIG,
			    "the workers share no backend: some can run only "
			    "nccl, others only cpu (check DPTRAIN_BACKEND)",
			    now);
	qsort(m, n, sizeof(*m), cmp_join);
	c->world = n;
	c->active = n;
	c->backend = (caps & DPT_CAP_NCCL) ? DPT_BACKEND_NCCL : DPT_BACKEND_CPU;
	c->any_left = false;
	c->barrier_seq = 0;
	c->barrier_count = 0;
	c->formed_any = true;
	c->join_deadline = 0;
	for (i = 0; i < n; i++) {
		m[i]->rank = i;
		m[i]->barrier_seq = 0;
		m[i]->voted = false;
		set_role(c, m[i], ROLE_MEMBER);
	}
	/* Ranks of a node are consecutive: local ranks and sizes come from
	 * each run of equal node indices. */
	for (i = 0; i <= n; i++) {
		if (i < n && m[i]->join.node == m[start]->join.node)
			continue;
		for (uint32_t r = start; r < i; r++) {
			struct dpt__msg w;
			dpt__msg_init(&w, DPT_MSG_WELCOME, c->generation);
			w.u.welcome = (struct dpt__msg_welcome){
				.rank = r,
				.world = n,
				.local_rank = r - start,
				.local_world = i - start,
				.backend = c->backend,
				.flags = (r == 0 &&
					  c->backend == DPT_BACKEND_NCCL) ?
						 DPT_WELCOME_CREATE_ID :
						 0,
				.heartbeat_ms = c->cfg.heartbeat_ms,
				.timeout_ms = c->cfg.timeout_ms,
			};
			send_msg(c, m[r], &w, now);
		}
		nodes++;
		start = i;
	}
	dpt__info("generation %" PRIu32 " formed: %" PRIu32
		  " workers on %" PRIu32 " node%s, %s backend",
		  c->generation, n, nodes, nodes == 1 ? "" : "s",
		  c->backend == DPT_BACKEND_NCCL ? "nccl" : "cpu");
	if (c->backend == DPT_BACKEND_CPU) {
		if (send_roster(c, now) != 0)
			return fail(c, DPT_ENOMEM, "cannot encode the roster",
				    now);
		return ST_RUNNING;
	}
	/* Rank 0 must send the unique ID within the join timeout. */
	if (c->cfg.join_timeout_ms)
		c->join_deadline = now + c->cfg.join_timeout_ms;
	return ST_ID_WAIT;
}

/* end: the live generation is over; its members must re-join G+1.
 * Returns GATHERING, or what the gathering leads to at once. */
static enum coord_state end_generation(struct dpt__coord *c, uint32_t reason,
				       uint32_t lost_rank, const char *why,
				       int64_t now)
{
	struct dpt__msg m;

	text_msg(&m, DPT_MSG_GEN_END, c->generation, (int32_t)reason,
		 lost_rank, why);
	for (uint32_t r = 0; r < c->world; r++) {
		struct peer *p = c->members[r];
		if (!p)
			continue;
		send_msg(c, p, &m, now);
		set_role(c, p, ROLE_WAITING);
		c->members[r] = NULL;
	}
	dpt__warn("generation %" PRIu32 " ended: %s; %" PRIu32
		  " workers re-joining generation %" PRIu32,
		  c->generation, why, c->n_waiting, c->generation + 1);
	c->world = 0;
	c->active = 0;
	c->generation++;
	c->join_deadline = c->cfg.join_timeout_ms ?
				   now + c->cfg.join_timeout_ms :
				   0;
	return gather(c, now);
}

/* Drop P (evicted, exited or timed out). A member's departure ends the
 * live generation with REASON; otherwise a gathering is re-checked. */
static enum coord_state drop_peer(struct dpt__coord *c, struct peer *p,
				  uint32_t reason, const char *why,
				  int64_t now)
{
	bool member = p->role == ROLE_MEMBER;
	uint32_t rank = p->rank;
	struct dpt__msg m;

	/* Best effort: a live but evicted worker learns it at once. */
	text_msg(&m, DPT_MSG_GEN_END, c->generation, DPT_END_EVICTED,
		 member ? rank : DPT_WIRE_NO_RANK, why);
	send_msg(c, p, &m, now);
	if (!c->formed_any && p->role != ROLE_MEMBER)
		c->lost_before_first++;
	peer_remove(c, p);
	if (member)
		return end_generation(c, reason, rank, why, now);
	return c->state == ST_GATHERING ? gather(c, now) : c->state;
}

/*
 * In GATHERING (only): form the generation once every expected peer
 * joined, fail when fewer than --min-workers can still come. Returns the
 * state that follows.
 */
static enum coord_state gather(struct dpt__coord *c, int64_t now)
{
	uint32_t target, possible;
	char why[200];

	if (!c->formed_any) {
		target = c->cfg.world_size - c->lost_before_first;
		possible = target;
	} else {
		target = c->n_joining + c->n_waiting;
		possible = target;
	}
	if (!c->formed_any && possible == 0 && c->failed_before_first == 0) {
		dpt__info("every task of the step exited cleanly without "
			  "joining: nothing to coordinate");
		return finish(c, 0);
	}
	if (possible < c->cfg.min_workers || possible == 0) {
		snprintf(why, sizeof(why),
			 "only %" PRIu32 " workers left for generation %" PRIu32
			 " (--min-workers %" PRIu32 ")",
			 possible, c->generation, c->cfg.min_workers);
		return fail(c, DPT_EPEERLOST, why, now);
	}
	if (c->n_waiting == 0 && c->n_joining >= target)
		return form_generation(c, now);
	return ST_GATHERING;
}

/* Releases the barrier once every member has arrived: BARRIER_DONE to
 * those that sent BARRIER, VOTE_DONE (how many voted a failure, the code
 * of the lowest such rank) to those that sent VOTE. */
static void check_barrier(struct dpt__coord *c, int64_t now)
{
	struct dpt__msg done, vote;
	uint32_t voters = 0;

	if (c->active == 0 || c->barrier_count < c->active)
		return;
	c->barrier_seq++;
	c->barrier_count = 0;
	dpt__msg_init(&done, DPT_MSG_BARRIER_DONE, c->generation);
	dpt__msg_init(&vote, DPT_MSG_VOTE_DONE, c->generation);
	done.seq = vote.seq = c->barrier_seq;
	if (c->stopping)
		vote.u.vote.flags = DPT_VOTE_STOP;
	if (c->cfg.save_every_ms && now - c->last_save >= c->cfg.save_every_ms)
		vote.u.vote.flags |= DPT_VOTE_SAVE;
	for (uint32_t r = 0; r < c->world; r++) {
		struct peer *p = c->members[r];

		if (!p || !p->voted)
			continue;
		voters++;
		/* A member's SAVE (rank 0's auto interval, protocol 4)
		 * reaches every member in this same answer. */
		vote.u.vote.flags |= p->vote_flags &
				     (DPT_VOTE_BUSY | DPT_VOTE_SAVE);
		if (p->vote && vote.u.vote.failed++ == 0)
			vote.u.vote.code = p->vote;
	}
	if (vote.u.vote.failed)
		dpt__warn("vote %" PRIu32 " of generation %" PRIu32 ": %" PRIu32
			  " of %" PRIu32 " members failed (first: %s)",
			  c->barrier_seq, c->generation, vote.u.vote.failed,
			  voters, dpt_strerror(vote.u.vote.code));
	for (uint32_t r = 0; r < c->world; r++) {
		struct peer *p = c->members[r];

		if (!p)
			continue;
		send_msg(c, p, p->voted ? &vote : &done, now);
		c->stop_sent |= p->voted && c->stopping;
		if (p->voted && (vote.u.vote.flags & DPT_VOTE_SAVE))
			c->last_save = now;
		p->voted = false;
	}
}

/* Whether a newcomer may join now; sends the refusal if not. */
static bool room_for_newcomer(struct dpt__coord *c, const uint8_t *id,
			      size_t id_len)
{
	uint32_t count = c->n_joining + c->n_waiting + c->active;
	struct dpt__msg m;
	char why[160];

	if (c->any_left)
		snprintf(why, sizeof(why),
			 "the job is finishing: members have left");
	else if (!c->formed_any &&
		 count >= c->cfg.world_size - c->lost_before_first)
		snprintf(why, sizeof(why),
			 "the job already has its %" PRIu32 " workers",
			 c->cfg.world_size);
	else if (count >= c->cfg.world_size)
		snprintf(why, sizeof(why),
			 "the job already has its %" PRIu32 " workers",
			 c->cfg.world_size);
	else
		return true;
	dpt__warn("refused a join: %s", why);
	text_msg(&m, DPT_MSG_ERROR, c->generation, DPT_EBUSY, DPT_WIRE_NO_RANK,
		 why);
	send_to_id(c, id, id_len, &m);
	return false;
}

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
	struct task *t = j->task_id < c->cfg.world_size ? &c->tasks[j->task_id] :
							  NULL;
	enum coord_state st = c->state;

	if (t && t->state == TASK_JOINED && t->peer != p) {
		struct dpt__msg m;
		snprintf(why, sizeof(why),
			 "task %" PRIu32 " has already joined from another "
			 "connection",
			 j->task_id);
		dpt__warn("refused a join from %s pid %" PRIu32 ": %s",
			  j->addr.host, j->pid, why);
		text_msg(&m, DPT_MSG_ERROR, c->generation, DPT_EEXIST,
			 DPT_WIRE_NO_RANK, why);
		send_to_id(c, e->id, e->id_len, &m);
		return st;
	}
	if (t && t->state == TASK_EXITED) {
		/* A late message from a task that Slurm reported dead. */
		struct dpt__msg m;
		snprintf(why, sizeof(why),
			 "task %" PRIu32 " was reported exited", j->task_id);
		text_msg(&m, DPT_MSG_ERROR, c->generation, DPT_ECLOSED,
			 DPT_WIRE_NO_RANK, why);
		send_to_id(c, e->id, e->id_len, &m);
		return st;
	}

	if (!p) {
		if (!room_for_newcomer(c, e->id, e->id_len))
			return st;
		if (st != ST_GATHERING)
			st = end_generation(c, DPT_END_GROW, DPT_WIRE_NO_RANK,
					    "a new worker wants to join",
					    e->now);
		if (st == ST_DONE)
			return st;
		p = peer_add(c, e->id, e->id_len, e->now);
		if (!p) {
			dpt__error("out of memory: dropped a join");
			return st;
		}
		peer_set_fd(c, p, e->fd);
	} else if (p->role == ROLE_MEMBER) {
		/* A member re-joins: its data plane broke, or it called
		 * dpt_rejoin. The generation is over for everyone. */
		snprintf(why, sizeof(why), "%s re-joined",
			 describe(p, desc, sizeof(desc)));
		st = end_generation(c, DPT_END_FAULT, p->rank, why, e->now);
		if (st == ST_DONE)
			return st;
	}
	/* A JOIN repeated while joining keeps its place in the order. */
	if (p->role != ROLE_JOINING || p->join_order == 0)
		p->join_order = ++c->join_counter;
	if (p->join.task_id < c->cfg.world_size &&
	    p->join.task_id != j->task_id &&
	    c->tasks[p->join.task_id].peer == p) {
		/* The same connection now claims another task id. */
		c->tasks[p->join.task_id].peer = NULL;
		c->tasks[p->join.task_id].state = TASK_UNSEEN;
	}
	p->join = *j;
	set_role(c, p, ROLE_JOINING);
	if (t) {
		t->peer = p;
		t->state = TASK_JOINED;
	}
	dpt__info("%s joins generation %" PRIu32 " (%" PRIu32 " of %" PRIu32
		  ")",
		  describe(p, desc, sizeof(desc)), c->generation, c->n_joining,
		  c->formed_any ? c->n_joining + c->n_waiting :
				  c->cfg.world_size - c->lost_before_first);
	/* Formed generations end above: a JOIN always finds GATHERING
	 * here, or a generation that is already being formed again. */
	return st == ST_GATHERING ? gather(c, e->now) : st;
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
		return end_generation(c, DPT_END_FAULT, 0,
				      "rank 0 sent the previous generation's "
				      "nccl unique id",
				      e->now);
	memcpy(c->last_id, e->msg->u.unique_id, DPT_NCCL_ID_SIZE);
	c->have_last_id = true;
	dpt__msg_init(&m, DPT_MSG_UNIQUE_ID, c->generation);
	memcpy(m.u.unique_id, e->msg->u.unique_id, DPT_NCCL_ID_SIZE);
	for (uint32_t r = 0; r < c->world; r++)
		if (c->members[r])
			send_msg(c, c->members[r], &m, e->now);
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

	if (!p || p->role != ROLE_MEMBER ||
	    e->msg->generation != c->generation)
		return c->state;
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
		dpt__warn("stop requested by %s: the workers are told to stop "
			  "at this vote",
			  describe(p, desc, sizeof(desc)));
		c->stopping = true;
	}
	c->barrier_count++;
	check_barrier(c, e->now);
	return c->state;
}

static enum coord_state on_leave(struct dpt__coord *c, struct peer *p,
				 const struct event_ctx *e)
{
	char desc[200], why[240];

	if (!p)
		return c->state;
	describe(p, desc, sizeof(desc));
	if (p->role == ROLE_MEMBER && c->state == ST_ID_WAIT) {
		snprintf(why, sizeof(why), "%s left before the generation "
			 "was running", desc);
		return drop_peer(c, p, DPT_END_LEFT, why, e->now);
	}
	dpt__info("%s left", desc);
	if (p->role == ROLE_MEMBER) {
		c->any_left = true;
		/* The member left, so it cannot count in a barrier any more:
		 * un-count it if it had arrived. */
		if (p->barrier_seq == c->barrier_seq + 1)
			c->barrier_count--;
		if (p->join.task_id < c->cfg.world_size)
			c->tasks[p->join.task_id].state = TASK_GONE;
		peer_remove(c, p);
		if (c->active == 0 && c->n_joining == 0 && c->n_waiting == 0) {
			dpt__info("every member of generation %" PRIu32
				  " left: exiting",
				  c->generation);
			return finish(c, 0);
		}
		check_barrier(c, e->now);
		return c->state;
	}
	if (!c->formed_any)
		c->lost_before_first++;
	peer_remove(c, p);
	if (c->formed_any && c->peers.count == 0) {
		/* The survivors of a broken generation chose to finish
		 * rather than re-join: that is a clean end too. */
		dpt__info("every worker left: exiting");
		return finish(c, 0);
	}
	return c->state == ST_GATHERING ? gather(c, e->now) : c->state;
}

static enum coord_state on_fault(struct dpt__coord *c, struct peer *p,
				 const struct event_ctx *e)
{
	char desc[200], why[240];

	if (!p || p->role != ROLE_MEMBER ||
	    e->msg->generation != c->generation)
		return c->state;
	snprintf(why, sizeof(why), "%s reported a failed collective (%s)",
		 describe(p, desc, sizeof(desc)),
		 dpt_strerror(e->msg->u.fault_code));
	return end_generation(c, DPT_END_FAULT, p->rank, why, e->now);
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
	send_to_id(c, e->id, e->id_len, &ack);
	format_status(e->msg->u.task_exit.status, st, size);
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
			dpt__debug("task %" PRIu32 " exited (%s) without joining",
				   id, st);
		else
			dpt__warn("task %" PRIu32 " exited (%s) before it joined",
				  id, st);
		t->state = TASK_EXITED;
		if (!c->formed_any) {
			c->lost_before_first++;
			c->failed_before_first += status != 0;
			return c->state == ST_GATHERING ? gather(c, e->now) :
							  c->state;
		}
		return c->state;
	case TASK_GONE:
	case TASK_EXITED:
		dpt__debug("task %" PRIu32 " exited (%s) after it left", id,
			   st);
		t->state = TASK_EXITED;
		return c->state;
	}
	snprintf(why, sizeof(why), "%s exited (%s)",
		 describe(t->peer, desc, sizeof(desc)), st);
	dpt__warn("evicting %s: its task exited (%s)", desc, st);
	next = drop_peer(c, t->peer, DPT_END_TASK_EXIT, why, e->now);
	t->state = TASK_EXITED; /* after drop_peer, which says GONE */
	return next;
}

/* The linger before a requeue (doc/walltime.md): a finished coordinator
 * still counts its tasks' exits. */
static enum coord_state on_task_exit_done(struct dpt__coord *c,
					  struct peer *p,
					  const struct event_ctx *e)
{
	char st[48];
	struct task *t = ack_task_exit(c, e, st, sizeof(st));

	(void)p;
	if (t) {
		dpt__debug("task %" PRIu32 " exited (%s)",
			   e->msg->u.task_exit.task_id, st);
		t->state = TASK_EXITED;
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
	text_msg(&end, DPT_MSG_GEN_END, e->msg->generation, DPT_END_EVICTED,
		 DPT_WIRE_NO_RANK, "this worker is not a member: it was evicted");
	send_to_id(c, e->id, e->id_len, &end);
	return c->state;
}

static enum coord_state on_peer_expired(struct dpt__coord *c, struct peer *p,
					const struct event_ctx *e)
{
	char desc[200], why[240];

	snprintf(why, sizeof(why), "%s was silent for %" PRIu32 " ms",
		 describe(p, desc, sizeof(desc)), c->cfg.timeout_ms);
	dpt__warn("evicting %s: silent for %" PRIu32 " ms", desc,
		  c->cfg.timeout_ms);
	return drop_peer(c, p, DPT_END_PEER_LOST, why, e->now);
}

static enum coord_state on_peer_closed(struct dpt__coord *c, struct peer *p,
				       const struct event_ctx *e)
{
	char desc[200], why[240];

	snprintf(why, sizeof(why), "%s lost its connection",
		 describe(p, desc, sizeof(desc)));
	dpt__warn("evicting %s: its connection closed", desc);
	return drop_peer(c, p, DPT_END_PEER_LOST, why, e->now);
}

/* GATHERING: whoever has not (re-)joined by now is dropped; the
 * generation forms with the others if they are enough. */
static enum coord_state on_join_timeout(struct dpt__coord *c, struct peer *p,
					const struct event_ctx *e)
{
	char desc[200], why[240];

	(void)p;
	c->join_deadline = 0;
	for (struct peer *q = oldest_peer(c), *next; q; q = next) {
		next = newer_peer(c, q);
		if (q->role != ROLE_WAITING)
			continue;
		snprintf(why, sizeof(why),
			 "%s did not re-join generation %" PRIu32
			 " within %" PRIu32 " ms",
			 describe(q, desc, sizeof(desc)), c->generation,
			 c->cfg.join_timeout_ms);
		dpt__warn("dropping %s", why);
		send_error(c, q, DPT_ETIMEDOUT, why, e->now);
		peer_remove(c, q);
	}
	if (!c->formed_any)
		dpt__warn("%" PRIu32 " of %" PRIu32
			  " workers joined within %" PRIu32 " ms",
			  c->n_joining, c->cfg.world_size,
			  c->cfg.join_timeout_ms);
	return form_generation(c, e->now);
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
		 describe(p, desc, sizeof(desc)), c->cfg.join_timeout_ms);
	dpt__warn("evicting %s: no nccl unique id within %" PRIu32 " ms", desc,
		  c->cfg.join_timeout_ms);
	return drop_peer(c, p, DPT_END_PEER_LOST, why, e->now);
}

static enum coord_state on_shutdown(struct dpt__coord *c, struct peer *p,
				    const struct event_ctx *e)
{
	const char *why = e->msg ? e->msg->u.text.text : "shutdown";

	(void)p;
	/* The step ended without a worker connected (its tasks did not
	 * use libdptrain, or all left): a normal end, not a failure. */
	if (!oldest_peer(c)) {
		dpt__info("%s: no worker is connected, exiting", why);
		return finish(c, 0);
	}
	return fail(c, DPT_ECLOSED, why, e->now);
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
 * The table of doc/protocol.md, "Transitions": the handler of every event
 * in every state, each cell spelt out (no default: a cell left out is a
 * compile-time NULL that tests/unit/test_coord.c reports). The document's
 * table lists the same cells with the same handler names.
 */
/* clang-format off */
#define TRANSITIONS(X)                                                        \
	X(GATHERING, JOIN, join)                                              \
	X(GATHERING, UNIQUE_ID, ignore)                                       \
	X(GATHERING, BARRIER, ignore)                                         \
	X(GATHERING, LEAVE, leave)                                            \
	X(GATHERING, FAULT, ignore)                                           \
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
	X(RUNNING, UNIQUE_ID, ignore)                                         \
	X(RUNNING, BARRIER, barrier)                                          \
	X(RUNNING, LEAVE, leave)                                              \
	X(RUNNING, FAULT, fault)                                              \
	X(RUNNING, TASK_EXIT, task_exit)                                      \
	X(RUNNING, STRANGER, stranger)                                        \
	X(RUNNING, PEER_EXPIRED, peer_expired)                                \
	X(RUNNING, PEER_CLOSED, peer_closed)                                  \
	X(RUNNING, JOIN_TIMEOUT, ignore)                                      \
	X(RUNNING, SHUTDOWN, shutdown)                                        \
	X(RUNNING, STOP, stop)                                                \
	X(DONE, JOIN, ignore)                                                 \
	X(DONE, UNIQUE_ID, ignore)                                            \
	X(DONE, BARRIER, ignore)                                              \
	X(DONE, LEAVE, ignore)                                                \
	X(DONE, FAULT, ignore)                                                \
	X(DONE, TASK_EXIT, task_exit_done)                                    \
	X(DONE, STRANGER, ignore)                                             \
	X(DONE, PEER_EXPIRED, ignore)                                         \
	X(DONE, PEER_CLOSED, ignore)                                          \
	X(DONE, JOIN_TIMEOUT, ignore)                                         \
	X(DONE, SHUTDOWN, ignore)                                             \
	X(DONE, STOP, ignore)

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

/*
 * Execute event EV in the current state: the one place where the state
 * machine of doc/protocol.md runs, and the only assignment of c->state.
 * P is the peer concerned (NULL for a sender that is not tracked, and for
 * timers that concern no peer).
 */
static void coord_execute(struct dpt__coord *c, enum coord_event ev,
			  struct peer *p, const struct event_ctx *e)
{
	const struct transition *t = &transitions[c->state][ev];
	enum coord_state before = c->state, next = t->fn(c, p, e);

	if (t->fn == on_ignore)
		dpt__debug("%s ignored in %s", event_names[ev],
			   state_names[before]);
	if (c->observer)
		c->observer(c->observer_arg,
			    &(struct dpt__coord_cell){state_names[before],
						      event_names[ev],
						      t->name},
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
					transitions[s][ev].name};
	return n;
}

void dpt__coord_observe(struct dpt__coord *c, dpt__coord_observer *fn,
			void *arg)
{
	c->observer = fn;
	c->observer_arg = arg;
}

/* ------------------------------------------------------------ interface */

int dpt__coord_new(struct dpt__coord **out,
		   const struct dpt__coord_config *cfg,
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
	c->join_deadline = cfg->join_timeout_ms ? now + cfg->join_timeout_ms :
						  0;
	c->rl_malformed.window_start = now;
	*out = c;
	return 0;
}

void dpt__coord_destroy(struct dpt__coord **cp)
{
	struct dpt__coord *c = *cp;

	if (!c)
		return;
	if (c->peers.buckets)
		while (oldest_peer(c))
			peer_remove(c, oldest_peer(c));
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
	p = peer_find(c, id, id_len);
	/* Any traffic from a tracked peer proves it alive, even a message
	 * that turns out malformed. */
	if (p) {
		peer_heard(c, p, now);
		peer_set_fd(c, p, fd);
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
		text_msg(&err, DPT_MSG_ERROR, 0, DPT_EVERSION,
			 DPT_WIRE_NO_RANK, why);
		send_to_id(c, id, id_len, &err);
		return;
	}
	if (rc == 0 && !dpt__msg_from_worker(m.type))
		rc = DPT_EPROTO;
	if (rc) {
		if (rl_allow(&c->rl_malformed, now))
			dpt__warn("dropped a %zu-byte message from %s: %s", len,
				  p ? "a worker" : "an unknown peer",
				  dpt_strerror(rc));
		return;
	}
	e.msg = &m;
	if (m.type == DPT_MSG_KV_PUT || m.type == DPT_MSG_KV_GET) {
		dpt__kv_on_message(c->kv, id, id_len, &m, now);
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
		return; /* a client that was not a peer, or a failed handshake */
	if (dpt__array_room(&c->closed, c->nclosed, &c->closed_cap,
			    sizeof(*c->closed)))
		return; /* out of memory: the timeout finds it */
	c->closed[c->nclosed].at = now;
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
		p = peer_find(c, c->closed[i].id, c->closed[i].len);
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
	while (!behind && c->state != ST_DONE && (p = oldest_peer(c)) &&
	       now - p->entry.last_heard >= (int64_t)c->cfg.timeout_ms)
		coord_execute(c, EV_PEER_EXPIRED, p, &e);

	dpt__kv_on_tick(c->kv, now);
	if (c->state != ST_DONE && c->join_deadline && now >= c->join_deadline)
		coord_execute(c, EV_JOIN_TIMEOUT, NULL, &e);

	if (c->state != ST_DONE && now >= c->next_heartbeat) {
		struct dpt__msg m;
		dpt__msg_init(&m, DPT_MSG_HEARTBEAT, c->generation);
		for (p = oldest_peer(c); p; p = newer_peer(c, p))
			if (now - p->last_sent >= (int64_t)c->cfg.heartbeat_ms)
				send_msg(c, p, &m, now);
		c->next_heartbeat = now + c->cfg.heartbeat_ms / 2;
	}
}

int64_t dpt__coord_next_deadline(const struct dpt__coord *c)
{
	const struct dpt__peer_entry *oldest = dpt__peer_table_oldest(&c->peers);
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

	text_msg(&m, DPT_MSG_ERROR, c->generation, DPT_ECLOSED,
		 DPT_WIRE_NO_RANK, why);
	coord_execute(c, EV_SHUTDOWN, NULL, &e);
}

void dpt__coord_stop(struct dpt__coord *c, const char *why, int64_t now)
{
	struct event_ctx e = {.now = now};

	if (!c->stopping && c->state != ST_DONE)
		dpt__warn("%s: the workers are told to stop at their next "
			  "vote",
			  why);
	coord_execute(c, EV_STOP, NULL, &e);
}

bool dpt__coord_stop_sent(const struct dpt__coord *c)
{
	return c->stop_sent;
}

uint32_t dpt__coord_tasks_running(const struct dpt__coord *c)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < c->cfg.world_size; i++)
		n += c->tasks[i].state != TASK_EXITED;
	return n;
}

int dpt__coord_done(const struct dpt__coord *c, int *exit_code)
{
	if (c->state != ST_DONE)
		return 0;
	*exit_code = c->exit_code;
	return 1;
}

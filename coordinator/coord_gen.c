/*
 * The coordinator's peers, its sending, and the actions on generations
 * that the event handlers of coord.c take (doc/protocol.md): forming a
 * generation, ending it, dropping a peer, completing a barrier.
 */
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

#include "assertion.h"
#include "buf.h"
#include "coord_int.h"
#include "kv.h"
#include "log.h"
#include "peers.h"
#include "wire.h"

/* ------------------------------------------------------------ logging */

/* "rank 3 (task 3, node-1 10.0.0.5 pid 812)": what an admin needs to find
 * the process. */
const char *dpt__coord_describe(const struct peer *p, char *buf, size_t size)
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

void dpt__coord_format_status(int32_t status, char *buf, size_t size)
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

struct peer *dpt__coord_peer_find(struct dpt__coord *c, const uint8_t *id,
				  size_t len)
{
	struct dpt__peer_entry *e = dpt__peer_table_find(&c->peers, id, len);

	return e ? peer_of(e) : NULL;
}

/* The least recently heard peer, or NULL; the next one after P. */
struct peer *dpt__coord_oldest_peer(const struct dpt__coord *c)
{
	struct dpt__peer_entry *e = dpt__peer_table_oldest(&c->peers);

	return e ? peer_of(e) : NULL;
}

struct peer *dpt__coord_newer_peer(const struct dpt__coord *c, struct peer *p)
{
	struct dpt__peer_entry *e = dpt__peer_table_newer(&c->peers, &p->entry);

	return e ? peer_of(e) : NULL;
}

/* Any traffic from a peer proves it alive: O(1), whatever the number of
 * peers. */
void dpt__coord_peer_heard(struct dpt__coord *c, struct peer *p, int64_t now)
{
	dpt__peer_table_heard(&c->peers, &p->entry, now);
}

struct peer *dpt__coord_peer_add(struct dpt__coord *c, const uint8_t *id,
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

void dpt__coord_set_role(struct dpt__coord *c, struct peer *p, enum peer_role r)
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
void dpt__coord_peer_set_fd(struct dpt__coord *c, struct peer *p, int fd)
{
	dpt__peer_table_set_fd(&c->peers, &p->entry, fd);
}

/* Forget P. Its task, if any, is marked gone; as a member, its rank's slot
 * is emptied (the caller decides what that means for the generation). */
void dpt__coord_peer_remove(struct dpt__coord *c, struct peer *p)
{
	dpt__peer_table_remove(&c->peers, &p->entry);
	if (p->role == ROLE_JOINING)
		c->n_joining--;
	else if (p->role == ROLE_WAITING)
		c->n_waiting--;
	else if (p->rank < c->world && c->members[p->rank] == p) {
		DPT_ASSERT(c->active > 0);
		c->members[p->rank] = NULL;
		c->active--;
	}
	if (p->join.task_id < c->cfg.world_size &&
	    c->tasks[p->join.task_id].peer == p)
		dpt__coord_task_event(c, p->join.task_id, TASK_EV_LOST, NULL);
	free(p);
}

/* doc/protocol.md, "Tasks": a task's next state, by state and event. */
static const uint8_t task_next[TASK_STATE_COUNT][TASK_EVENT_COUNT] = {
	/*		 CLAIM	      RELEASE	   LOST		EXIT */
	[TASK_UNSEEN] = {TASK_JOINED, TASK_UNSEEN, TASK_UNSEEN, TASK_EXITED},
	[TASK_JOINED] = {TASK_JOINED, TASK_UNSEEN, TASK_GONE, TASK_EXITED},
	[TASK_GONE] = {TASK_JOINED, TASK_GONE, TASK_GONE, TASK_EXITED},
	[TASK_EXITED] = {TASK_EXITED, TASK_EXITED, TASK_EXITED, TASK_EXITED},
};

size_t dpt__coord_task_table(struct dpt__coord_cell *cells, size_t max)
{
	static const char *const states[TASK_STATE_COUNT] = {"UNSEEN", "JOINED",
							     "GONE", "EXITED"};
	static const char *const events[TASK_EVENT_COUNT] = {"CLAIM", "RELEASE",
							     "LOST", "EXIT"};
	size_t n = 0;

	for (int s = 0; s < TASK_STATE_COUNT; s++)
		for (int ev = 0; ev < TASK_EVENT_COUNT; ev++, n++)
			if (n < max)
				cells[n] = (struct dpt__coord_cell){
					states[s], events[ev],
					states[task_next[s][ev]]};
	return n;
}

void dpt__coord_task_event(struct dpt__coord *c, uint32_t id,
			   enum task_event ev, struct peer *p)
{
	struct task *t;

	if (id >= c->cfg.world_size)
		return;
	t = &c->tasks[id];
	t->state = task_next[t->state][ev];
	t->peer = t->state == TASK_JOINED ? p : NULL; /* only CLAIM joins */
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

void dpt__coord_send_msg(struct dpt__coord *c, struct peer *p,
			 const struct dpt__msg *m, int64_t now)
{
	if (dpt__coord_send(&c->sender, p->entry.id, p->entry.id_len, m) == 0)
		p->last_sent = now;
}

/* Reply to an identity that is not (or no longer) a tracked peer. */
void dpt__coord_send_to_id(struct dpt__coord *c, const uint8_t *id,
			   size_t id_len, const struct dpt__msg *m)
{
	dpt__coord_send(&c->sender, id, id_len, m);
}

void dpt__coord_text_msg(struct dpt__msg *m, enum dpt__msg_type type,
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

void dpt__coord_send_error(struct dpt__coord *c, struct peer *p, int code,
			   const char *text, int64_t now)
{
	struct dpt__msg m;
	dpt__coord_text_msg(&m, DPT_MSG_ERROR, c->generation, code,
			    DPT_WIRE_NO_RANK, text);
	dpt__coord_send_msg(c, p, &m, now);
}

/* ------------------------------------------------------------ actions */

/*
 * The actions of doc/protocol.md. Those that can change the state return
 * the state that follows; only coord_execute assigns it. A handler that
 * calls an action must go on from the state the action returned, not
 * from c->state, which is still the state the event arrived in.
 */

/* Finish with EXIT_CODE. */
enum coord_state dpt__coord_finish(struct dpt__coord *c, int exit_code)
{
	c->exit_code = exit_code;
	return ST_DONE;
}

/* fail: fewer than --min-workers can still take part, or a fatal
 * configuration: tell everyone, finish with status 1. */
const char *dpt__coord_end_reason_name(uint32_t reason)
{
	switch (reason) {
	case DPT_END_PEER_LOST:
		return "peer_lost";
	case DPT_END_TASK_EXIT:
		return "task_exit";
	case DPT_END_FAULT:
		return "fault";
	case DPT_END_GROW:
		return "grow";
	case DPT_END_LEFT:
		return "left";
	case DPT_END_EVICTED:
		return "evicted";
	}
	return "unknown";
}

enum coord_state dpt__coord_fail(struct dpt__coord *c, int code,
				 const char *why, int64_t now)
{
	dpt__error("%s: the job cannot go on", why);
	c->gave_up = true;
	snprintf(c->last, sizeof(c->last), "%s", why);
	dpt__coord_note_reason(c, DPT_EV_FAILURE, why);
	for (struct peer *p = dpt__coord_oldest_peer(c); p;
	     p = dpt__coord_newer_peer(c, p))
		dpt__coord_send_error(c, p, code, why, now);
	return dpt__coord_finish(c, 1);
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
/* The step fails: N workers (LEFT: "" or " left") cannot form the
 * generation. */
static enum coord_state too_few(struct dpt__coord *c, uint32_t n,
				const char *left, int64_t now)
{
	char why[200];

	snprintf(why, sizeof(why),
		 "only %" PRIu32 " workers%s for generation %" PRIu32
		 " (--min-workers %" PRIu32 ")",
		 n, left, c->generation, c->cfg.min_workers);
	return dpt__coord_fail(c, DPT_EPEERLOST, why, now);
}

enum coord_state dpt__coord_form_generation(struct dpt__coord *c, int64_t now)
{
	uint32_t n = c->n_joining, i = 0, caps = DPT_CAP_CPU | DPT_CAP_NCCL;
	uint32_t nodes = 0, start = 0;
	struct peer **m;

	if (n < c->cfg.min_workers || n == 0)
		return too_few(c, n, "", now);
	m = realloc(c->members, n * sizeof(*m));
	if (!m)
		return dpt__coord_fail(c, DPT_ENOMEM, "out of memory", now);
	c->members = m;
	for (struct peer *p = dpt__coord_oldest_peer(c); p;
	     p = dpt__coord_newer_peer(c, p))
		if (p->role == ROLE_JOINING) {
			m[i++] = p;
			caps &= p->join.caps;
		}
	/* N_JOINING counts the joining peers of the table (set_role and
	 * peer_remove keep it): M is filled, none is left uninitialised. */
	DPT_ASSERT(i == n);
	if (!caps)
		return dpt__coord_fail(
			c, DPT_ECONFIG,
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
		dpt__coord_set_role(c, m[i], ROLE_MEMBER);
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
					  c->backend == DPT_BACKEND_NCCL)
						 ? DPT_WELCOME_CREATE_ID
						 : 0,
				.heartbeat_ms = c->cfg.heartbeat_ms,
				.timeout_ms = c->cfg.timeout_ms,
			};
			dpt__coord_send_msg(c, m[r], &w, now);
		}
		nodes++;
		start = i;
	}
	dpt__coord_note(c, &(struct dpt__coord_note){
				   .event = DPT_EV_GENERATION,
				   .generation = c->generation,
				   .rank = DPT_WIRE_NO_RANK,
				   .task = DPT_WIRE_NO_TASK,
				   .world = n,
				   .nodes = nodes,
				   .backend = c->backend == DPT_BACKEND_NCCL
						      ? "nccl"
						      : "cpu",
				   .step = DPT_STATUS_NO_STEP,
			   });
	dpt__info("generation %" PRIu32 " formed: %" PRIu32
		  " workers on %" PRIu32 " node%s, %s backend",
		  c->generation, n, nodes, nodes == 1 ? "" : "s",
		  c->backend == DPT_BACKEND_NCCL ? "nccl" : "cpu");
	if (c->backend == DPT_BACKEND_CPU) {
		if (send_roster(c, now) != 0)
			return dpt__coord_fail(c, DPT_ENOMEM,
					       "cannot encode the roster", now);
		return ST_RUNNING;
	}
	/* Rank 0 must send the unique ID within the join timeout. */
	if (c->cfg.join_timeout_ms)
		c->join_deadline = now + c->cfg.join_timeout_ms;
	return ST_ID_WAIT;
}

/* end: the live generation is over; its members must re-join G+1.
 * Returns GATHERING, or what the gathering leads to at once. */
enum coord_state dpt__coord_end_generation(struct dpt__coord *c,
					   uint32_t reason, uint32_t lost_rank,
					   const char *why, int64_t now)
{
	struct dpt__msg m;

	dpt__coord_text_msg(&m, DPT_MSG_GEN_END, c->generation, (int32_t)reason,
			    lost_rank, why);
	for (uint32_t r = 0; r < c->world; r++) {
		struct peer *p = c->members[r];
		if (!p)
			continue;
		dpt__coord_send_msg(c, p, &m, now);
		dpt__coord_set_role(c, p, ROLE_WAITING);
		c->members[r] = NULL;
	}
	snprintf(c->last, sizeof(c->last), "generation %" PRIu32 " ended: %s",
		 c->generation, why);
	dpt__coord_note(c, &(struct dpt__coord_note){
				   .event = DPT_EV_GENERATION_END,
				   .generation = c->generation,
				   .rank = lost_rank,
				   .task = DPT_WIRE_NO_TASK,
				   .reason = dpt__coord_end_reason_name(reason),
				   .why = why,
				   .step = DPT_STATUS_NO_STEP,
			   });
	dpt__warn("generation %" PRIu32 " ended: %s; %" PRIu32
		  " workers re-joining generation %" PRIu32,
		  c->generation, why, c->n_waiting, c->generation + 1);
	c->world = 0;
	c->active = 0;
	c->generation++;
	c->join_deadline =
		c->cfg.join_timeout_ms ? now + c->cfg.join_timeout_ms : 0;
	return dpt__coord_gather(c, now);
}

/* Drop P (evicted, exited or timed out). A member's departure ends the
 * live generation with REASON; otherwise a gathering is re-checked. */
enum coord_state dpt__coord_drop_peer(struct dpt__coord *c, struct peer *p,
				      uint32_t reason, const char *why,
				      int64_t now)
{
	bool member = p->role == ROLE_MEMBER;
	uint32_t rank = p->rank;
	struct dpt__msg m;

	/* Best effort: a live but evicted worker learns it at once. */
	dpt__coord_text_msg(&m, DPT_MSG_GEN_END, c->generation, DPT_END_EVICTED,
			    member ? rank : DPT_WIRE_NO_RANK, why);
	dpt__coord_send_msg(c, p, &m, now);
	dpt__coord_note(c, &(struct dpt__coord_note){
				   .event = DPT_EV_EVICT,
				   .generation = c->generation,
				   .rank = member ? rank : DPT_WIRE_NO_RANK,
				   .task = p->join.task_id,
				   .host = p->join.name[0] ? p->join.name
							   : p->join.addr.host,
				   .node = p->join.node,
				   .reason = dpt__coord_end_reason_name(reason),
				   .why = why,
				   .step = DPT_STATUS_NO_STEP,
			   });
	if (!c->formed_any && p->role != ROLE_MEMBER)
		c->lost_before_first++;
	dpt__coord_peer_remove(c, p);
	if (member)
		return dpt__coord_end_generation(c, reason, rank, why, now);
	return c->state == ST_GATHERING ? dpt__coord_gather(c, now) : c->state;
}

/*
 * In GATHERING (only): form the generation once every expected peer
 * joined, fail when fewer than --min-workers can still come. Returns the
 * state that follows.
 */
enum coord_state dpt__coord_gather(struct dpt__coord *c, int64_t now)
{
	uint32_t target, possible;

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
		return dpt__coord_finish(c, 0);
	}
	if (possible < c->cfg.min_workers || possible == 0)
		return too_few(c, possible, " left", now);
	if (c->n_waiting == 0 && c->n_joining >= target)
		return dpt__coord_form_generation(c, now);
	return ST_GATHERING;
}

/* Releases the barrier once every member has arrived: BARRIER_DONE to
 * those that sent BARRIER, VOTE_DONE (how many voted a failure, the code
 * of the lowest such rank) to those that sent VOTE. */
void dpt__coord_check_barrier(struct dpt__coord *c, int64_t now)
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
		vote.u.vote.flags |=
			p->vote_flags & (DPT_VOTE_BUSY | DPT_VOTE_SAVE);
		if (p->vote && vote.u.vote.failed++ == 0)
			vote.u.vote.code = p->vote;
	}
	if (vote.u.vote.failed) {
		char why[160];

		snprintf(why, sizeof(why),
			 "vote %" PRIu32 " of generation %" PRIu32 ": %" PRIu32
			 " of %" PRIu32 " members failed (first: %s)",
			 c->barrier_seq, c->generation, vote.u.vote.failed,
			 voters, dpt_strerror(vote.u.vote.code));
		dpt__warn("%s", why);
		dpt__coord_note_reason(c, DPT_EV_FAILURE, why);
	}
	for (uint32_t r = 0; r < c->world; r++) {
		struct peer *p = c->members[r];

		if (!p)
			continue;
		dpt__coord_send_msg(c, p, p->voted ? &vote : &done, now);
		c->stop_sent |= p->voted && c->stopping;
		if (p->voted && (vote.u.vote.flags & DPT_VOTE_SAVE))
			c->last_save = now;
		p->voted = false;
	}
}

/* Whether a newcomer may join now; sends the refusal if not. */
bool dpt__coord_room_for_newcomer(struct dpt__coord *c, const uint8_t *id,
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
	dpt__coord_text_msg(&m, DPT_MSG_ERROR, c->generation, DPT_EBUSY,
			    DPT_WIRE_NO_RANK, why);
	dpt__coord_send_to_id(c, id, id_len, &m);
	return false;
}

/*
 * What the coordinator's state machine tells and learns beside the
 * generations (coordinator/coord.h): the library's reports in the
 * key-value store become notes for the reporter (the run's events, the
 * metrics), STATUS is answered from memory, and the queries that the
 * coordinator's main loop and its end ask.
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <dptrain/error.h>

#include "clock.h"
#include "coord_int.h"
#include "kv.h"
#include "log.h"
#include "ratelimit.h"
#include "scalars.h"
#include "wire.h"

/*
 * The library's reports (doc/checkpoint-format.md, "Events"): KEY was put
 * in the key-value store; a dptrain.* key holds the newest value. A commit
 * is known here only once rank 0 put it, after its manifest was: the
 * "commit" event never names a step that is not committed.
 */
void dpt__coord_on_report(struct dpt__coord *c, const char *key, int64_t now)
{
	const char *v = dpt__kv_value(c->kv, key);
	struct dpt__coord_note n = {
		.rank = DPT_WIRE_NO_RANK,
		.task = DPT_WIRE_NO_TASK,
		.step = DPT_STATUS_NO_STEP,
	};
	unsigned long long step, bytes, ms;
	int fields;

	(void)now;
	if (!v)
		return;
	if (!strcmp(key, DPT_KV_RUN)) {
		snprintf(c->run, sizeof(c->run), "%s", v);
		n.event = DPT_COORD_NOTE_RUN;
		n.reason = v;
		dpt__coord_note(c, &n);
	} else if (!strcmp(key, DPT_KV_RESUMED)) {
		n.event = DPT_EV_RESUME;
		if (sscanf(v, "%llu", &step) == 1) {
			n.step = step;
			if (c->step == DPT_STATUS_NO_STEP || step > c->step)
				c->step = step;
		}
		dpt__coord_note(c, &n);
	} else if (!strcmp(key, DPT_KV_LOG)) {
		/* Whole records, one "log" line each; a record that does
		 * not parse is dropped (the library writes none). */
		struct dpt__scalars sc;
		size_t off = 0, len = strlen(v);

		n.event = DPT_EV_LOG;
		n.scalars = &sc;
		while (off < len) {
			const char *nl = memchr(v + off, ';', len - off);
			size_t ln = nl ? (size_t)(nl - (v + off)) : len - off;

			if (dpt__scalars_parse(v + off, ln, &sc) == 0) {
				n.step = sc.step;
				if (c->step == DPT_STATUS_NO_STEP ||
				    sc.step > c->step)
					c->step = sc.step;
				dpt__coord_note(c, &n);
			}
			off += ln + 1;
		}
	} else if (!strcmp(key, DPT_KV_TOTAL_STEPS) ||
		   !strcmp(key, DPT_KV_GLOBAL_BATCH)) {
		if (sscanf(v, "%llu", &step) != 1)
			return;
		n.event = !strcmp(key, DPT_KV_TOTAL_STEPS)
				  ? DPT_EV_TOTAL_STEPS
				  : DPT_EV_GLOBAL_BATCH;
		n.step = step;
		dpt__coord_note(c, &n);
	} else if (!strcmp(key, DPT_KV_COMMITTED)) {
		/* "STEP" (before events) or "STEP BYTES MS". */
		fields = sscanf(v, "%llu %llu %llu", &step, &bytes, &ms);
		if (fields < 1)
			return;
		c->committed = step;
		c->committed_at_ms = dpt__wall_ms();
		if (c->step == DPT_STATUS_NO_STEP || step > c->step)
			c->step = step;
		n.step = step;
		if (fields == 3) {
			n.event = DPT_EV_SAVE;
			n.bytes = bytes;
			n.seconds = (double)ms / 1000.0;
			dpt__coord_note(c, &n);
		}
		n.event = DPT_EV_COMMIT;
		dpt__coord_note(c, &n);
	}
}

#define STATUS_PER_S 20
/* A STATUS answered from memory (doc/protocol.md, "Status requests"). */
void dpt__coord_answer_status(struct dpt__coord *c, const void *id,
			      size_t id_len, uint32_t seq, int64_t now)
{
	struct dpt__msg m;

	if (!dpt__ratelimit(&c->rl_status, now, STATUS_PER_S, 1000)) {
		dpt__coord_text_msg(&m, DPT_MSG_ERROR, c->generation, DPT_EBUSY,
				    DPT_WIRE_NO_RANK,
				    "too many status requests: at most 20 a "
				    "second are answered");
	} else {
		dpt__msg_init(&m, DPT_MSG_STATUS_REPLY, c->generation);
		dpt__coord_status(c, &m.u.status);
		c->status_answered++;
	}
	m.seq = seq;
	dpt__coord_send_to_id(c, id, id_len, &m);
}

void dpt__coord_set_reporter(struct dpt__coord *c, dpt__coord_reporter *fn,
			     void *arg)
{
	c->reporter = fn;
	c->reporter_arg = arg;
}

void dpt__coord_note(struct dpt__coord *c, const struct dpt__coord_note *n)
{
	if (c->reporter)
		c->reporter(c->reporter_arg, n);
}

void dpt__coord_note_reason(struct dpt__coord *c, enum dpt__event event,
			    const char *reason)
{
	dpt__coord_note(c, &(struct dpt__coord_note){
				   .event = event,
				   .generation = c->generation,
				   .rank = DPT_WIRE_NO_RANK,
				   .task = DPT_WIRE_NO_TASK,
				   .reason = reason,
				   .step = DPT_STATUS_NO_STEP,
			   });
}

void dpt__coord_set_job(struct dpt__coord *c, uint32_t job_id,
			uint32_t restarts, uint64_t started_ms)
{
	c->job_id = job_id;
	c->restarts = restarts;
	c->started_ms = started_ms;
}

void dpt__coord_set_end_time(struct dpt__coord *c, int64_t end)
{
	c->end_time = end;
}

uint64_t dpt__coord_committed(const struct dpt__coord *c)
{
	return c->committed;
}

void dpt__coord_counts(const struct dpt__coord *c,
		       struct dpt__coord_counts *out)
{
	*out = (struct dpt__coord_counts){
		.generation = c->generation,
		.joined = c->state == ST_GATHERING ? c->n_joining : c->active,
		.status_answered = c->status_answered,
	};
}

void dpt__coord_status(const struct dpt__coord *c, struct dpt__msg_status *st)
{
	static const uint8_t states[] = {
		[ST_GATHERING] = DPT_STATUS_GATHERING,
		[ST_ID_WAIT] = DPT_STATUS_ID_WAIT,
		[ST_RUNNING] = DPT_STATUS_RUNNING,
		[ST_DONE] = DPT_STATUS_DONE,
	};
	size_t len = 0;
	uint32_t nodes = 0;

	memset(st, 0, sizeof(*st));
	st->state = states[c->state];
	st->flags = c->stopping ? DPT_STATUS_STOPPING : 0;
	st->job_id = c->job_id;
	st->restarts = c->restarts;
	st->expected = c->cfg.world_size;
	st->step = c->step;
	st->committed = c->committed;
	st->committed_at = c->committed_at_ms;
	st->started_at = c->started_ms;
	st->end_time = c->end_time > 0 ? (uint64_t)c->end_time : 0;
	st->generation = c->generation;
	if (st->end_time > (uint64_t)c->cfg.grace_s)
		st->stop_at = st->end_time - (uint64_t)c->cfg.grace_s;
	if (c->cfg.save_every_ms && c->state == ST_RUNNING && !c->stopping) {
		struct timespec ts;
		int64_t due =
			c->last_save + c->cfg.save_every_ms - dpt__now_ms();

		clock_gettime(CLOCK_REALTIME, &ts);
		st->next_save = (uint64_t)ts.tv_sec * 1000 +
				(uint64_t)ts.tv_nsec / 1000000 +
				(uint64_t)(due > 0 ? due : 0);
	}
	snprintf(st->run, sizeof(st->run), "%s", c->run);
	snprintf(st->last, sizeof(st->last), "%s", c->last);
	if (c->state != ST_RUNNING && c->state != ST_ID_WAIT)
		return;
	st->world = c->active;
	/* Members are sorted by node: a host starts where the node
	 * changes. The list is cut, with "...", at the text's size. */
	for (uint32_t r = 0; r < c->world; r++) {
		const struct peer *p = c->members[r], *prev = NULL;
		const char *h;
		int n;

		if (!p)
			continue;
		for (uint32_t q = r; q-- > 0;)
			if ((prev = c->members[q]) != NULL)
				break;
		if (prev && prev->join.node == p->join.node)
			continue;
		nodes++;
		h = p->join.name[0] ? p->join.name : p->join.addr.host;
		if (len + strlen(h) + 5 >= sizeof(st->hosts)) {
			if (len + 4 < sizeof(st->hosts) &&
			    !strstr(st->hosts, "..."))
				len += (size_t)snprintf(st->hosts + len,
							sizeof(st->hosts) - len,
							",...");
			continue;
		}
		n = snprintf(st->hosts + len, sizeof(st->hosts) - len, "%s%s",
			     len ? "," : "", h);
		len += (size_t)n;
	}
	st->nodes = nodes > st->world ? st->world : nodes;
}

const char *dpt__coord_kv_value(struct dpt__coord *c, const char *key)
{
	return dpt__kv_value(c->kv, key);
}

bool dpt__coord_stop_sent(const struct dpt__coord *c)
{
	return c->stop_sent;
}

bool dpt__coord_gave_up(const struct dpt__coord *c)
{
	return c->gave_up;
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

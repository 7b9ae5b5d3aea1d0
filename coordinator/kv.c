#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include <dptrain/error.h>

#include "coord.h"
#include "kv.h"
#include "log.h"

struct entry {
	char key[DPT_KV_KEY_MAX + 1];
	char value[DPT_KV_VALUE_MAX + 1];
};

/* A KV_GET waiting for its key. */
struct waiter {
	struct waiter *next;
	int64_t deadline;
	uint32_t seq;
	char key[DPT_KV_KEY_MAX + 1];
	uint8_t id_len;
	uint8_t id[255];
};

struct dpt__kv {
	const struct dpt__coord_sender *sender;
	struct entry entries[DPT_KV_KEYS_MAX];
	size_t nentries;
	struct waiter *waiting; /* oldest first */
	struct waiter **tail;
	size_t nwaiting;
};

int dpt__kv_new(struct dpt__kv **out, const struct dpt__coord_sender *sender)
{
	struct dpt__kv *kv = calloc(1, sizeof(*kv));

	*out = kv;
	if (!kv)
		return DPT_ENOMEM;
	kv->sender = sender;
	kv->tail = &kv->waiting;
	return 0;
}

void dpt__kv_destroy(struct dpt__kv **kvp)
{
	struct dpt__kv *kv = *kvp;

	if (!kv)
		return;
	while (kv->waiting) {
		struct waiter *w = kv->waiting;
		kv->waiting = w->next;
		free(w);
	}
	free(kv);
	*kvp = NULL;
}

static void reply(struct dpt__kv *kv, const uint8_t *id, size_t id_len,
		  const struct dpt__msg *m)
{
	dpt__coord_send(kv->sender, id, id_len, m);
}

static void reply_error(struct dpt__kv *kv, const uint8_t *id, size_t id_len,
			uint32_t seq, int code, const char *text)
{
	struct dpt__msg m;

	dpt__msg_init(&m, DPT_MSG_ERROR, 0);
	m.seq = seq;
	m.u.text.code = code;
	snprintf(m.u.text.text, sizeof(m.u.text.text), "%s", text);
	reply(kv, id, id_len, &m);
}

static void reply_value(struct dpt__kv *kv, const uint8_t *id, size_t id_len,
			uint32_t seq, const struct entry *e)
{
	struct dpt__msg m;

	dpt__msg_init(&m, DPT_MSG_KV_VALUE, 0);
	m.seq = seq;
	memcpy(m.u.kv.key, e->key, sizeof(e->key));
	memcpy(m.u.kv.value, e->value, sizeof(e->value));
	reply(kv, id, id_len, &m);
}

static struct entry *lookup(struct dpt__kv *kv, const char *key)
{
	for (size_t i = 0; i < kv->nentries; i++)
		if (strcmp(kv->entries[i].key, key) == 0)
			return &kv->entries[i];
	return NULL;
}

static void timed_out(struct dpt__kv *kv, const struct waiter *w)
{
	char text[DPT_WIRE_TEXT_MAX + 1];

	snprintf(text, sizeof(text),
		 "no value for '%s' was stored in time (is task 0 of the step "
		 "running?)",
		 w->key);
	dpt__warn("%s", text);
	reply_error(kv, w->id, w->id_len, w->seq, DPT_ETIMEDOUT, text);
}

/* Take the waiter at *WP out of the list; the caller frees it. */
static struct waiter *unlink_at(struct dpt__kv *kv, struct waiter **wp)
{
	struct waiter *w = *wp;

	*wp = w->next;
	if (kv->tail == &w->next)
		kv->tail = wp;
	kv->nwaiting--;
	return w;
}

static void put(struct dpt__kv *kv, const uint8_t *id, size_t id_len,
		const struct dpt__msg *m)
{
	struct entry *e = lookup(kv, m->u.kv.key);
	struct dpt__msg ack;
	char text[DPT_WIRE_TEXT_MAX + 1];

	/* The library's own reports (doc/walltime.md, "Requeue guard") say
	 * what is true now: a later put replaces them. */
	if (e && strncmp(e->key, DPT_KV_STATUS_PREFIX,
			 strlen(DPT_KV_STATUS_PREFIX)) == 0) {
		memcpy(e->value, m->u.kv.value, sizeof(e->value));
		/* The logged scalars come every 2 s: in the events, not in
		 * the job's output. */
		if (strcmp(e->key, DPT_KV_LOG) != 0)
			dpt__info("stored %s=%s", e->key, e->value);
		else
			dpt__debug("stored %s=%s", e->key, e->value);
	} else if (e && strcmp(e->value, m->u.kv.value) != 0) {
		snprintf(text, sizeof(text), "'%s' is already set to '%.160s'",
			 e->key, e->value);
		dpt__warn("refused a KV_PUT: %s", text);
		reply_error(kv, id, id_len, m->seq, DPT_EBUSY, text);
		return;
	}
	if (!e && kv->nentries == DPT_KV_KEYS_MAX) {
		snprintf(text, sizeof(text), "the store is full (%d keys)",
			 DPT_KV_KEYS_MAX);
		dpt__warn("refused a KV_PUT of '%s': %s", m->u.kv.key, text);
		reply_error(kv, id, id_len, m->seq, DPT_ETOOBIG, text);
		return;
	}
	if (!e) {
		e = &kv->entries[kv->nentries++];
		memcpy(e->key, m->u.kv.key, sizeof(e->key));
		memcpy(e->value, m->u.kv.value, sizeof(e->value));
		if (strcmp(e->key, DPT_KV_LOG) != 0)
			dpt__info("stored %s=%s", e->key, e->value);
	}
	dpt__msg_init(&ack, DPT_MSG_ACK, 0);
	ack.seq = m->seq;
	reply(kv, id, id_len, &ack);

	/* Answer whoever waited for it. */
	for (struct waiter **wp = &kv->waiting; *wp;) {
		struct waiter *w = *wp;
		if (strcmp(w->key, e->key) != 0) {
			wp = &w->next;
			continue;
		}
		reply_value(kv, w->id, w->id_len, w->seq, e);
		free(unlink_at(kv, wp));
	}
}

static void drop_oldest(struct dpt__kv *kv)
{
	struct waiter *w = unlink_at(kv, &kv->waiting);

	timed_out(kv, w);
	free(w);
}

static void get(struct dpt__kv *kv, const uint8_t *id, size_t id_len,
		const struct dpt__msg *m, int64_t now)
{
	const struct entry *e = lookup(kv, m->u.kv.key);
	struct waiter *w;

	if (e) {
		reply_value(kv, id, id_len, m->seq, e);
		return;
	}
	if (m->u.kv.wait_ms == 0) {
		reply_error(kv, id, id_len, m->seq, DPT_ENOENT, "no such key");
		return;
	}
	if (kv->nwaiting == DPT_KV_WAITING_MAX)
		drop_oldest(kv);
	w = calloc(1, sizeof(*w));
	if (!w) {
		reply_error(kv, id, id_len, m->seq, DPT_ENOMEM,
			    "the coordinator is out of memory");
		return;
	}
	/* Waits are kept in arrival order; their deadlines need not be, so
	 * on_tick looks at all of them (there are at most a few thousand,
	 * once per task at the start of a step). */
	w->deadline = now + m->u.kv.wait_ms;
	w->seq = m->seq;
	memcpy(w->key, m->u.kv.key, sizeof(w->key));
	w->id_len = (uint8_t)id_len;
	memcpy(w->id, id, id_len);
	*kv->tail = w;
	kv->tail = &w->next;
	kv->nwaiting++;
}

const char *dpt__kv_value(struct dpt__kv *kv, const char *key)
{
	const struct entry *e = kv ? lookup(kv, key) : NULL;

	return e ? e->value : NULL;
}

void dpt__kv_on_message(struct dpt__kv *kv, const uint8_t *id, size_t id_len,
			const struct dpt__msg *m, int64_t now)
{
	if (id_len == 0 || id_len > sizeof(((struct waiter *)0)->id))
		return;
	if (m->type == DPT_MSG_KV_PUT)
		put(kv, id, id_len, m);
	else if (m->type == DPT_MSG_KV_GET)
		get(kv, id, id_len, m, now);
}

void dpt__kv_on_tick(struct dpt__kv *kv, int64_t now)
{
	for (struct waiter **wp = &kv->waiting; *wp;) {
		struct waiter *w = *wp;
		if (w->deadline > now) {
			wp = &w->next;
			continue;
		}
		timed_out(kv, unlink_at(kv, wp));
		free(w);
	}
}

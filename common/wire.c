#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <zmq.h>

#include <dptrain/error.h>

#include "log.h"
#include "parse.h"
#include "wire.h"

/* ------------------------------------------------------------ types */

const char *dpt__msg_type_name(unsigned type)
{
	switch (type) {
#define DPT_WIRE_TYPE_NAME(name, num, w, c)                                    \
	case num:                                                              \
		return #name;
		DPT_WIRE_TYPE_MAP(DPT_WIRE_TYPE_NAME)
#undef DPT_WIRE_TYPE_NAME
	}
	return "UNKNOWN";
}

int dpt__msg_from_worker(unsigned type)
{
	switch (type) {
#define DPT_WIRE_TYPE_W(name, num, w, c)                                       \
	case num:                                                              \
		return w;
		DPT_WIRE_TYPE_MAP(DPT_WIRE_TYPE_W)
#undef DPT_WIRE_TYPE_W
	}
	return 0;
}

int dpt__msg_from_coordinator(unsigned type)
{
	switch (type) {
#define DPT_WIRE_TYPE_C(name, num, w, c)                                       \
	case num:                                                              \
		return c;
		DPT_WIRE_TYPE_MAP(DPT_WIRE_TYPE_C)
#undef DPT_WIRE_TYPE_C
	}
	return 0;
}

void dpt__msg_init(struct dpt__msg *m, enum dpt__msg_type type,
		   uint32_t generation)
{
	memset(m, 0, sizeof(*m));
	m->version = DPT_WIRE_VERSION;
	m->type = (uint8_t)type;
	m->generation = generation;
}

void dpt__msg_release(struct dpt__msg *m)
{
	free(m->roster);
	m->roster = NULL;
	m->world = 0;
}

/* ------------------------------------------------------------ validation */

/* The character classes of the protocol's strings (doc/protocol.md). */
static int is_host_char(int c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
	       (c >= 'A' && c <= 'F') || c == '.' || c == ':';
}

static int is_name_char(int c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
	       (c >= 'A' && c <= 'Z') || c == '.' || c == '-' || c == '_';
}

static int is_text_char(int c)
{
	return c >= 0x20 && c <= 0x7e;
}

/* Length of S if it has MIN..MAX characters of class OK, else -1. S may
 * not be NUL-terminated within MAX + 1 bytes: strnlen bounds the read. */
static long str_check(const char *s, size_t min, size_t max, int (*ok)(int))
{
	size_t n = strnlen(s, max + 1);
	if (n < min || n > max)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!ok((unsigned char)s[i]))
			return -1;
	return (long)n;
}

static int peer_ok(const struct dpt__peer *p)
{
	return str_check(p->host, 1, DPT_HOST_MAX - 1, is_host_char) >= 0;
}

/*
 * The field rules of doc/protocol.md, checked on both sides: the encoder
 * refuses to send what the decoder would refuse to accept.
 */
static int fields_ok(const struct dpt__msg *m)
{
	switch (m->type) {
	case DPT_MSG_JOIN: {
		const struct dpt__msg_join *j = &m->u.join;
		if (!j->caps || (j->caps & ~(DPT_CAP_CPU | DPT_CAP_NCCL)))
			return 0;
		if ((j->caps & DPT_CAP_CPU) && j->addr.port == 0)
			return 0;
		return peer_ok(&j->addr) &&
		       str_check(j->name, 0, DPT_WIRE_NAME_MAX, is_name_char) >=
			       0;
	}
	case DPT_MSG_WELCOME: {
		const struct dpt__msg_welcome *w = &m->u.welcome;
		if (w->world < 1 || w->world > DPT_WIRE_WORLD_MAX ||
		    w->rank >= w->world || w->local_world < 1 ||
		    w->local_world > w->world ||
		    w->local_rank >= w->local_world)
			return 0;
		if (w->backend != DPT_BACKEND_CPU &&
		    w->backend != DPT_BACKEND_NCCL)
			return 0;
		if (w->flags & ~DPT_WELCOME_CREATE_ID)
			return 0;
		if ((w->flags & DPT_WELCOME_CREATE_ID) &&
		    (w->backend != DPT_BACKEND_NCCL || w->rank != 0))
			return 0;
		return w->heartbeat_ms >= 1 && w->timeout_ms >= 1;
	}
	case DPT_MSG_ROSTER:
		if (m->world < 1 || m->world > DPT_WIRE_WORLD_MAX || !m->roster)
			return 0;
		for (uint32_t i = 0; i < m->world; i++)
			if (!peer_ok(&m->roster[i]))
				return 0;
		return 1;
	case DPT_MSG_BARRIER:
	case DPT_MSG_BARRIER_DONE:
		return m->seq >= 1;
	case DPT_MSG_GEN_END:
		if (m->u.text.code < DPT_END_PEER_LOST ||
		    m->u.text.code > DPT_END_EVICTED)
			return 0;
		return str_check(m->u.text.text, 0, DPT_WIRE_TEXT_MAX,
				 is_text_char) >= 0;
	case DPT_MSG_ERROR:
		if (m->u.text.code >= 0)
			return 0;
		return str_check(m->u.text.text, 0, DPT_WIRE_TEXT_MAX,
				 is_text_char) >= 0;
	case DPT_MSG_FAULT:
		return m->u.fault_code < 0;
	case DPT_MSG_VOTE:
		return m->seq >= 1 && m->u.vote.code <= 0 &&
		       (m->u.vote.flags &
			~(DPT_VOTE_STOP | DPT_VOTE_SAVE | DPT_VOTE_BUSY)) == 0;
	case DPT_MSG_VOTE_DONE:
		return m->seq >= 1 && m->u.vote.code <= 0 &&
		       (m->u.vote.failed == 0) == (m->u.vote.code == 0) &&
		       m->u.vote.failed <= DPT_WIRE_WORLD_MAX &&
		       (m->u.vote.flags &
			~(DPT_VOTE_STOP | DPT_VOTE_SAVE | DPT_VOTE_BUSY)) == 0;
	case DPT_MSG_KV_PUT:
	case DPT_MSG_KV_GET:
	case DPT_MSG_KV_VALUE:
		if (m->type == DPT_MSG_KV_GET ? m->u.kv.value[0] != '\0'
					      : m->u.kv.wait_ms != 0)
			return 0;
		return m->u.kv.wait_ms <= DPT_KV_WAIT_MAX &&
		       str_check(m->u.kv.key, 1, DPT_KV_KEY_MAX,
				 is_name_char) >= 0 &&
		       str_check(m->u.kv.value, 0, DPT_KV_VALUE_MAX,
				 is_text_char) >= 0;
	case DPT_MSG_STATUS_REPLY: {
		const struct dpt__msg_status *st = &m->u.status;
		return st->state >= DPT_STATUS_GATHERING &&
		       st->state <= DPT_STATUS_DONE &&
		       (st->flags & ~DPT_STATUS_STOPPING) == 0 &&
		       st->world <= DPT_WIRE_WORLD_MAX &&
		       st->nodes <= st->world &&
		       str_check(st->run, 0, DPT_WIRE_TEXT_MAX, is_text_char) >=
			       0 &&
		       str_check(st->hosts, 0, DPT_WIRE_TEXT_MAX,
				 is_text_char) >= 0 &&
		       str_check(st->last, 0, DPT_WIRE_TEXT_MAX,
				 is_text_char) >= 0;
	}
	case DPT_MSG_UNIQUE_ID:
	case DPT_MSG_HEARTBEAT:
	case DPT_MSG_LEAVE:
	case DPT_MSG_TASK_EXIT:
	case DPT_MSG_ACK:
	case DPT_MSG_STATUS:
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------ encoding */

struct writer {
	uint8_t *p;
	size_t len;
};

static void put_u8(struct writer *w, uint8_t v)
{
	w->p[w->len++] = v;
}

static void put_u16(struct writer *w, uint16_t v)
{
	put_u8(w, (uint8_t)(v >> 8));
	put_u8(w, (uint8_t)v);
}

static void put_u32(struct writer *w, uint32_t v)
{
	put_u16(w, (uint16_t)(v >> 16));
	put_u16(w, (uint16_t)v);
}

static void put_u64(struct writer *w, uint64_t v)
{
	put_u32(w, (uint32_t)(v >> 32));
	put_u32(w, (uint32_t)v);
}

static void put_bytes(struct writer *w, const void *p, size_t n)
{
	memcpy(w->p + w->len, p, n);
	w->len += n;
}

/* A str: one length byte, then the bytes. fields_ok has bounded it. */
static void put_str(struct writer *w, const char *s)
{
	size_t n = strlen(s);
	put_u8(w, (uint8_t)n);
	put_bytes(w, s, n);
}

static size_t body_size(const struct dpt__msg *m)
{
	size_t n;

	switch (m->type) {
	case DPT_MSG_JOIN:
		return 24 + strlen(m->u.join.addr.host) +
		       strlen(m->u.join.name);
	case DPT_MSG_WELCOME:
		return 28;
	case DPT_MSG_ROSTER:
		n = 4;
		for (uint32_t i = 0; i < m->world; i++)
			n += 7 + strlen(m->roster[i].host);
		return n;
	case DPT_MSG_UNIQUE_ID:
		return DPT_NCCL_ID_SIZE;
	case DPT_MSG_GEN_END:
		return 9 + strlen(m->u.text.text);
	case DPT_MSG_ERROR:
		return 5 + strlen(m->u.text.text);
	case DPT_MSG_TASK_EXIT:
		return 8;
	case DPT_MSG_FAULT:
		return 4;
	case DPT_MSG_VOTE:
		return 8;
	case DPT_MSG_VOTE_DONE:
		return 12;
	case DPT_MSG_KV_PUT:
	case DPT_MSG_KV_VALUE:
		return 2 + strlen(m->u.kv.key) + strlen(m->u.kv.value);
	case DPT_MSG_KV_GET:
		return 5 + strlen(m->u.kv.key);
	case DPT_MSG_STATUS_REPLY:
		return 87 + strlen(m->u.status.run) +
		       strlen(m->u.status.hosts) + strlen(m->u.status.last);
	}
	return 0;
}

size_t dpt__wire_size(const struct dpt__msg *m)
{
	size_t n;

	if (!fields_ok(m))
		return 0;
	n = DPT_WIRE_HDR_SIZE + body_size(m);
	return n <= DPT_WIRE_MSG_MAX ? n : 0;
}

long dpt__wire_encode(const struct dpt__msg *m, void *buf, size_t size)
{
	size_t total = dpt__wire_size(m);
	struct writer w = {.p = buf, .len = 0};

	if (!total)
		return DPT_EINVAL;
	if (size < total)
		return DPT_ETOOBIG;
	put_u8(&w, DPT_WIRE_MAGIC0);
	put_u8(&w, DPT_WIRE_MAGIC1);
	put_u8(&w, DPT_WIRE_VERSION);
	put_u8(&w, m->type);
	put_u32(&w, m->generation);
	put_u32(&w, m->seq);
	put_u32(&w, (uint32_t)(total - DPT_WIRE_HDR_SIZE));

	switch (m->type) {
	case DPT_MSG_JOIN: {
		const struct dpt__msg_join *j = &m->u.join;
		put_u32(&w, j->node);
		put_u32(&w, j->local_rank);
		put_u32(&w, j->task_id);
		put_u32(&w, j->pid);
		put_u32(&w, j->caps);
		put_u16(&w, j->addr.port);
		put_str(&w, j->addr.host);
		put_str(&w, j->name);
		break;
	}
	case DPT_MSG_WELCOME: {
		const struct dpt__msg_welcome *wl = &m->u.welcome;
		put_u32(&w, wl->rank);
		put_u32(&w, wl->world);
		put_u32(&w, wl->local_rank);
		put_u32(&w, wl->local_world);
		put_u8(&w, wl->backend);
		put_u8(&w, wl->flags);
		put_u16(&w, 0);
		put_u32(&w, wl->heartbeat_ms);
		put_u32(&w, wl->timeout_ms);
		break;
	}
	case DPT_MSG_ROSTER:
		put_u32(&w, m->world);
		for (uint32_t i = 0; i < m->world; i++) {
			put_u32(&w, m->roster[i].node);
			put_u16(&w, m->roster[i].port);
			put_str(&w, m->roster[i].host);
		}
		break;
	case DPT_MSG_UNIQUE_ID:
		put_bytes(&w, m->u.unique_id, DPT_NCCL_ID_SIZE);
		break;
	case DPT_MSG_GEN_END:
		put_u32(&w, (uint32_t)m->u.text.code);
		put_u32(&w, m->u.text.lost_rank);
		put_str(&w, m->u.text.text);
		break;
	case DPT_MSG_ERROR:
		put_u32(&w, (uint32_t)m->u.text.code);
		put_str(&w, m->u.text.text);
		break;
	case DPT_MSG_TASK_EXIT:
		put_u32(&w, m->u.task_exit.task_id);
		put_u32(&w, (uint32_t)m->u.task_exit.status);
		break;
	case DPT_MSG_FAULT:
		put_u32(&w, (uint32_t)m->u.fault_code);
		break;
	case DPT_MSG_VOTE_DONE:
		put_u32(&w, m->u.vote.failed);
		put_u32(&w, (uint32_t)m->u.vote.code);
		put_u32(&w, m->u.vote.flags);
		break;
	case DPT_MSG_VOTE:
		put_u32(&w, (uint32_t)m->u.vote.code);
		put_u32(&w, m->u.vote.flags);
		break;
	case DPT_MSG_KV_PUT:
	case DPT_MSG_KV_VALUE:
		put_str(&w, m->u.kv.key);
		put_str(&w, m->u.kv.value);
		break;
	case DPT_MSG_KV_GET:
		put_u32(&w, m->u.kv.wait_ms);
		put_str(&w, m->u.kv.key);
		break;
	case DPT_MSG_STATUS_REPLY: {
		const struct dpt__msg_status *st = &m->u.status;
		put_u8(&w, st->state);
		put_u8(&w, st->flags);
		put_u16(&w, 0);
		put_u32(&w, st->job_id);
		put_u32(&w, st->restarts);
		put_u32(&w, st->world);
		put_u32(&w, st->nodes);
		put_u32(&w, st->expected);
		put_u64(&w, st->step);
		put_u64(&w, st->committed);
		put_u64(&w, st->committed_at);
		put_u64(&w, st->started_at);
		put_u64(&w, st->end_time);
		put_u32(&w, st->generation);
		put_u64(&w, st->stop_at);
		put_u64(&w, st->next_save);
		put_str(&w, st->run);
		put_str(&w, st->hosts);
		put_str(&w, st->last);
		break;
	}
	}
	return (long)w.len;
}

/* ------------------------------------------------------------ decoding */

/* Reads never go past LEN: a short read marks the reader bad and yields
 * zeros, and the caller checks BAD once at the end. */
struct reader {
	const uint8_t *p;
	size_t len;
	size_t off;
	int bad;
};

static int need(struct reader *r, size_t n)
{
	if (r->bad || n > r->len - r->off) {
		r->bad = 1;
		return 0;
	}
	return 1;
}

static uint8_t get_u8(struct reader *r)
{
	if (!need(r, 1))
		return 0;
	return r->p[r->off++];
}

static uint16_t get_u16(struct reader *r)
{
	uint16_t hi = get_u8(r);
	return (uint16_t)(hi << 8 | get_u8(r));
}

static uint32_t get_u32(struct reader *r)
{
	uint32_t hi = get_u16(r);
	return hi << 16 | get_u16(r);
}

static uint64_t get_u64(struct reader *r)
{
	uint64_t hi = get_u32(r);
	return hi << 32 | get_u32(r);
}

static void get_bytes(struct reader *r, void *out, size_t n)
{
	if (!need(r, n)) {
		memset(out, 0, n);
		return;
	}
	memcpy(out, r->p + r->off, n);
	r->off += n;
}

/* A str into OUT (SIZE bytes, NUL-terminated). A length that does not fit
 * marks the reader bad; the character class is checked by fields_ok. */
static void get_str(struct reader *r, char *out, size_t size)
{
	size_t n = get_u8(r);
	if (n >= size) {
		r->bad = 1;
		n = 0;
	}
	get_bytes(r, out, n);
	out[n] = '\0';
	/* An embedded NUL would make the string shorter than its length:
	 * refuse it rather than let two encodings mean the same thing. */
	if (strlen(out) != n)
		r->bad = 1;
}

static int decode_roster(struct reader *r, struct dpt__msg *m)
{
	uint32_t world = get_u32(r);

	/* Each entry takes at least 8 bytes: refuse a count that the bytes
	 * present cannot hold before allocating for it. */
	if (r->bad || world < 1 || world > DPT_WIRE_WORLD_MAX ||
	    (size_t)world > (r->len - r->off) / 8)
		return DPT_EPROTO;
	m->roster = calloc(world, sizeof(*m->roster));
	if (!m->roster)
		return DPT_ENOMEM;
	m->world = world;
	for (uint32_t i = 0; i < world && !r->bad; i++) {
		m->roster[i].node = get_u32(r);
		m->roster[i].port = get_u16(r);
		get_str(r, m->roster[i].host, sizeof(m->roster[i].host));
	}
	return 0;
}

int dpt__wire_decode(const void *buf, size_t len, size_t max,
		     struct dpt__msg *m)
{
	const uint8_t *p = buf;
	struct reader r;
	int rc = 0;

	memset(m, 0, sizeof(*m));
	if (len > max || len > DPT_WIRE_MSG_MAX)
		return DPT_ETOOBIG;
	if (len < DPT_WIRE_HDR_SIZE || p[0] != DPT_WIRE_MAGIC0 ||
	    p[1] != DPT_WIRE_MAGIC1)
		return DPT_EPROTO;
	m->version = p[2];
	m->type = p[3];
	if (m->version != DPT_WIRE_VERSION)
		return DPT_EVERSION;

	r = (struct reader){.p = p, .len = len, .off = 4, .bad = 0};
	m->generation = get_u32(&r);
	m->seq = get_u32(&r);
	if (get_u32(&r) != len - DPT_WIRE_HDR_SIZE)
		return DPT_EPROTO;

	switch (m->type) {
	case DPT_MSG_JOIN: {
		struct dpt__msg_join *j = &m->u.join;
		j->node = get_u32(&r);
		j->local_rank = get_u32(&r);
		j->task_id = get_u32(&r);
		j->pid = get_u32(&r);
		j->caps = get_u32(&r);
		j->addr.port = get_u16(&r);
		get_str(&r, j->addr.host, sizeof(j->addr.host));
		get_str(&r, j->name, sizeof(j->name));
		j->addr.node = j->node;
		break;
	}
	case DPT_MSG_WELCOME: {
		struct dpt__msg_welcome *w = &m->u.welcome;
		w->rank = get_u32(&r);
		w->world = get_u32(&r);
		w->local_rank = get_u32(&r);
		w->local_world = get_u32(&r);
		w->backend = get_u8(&r);
		w->flags = get_u8(&r);
		if (get_u16(&r) != 0)
			r.bad = 1;
		w->heartbeat_ms = get_u32(&r);
		w->timeout_ms = get_u32(&r);
		break;
	}
	case DPT_MSG_ROSTER:
		rc = decode_roster(&r, m);
		break;
	case DPT_MSG_UNIQUE_ID:
		get_bytes(&r, m->u.unique_id, DPT_NCCL_ID_SIZE);
		break;
	case DPT_MSG_GEN_END:
		m->u.text.code = (int32_t)get_u32(&r);
		m->u.text.lost_rank = get_u32(&r);
		get_str(&r, m->u.text.text, sizeof(m->u.text.text));
		break;
	case DPT_MSG_ERROR:
		m->u.text.code = (int32_t)get_u32(&r);
		get_str(&r, m->u.text.text, sizeof(m->u.text.text));
		break;
	case DPT_MSG_TASK_EXIT:
		m->u.task_exit.task_id = get_u32(&r);
		m->u.task_exit.status = (int32_t)get_u32(&r);
		break;
	case DPT_MSG_FAULT:
		m->u.fault_code = (int32_t)get_u32(&r);
		break;
	case DPT_MSG_VOTE_DONE:
		m->u.vote.failed = get_u32(&r);
		m->u.vote.code = (int32_t)get_u32(&r);
		m->u.vote.flags = get_u32(&r);
		break;
	case DPT_MSG_VOTE:
		m->u.vote.code = (int32_t)get_u32(&r);
		m->u.vote.flags = get_u32(&r);
		break;
	case DPT_MSG_KV_PUT:
	case DPT_MSG_KV_VALUE:
		get_str(&r, m->u.kv.key, sizeof(m->u.kv.key));
		get_str(&r, m->u.kv.value, sizeof(m->u.kv.value));
		break;
	case DPT_MSG_KV_GET:
		m->u.kv.wait_ms = get_u32(&r);
		get_str(&r, m->u.kv.key, sizeof(m->u.kv.key));
		break;
	case DPT_MSG_STATUS_REPLY: {
		struct dpt__msg_status *st = &m->u.status;
		st->state = get_u8(&r);
		st->flags = get_u8(&r);
		if (get_u16(&r) != 0)
			r.bad = 1;
		st->job_id = get_u32(&r);
		st->restarts = get_u32(&r);
		st->world = get_u32(&r);
		st->nodes = get_u32(&r);
		st->expected = get_u32(&r);
		st->step = get_u64(&r);
		st->committed = get_u64(&r);
		st->committed_at = get_u64(&r);
		st->started_at = get_u64(&r);
		st->end_time = get_u64(&r);
		st->generation = get_u32(&r);
		st->stop_at = get_u64(&r);
		st->next_save = get_u64(&r);
		get_str(&r, st->run, sizeof(st->run));
		get_str(&r, st->hosts, sizeof(st->hosts));
		get_str(&r, st->last, sizeof(st->last));
		break;
	}
	case DPT_MSG_BARRIER:
	case DPT_MSG_BARRIER_DONE:
	case DPT_MSG_HEARTBEAT:
	case DPT_MSG_LEAVE:
	case DPT_MSG_ACK:
	case DPT_MSG_STATUS:
		break;
	default:
		return DPT_EPROTO;
	}
	if (rc == 0 && (r.bad || r.off != r.len || !fields_ok(m)))
		rc = DPT_EPROTO;
	if (rc)
		dpt__msg_release(m);
	return rc;
}

/* ------------------------------------------------------------ keys */

static int secret_decode(const char *hex, uint8_t out[32])
{
	if (!hex || strnlen(hex, DPT_SECRET_HEX_LEN + 1) != DPT_SECRET_HEX_LEN)
		return DPT_EINVAL;
	for (int i = 0; i < 32; i++) {
		int hi = dpt__hex_value((unsigned char)hex[2 * i]);
		int lo = dpt__hex_value((unsigned char)hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return DPT_EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

/* CURVE secret key = SHA-256(label || secret); the labels differ, so the
 * two key pairs are unrelated to anyone without the secret. */
static int derive_pair(const char *label, const uint8_t secret[32],
		       char *public_z85, char *secret_z85)
{
	uint8_t in[64], key[EVP_MAX_MD_SIZE];
	unsigned int key_len = 0;
	size_t label_len = strlen(label);
	int rc = 0;

	memcpy(in, label, label_len);
	memcpy(in + label_len, secret, 32);
	if (!EVP_Digest(in, label_len + 32, key, &key_len, EVP_sha256(),
			NULL) ||
	    key_len != 32) {
		rc = DPT_ESYS;
		goto out;
	}
	if (!zmq_z85_encode(secret_z85, key, 32)) {
		rc = DPT_ESYS;
		goto out;
	}
	if (zmq_curve_public(public_z85, secret_z85) != 0)
		rc = errno == ENOTSUP ? DPT_ENOTSUP : DPT_ESYS;
out:
	explicit_bzero(in, sizeof(in));
	explicit_bzero(key, sizeof(key));
	return rc;
}

int dpt__wire_derive_keys(const char *secret_hex, struct dpt__curve_keys *keys)
{
	uint8_t secret[32];
	int rc;

	memset(keys, 0, sizeof(*keys));
	rc = secret_decode(secret_hex, secret);
	if (rc)
		goto out;
	rc = derive_pair("dptrain/1/coordinator", secret, keys->coord_public,
			 keys->coord_secret);
	if (rc)
		goto out;
	rc = derive_pair("dptrain/1/worker", secret, keys->worker_public,
			 keys->worker_secret);
	if (rc)
		goto out;
	rc = derive_pair("dptrain/1/status", secret, keys->status_public,
			 keys->status_secret);
out:
	explicit_bzero(secret, sizeof(secret));
	if (rc)
		explicit_bzero(keys, sizeof(*keys));
	return rc;
}

int dpt__wire_read_secret_file(const char *path,
			       char out[DPT_SECRET_HEX_LEN + 1])
{
	char buf[DPT_SECRET_HEX_LEN + 8];
	uint8_t check[32];
	ssize_t n;
	size_t len;
	int fd, rc = 0;

	out[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		dpt__error("cannot open '%s': %s", path, strerror(errno));
		return errno == ENOENT ? DPT_ENOENT : DPT_EIO;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0) {
		dpt__error("cannot read '%s': %s", path, strerror(errno));
		rc = DPT_EIO;
		goto out;
	}
	len = (size_t)n;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
		len--;
	buf[len] = '\0';
	if (len != DPT_SECRET_HEX_LEN || secret_decode(buf, check) != 0) {
		dpt__error("'%s' does not hold a secret: expected 64 hex "
			   "characters",
			   path);
		rc = DPT_EINVAL;
		goto out;
	}
	memcpy(out, buf, DPT_SECRET_HEX_LEN + 1);
out:
	explicit_bzero(buf, sizeof(buf));
	explicit_bzero(check, sizeof(check));
	close(fd);
	return rc;
}

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

/* ------------------------------------------------------------ fields */

/*
 * Each message's body, once: the fields of doc/protocol.md's table, in
 * their order, each a member of struct dpt__msg. The encoder, the decoder,
 * the size and the string rules all walk these lists; rules_ok() adds
 * what relates one field to another. A new message is a row of
 * DPT_WIRE_TYPE_MAP (wire.h), a list fields_NAME here and its rules.
 */
enum field_kind {
	F_END,
	F_U8,
	F_U16,
	F_U32, /* also an i32, sent as its two's complement */
	F_U64,
	F_PAD16, /* reserved, 0 */
	F_BYTES, /* the member's size */
	F_STR,	 /* a str: a length byte, then at most the member's size - 1 */
	F_ROSTER /* world u32, then world x (node u32, port u16, host str) */
};

enum str_class { S_HOST, S_NAME, S_TEXT };

struct field {
	uint8_t kind;
	uint8_t cls; /* F_STR: enum str_class */
	uint8_t min; /* F_STR: the fewest characters */
	size_t offset, size;
};

#define MEMBER_SIZE(member) sizeof(((struct dpt__msg *)0)->member)
/* The member's size, which must be N (a compile error otherwise). */
#define SIZE_IS(member, n)                                                     \
	(MEMBER_SIZE(member) +                                                 \
	 0 * sizeof(char[MEMBER_SIZE(member) == (n) ? 1 : -1]))
#define INT(kind, member, n)                                                   \
	{                                                                      \
		kind, 0, 0, offsetof(struct dpt__msg, member),                 \
			SIZE_IS(member, n)                                     \
	}
#define U8(member)  INT(F_U8, member, 1)
#define U16(member) INT(F_U16, member, 2)
#define U32(member) INT(F_U32, member, 4)
#define U64(member) INT(F_U64, member, 8)
#define PAD16                                                                  \
	{                                                                      \
		F_PAD16, 0, 0, 0, 2                                            \
	}
#define BYTES(member)                                                          \
	{                                                                      \
		F_BYTES, 0, 0, offsetof(struct dpt__msg, member),              \
			MEMBER_SIZE(member)                                    \
	}
#define STR(member, cls, min)                                                  \
	{                                                                      \
		F_STR, cls, min, offsetof(struct dpt__msg, member),            \
			MEMBER_SIZE(member)                                    \
	}
#define ROSTER                                                                 \
	{                                                                      \
		F_ROSTER, 0, 0, 0, 0                                           \
	}
#define END                                                                    \
	{                                                                      \
		F_END, 0, 0, 0, 0                                              \
	}

/* The bodies that are empty, and those that are another's. */
static const struct field fields_empty[] = {END};
#define fields_BARRIER	    fields_empty
#define fields_BARRIER_DONE fields_empty
#define fields_HEARTBEAT    fields_empty
#define fields_LEAVE	    fields_empty
#define fields_ACK	    fields_empty
#define fields_STATUS	    fields_empty
#define fields_KV_VALUE	    fields_KV_PUT

static const struct field fields_JOIN[] = {
	U32(u.join.node),
	U32(u.join.local_rank),
	U32(u.join.task_id),
	U32(u.join.pid),
	U32(u.join.caps),
	U16(u.join.addr.port),
	STR(u.join.addr.host, S_HOST, 1),
	STR(u.join.name, S_NAME, 0),
	END,
};
static const struct field fields_WELCOME[] = {
	U32(u.welcome.rank),
	U32(u.welcome.world),
	U32(u.welcome.local_rank),
	U32(u.welcome.local_world),
	U8(u.welcome.backend),
	U8(u.welcome.flags),
	PAD16,
	U32(u.welcome.heartbeat_ms),
	U32(u.welcome.timeout_ms),
	END,
};
static const struct field fields_ROSTER[] = {ROSTER, END};
static const struct field fields_UNIQUE_ID[] = {BYTES(u.unique_id), END};
static const struct field fields_GEN_END[] = {
	U32(u.text.code),
	U32(u.text.lost_rank),
	STR(u.text.text, S_TEXT, 0),
	END,
};
static const struct field fields_TASK_EXIT[] = {
	U32(u.task_exit.task_id),
	U32(u.task_exit.status),
	END,
};
static const struct field fields_FAULT[] = {U32(u.fault_code), END};
static const struct field fields_ERROR[] = {
	U32(u.text.code),
	STR(u.text.text, S_TEXT, 0),
	END,
};
static const struct field fields_KV_PUT[] = {
	STR(u.kv.key, S_NAME, 1),
	STR(u.kv.value, S_TEXT, 0),
	END,
};
static const struct field fields_KV_GET[] = {
	U32(u.kv.wait_ms),
	STR(u.kv.key, S_NAME, 1),
	END,
};
static const struct field fields_VOTE[] = {
	U32(u.vote.code),
	U32(u.vote.flags),
	END,
};
static const struct field fields_VOTE_DONE[] = {
	U32(u.vote.failed),
	U32(u.vote.code),
	U32(u.vote.flags),
	END,
};
static const struct field fields_STATUS_REPLY[] = {
	U8(u.status.state),
	U8(u.status.flags),
	PAD16,
	U32(u.status.job_id),
	U32(u.status.restarts),
	U32(u.status.world),
	U32(u.status.nodes),
	U32(u.status.expected),
	U64(u.status.step),
	U64(u.status.committed),
	U64(u.status.committed_at),
	U64(u.status.started_at),
	U64(u.status.end_time),
	U32(u.status.generation),
	U64(u.status.stop_at),
	U64(u.status.next_save),
	STR(u.status.run, S_TEXT, 0),
	STR(u.status.hosts, S_TEXT, 0),
	STR(u.status.last, S_TEXT, 0),
	END,
};

/* Every type's list; a type of the map without one does not compile. */
static const struct field *const codecs[256] = {
#define DPT_WIRE_CODEC(name, num, w, c) [num] = fields_##name,
	DPT_WIRE_TYPE_MAP(DPT_WIRE_CODEC)
#undef DPT_WIRE_CODEC
};

static const void *member(const struct dpt__msg *m, const struct field *f)
{
	return (const char *)m + f->offset;
}

static int str_ok(const struct field *f, const char *s)
{
	static int (*const classes[])(int) = {
		[S_HOST] = is_host_char,
		[S_NAME] = is_name_char,
		[S_TEXT] = is_text_char,
	};

	return str_check(s, f->min, f->size - 1, classes[f->cls]) >= 0;
}

/* What relates one field to another (doc/protocol.md, "Field values");
 * each field's own rules are its list's. */
static int rules_ok(const struct dpt__msg *m)
{
	switch (m->type) {
	case DPT_MSG_JOIN: {
		const struct dpt__msg_join *j = &m->u.join;
		if (!j->caps || (j->caps & ~(DPT_CAP_CPU | DPT_CAP_NCCL)))
			return 0;
		return !(j->caps & DPT_CAP_CPU) || j->addr.port != 0;
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
	case DPT_MSG_BARRIER:
	case DPT_MSG_BARRIER_DONE:
		return m->seq >= 1;
	case DPT_MSG_GEN_END:
		return m->u.text.code >= DPT_END_PEER_LOST &&
		       m->u.text.code <= DPT_END_EVICTED;
	case DPT_MSG_ERROR:
		return m->u.text.code < 0;
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
		return m->u.kv.wait_ms <= DPT_KV_WAIT_MAX;
	case DPT_MSG_STATUS_REPLY: {
		const struct dpt__msg_status *st = &m->u.status;
		return st->state >= DPT_STATUS_GATHERING &&
		       st->state <= DPT_STATUS_DONE &&
		       (st->flags & ~DPT_STATUS_STOPPING) == 0 &&
		       st->world <= DPT_WIRE_WORLD_MAX &&
		       st->nodes <= st->world;
	}
	}
	return 1;
}

/*
 * The rules of doc/protocol.md, checked on both sides: the encoder
 * refuses to send what the decoder would refuse to accept.
 */
static int fields_ok(const struct dpt__msg *m)
{
	const struct field *f = codecs[m->type];

	if (!f)
		return 0;
	for (; f->kind != F_END; f++) {
		if (f->kind == F_STR && !str_ok(f, member(m, f)))
			return 0;
		if (f->kind != F_ROSTER)
			continue;
		if (m->world < 1 || m->world > DPT_WIRE_WORLD_MAX || !m->roster)
			return 0;
		for (uint32_t i = 0; i < m->world; i++)
			if (!peer_ok(&m->roster[i]))
				return 0;
	}
	return rules_ok(m);
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
	size_t n = 0;

	for (const struct field *f = codecs[m->type]; f->kind != F_END; f++) {
		switch (f->kind) {
		case F_STR:
			n += 1 + strlen(member(m, f));
			break;
		case F_ROSTER:
			n += 4;
			for (uint32_t i = 0; i < m->world; i++)
				n += 7 + strlen(m->roster[i].host);
			break;
		default:
			n += f->size;
		}
	}
	return n;
}

size_t dpt__wire_size(const struct dpt__msg *m)
{
	size_t n;

	if (!fields_ok(m))
		return 0;
	n = DPT_WIRE_HDR_SIZE + body_size(m);
	return n <= DPT_WIRE_MSG_MAX ? n : 0;
}

static void put_field(struct writer *w, const struct dpt__msg *m,
		      const struct field *f)
{
	const void *v = member(m, f);
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (f->kind) {
	case F_U8:
		put_u8(w, *(const uint8_t *)v);
		break;
	case F_U16:
		memcpy(&u16, v, 2);
		put_u16(w, u16);
		break;
	case F_U32:
		memcpy(&u32, v, 4);
		put_u32(w, u32);
		break;
	case F_U64:
		memcpy(&u64, v, 8);
		put_u64(w, u64);
		break;
	case F_PAD16:
		put_u16(w, 0);
		break;
	case F_BYTES:
		put_bytes(w, v, f->size);
		break;
	case F_STR:
		put_str(w, v);
		break;
	case F_ROSTER:
		put_u32(w, m->world);
		for (uint32_t i = 0; i < m->world; i++) {
			put_u32(w, m->roster[i].node);
			put_u16(w, m->roster[i].port);
			put_str(w, m->roster[i].host);
		}
		break;
	}
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
	for (const struct field *f = codecs[m->type]; f->kind != F_END; f++)
		put_field(&w, m, f);
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

static int get_field(struct reader *r, struct dpt__msg *m,
		     const struct field *f)
{
	void *v = (char *)m + f->offset;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (f->kind) {
	case F_U8:
		*(uint8_t *)v = get_u8(r);
		break;
	case F_U16:
		u16 = get_u16(r);
		memcpy(v, &u16, 2);
		break;
	case F_U32:
		u32 = get_u32(r);
		memcpy(v, &u32, 4);
		break;
	case F_U64:
		u64 = get_u64(r);
		memcpy(v, &u64, 8);
		break;
	case F_PAD16:
		if (get_u16(r) != 0)
			r->bad = 1;
		break;
	case F_BYTES:
		get_bytes(r, v, f->size);
		break;
	case F_STR:
		get_str(r, v, f->size);
		break;
	case F_ROSTER:
		return decode_roster(r, m);
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
	if (!codecs[m->type])
		return DPT_EPROTO;
	for (const struct field *f = codecs[m->type];
	     f->kind != F_END && !rc && !r.bad; f++)
		rc = get_field(&r, m, f);
	if (m->type == DPT_MSG_JOIN)
		m->u.join.addr.node = m->u.join.node; /* not sent: it is NODE */
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

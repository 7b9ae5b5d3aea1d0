/*
 * Admission to the CPU data plane (doc/protocol.md, "CPU data plane"):
 * the generation's key, the HELLO that a connector sends and the REPLY
 * that its listener answers, both authenticated by HMAC-SHA256 under that
 * key, and the listener's side, which serves several pending connections
 * at once so that one that never speaks delays nobody.
 */
#ifndef DPT_WORKER_CPU_HELLO_H
#define DPT_WORKER_CPU_HELLO_H

#include <stddef.h>
#include <stdint.h>

#define DPT__HELLO_BYTES       68
#define DPT__HELLO_REPLY_BYTES 40
#define DPT__HELLO_KIND_RING   1u /* from the previous node's leader */
#define DPT__HELLO_KIND_LOCAL  2u /* from a rank of the leader's node */
#define DPT__HELLO_PENDING_MAX 64

/* The set-up's integers are little-endian 32-bit words. */
static inline void dpt__put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t dpt__get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* A generation's data-plane key. */
struct dpt__hello_key {
	unsigned char k[32];
};

/* What a HELLO says once its MAC is checked. */
struct dpt__hello {
	uint32_t kind;
	uint32_t from; /* the connector's rank */
	uint32_t to;   /* the listener's rank, as the connector means it */
};

/*
 * Derive the key of the generation SESSION from the step's key material
 * STEP_KEY (LEN bytes; the worker's CURVE secret key). Returns 0, or
 * DPT_EINVAL (no key material), DPT_ESYS (libcrypto failed).
 */
int dpt__hello_key_derive(struct dpt__hello_key *out, const void *step_key,
			  size_t len, const char *session);

/*
 * Encode H into OUT with a fresh random nonce and its MAC. Returns 0 or
 * DPT_ESYS (getrandom or libcrypto failed).
 */
int dpt__hello_encode(const struct dpt__hello_key *key,
		      const struct dpt__hello *h,
		      unsigned char out[DPT__HELLO_BYTES]);
/*
 * Check and decode a received HELLO. Returns 0 (*H filled), DPT_EPROTO
 * (not a HELLO), DPT_EVERSION (another version) or DPT_EAUTH (the MAC is
 * not that of KEY: another step or generation, or a forger).
 */
int dpt__hello_decode(const struct dpt__hello_key *key,
		      const unsigned char in[DPT__HELLO_BYTES],
		      struct dpt__hello *h);
/* The listener's REPLY to the HELLO HELLO. Returns 0 or DPT_ESYS. */
int dpt__hello_reply(const struct dpt__hello_key *key,
		     const unsigned char hello[DPT__HELLO_BYTES],
		     unsigned char out[DPT__HELLO_REPLY_BYTES]);
/* Whether REPLY answers HELLO under KEY: 0, or DPT_EAUTH. */
int dpt__hello_check_reply(const struct dpt__hello_key *key,
			   const unsigned char hello[DPT__HELLO_BYTES],
			   const unsigned char reply[DPT__HELLO_REPLY_BYTES]);

/* One connection accepted and not yet admitted. */
struct dpt__hello_pending {
	int fd;
	size_t got; /* bytes of the HELLO received */
	uint64_t since;
	unsigned char buf[DPT__HELLO_BYTES];
	char from[64]; /* the peer's address, for the log */
};

/* A listener's connections that have not sent their HELLO yet. Embedded
 * in the caller; borrows KEY, which must outlive it. */
struct dpt__hello_gate {
	const struct dpt__hello_key *key;
	uint32_t me;
	int n;
	struct dpt__hello_pending pending[DPT__HELLO_PENDING_MAX];
};

void dpt__hello_gate_init(struct dpt__hello_gate *g,
			  const struct dpt__hello_key *key, uint32_t me);
/*
 * Wait on the listening socket LFD until a connection sends a valid HELLO
 * meant for this rank, answer its REPLY, and hand it over: *FD (the
 * caller's from then on; non-blocking) and *H. Connections that fail are
 * closed and logged, rate-limited. Returns 0, DPT_ETIMEDOUT at DEADLINE
 * (dpt__now_ns's clock) or DPT_ESYS (poll failed).
 */
int dpt__hello_gate_next(struct dpt__hello_gate *g, int lfd, uint64_t deadline,
			 int *fd, struct dpt__hello *h);
/* Refuse an admitted connection after all (a rank the topology does not
 * expect, or one already admitted): closes FD and logs, rate-limited. */
void dpt__hello_refuse(int fd, const char *why);
/* Close the pending connections, logging them (rate-limited). */
void dpt__hello_gate_release(struct dpt__hello_gate *g);

#endif

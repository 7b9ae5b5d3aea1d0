/* Admission to the CPU data plane: see worker/cpu_hello.h. */
#define _GNU_SOURCE /* accept4 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <dptrain/error.h>

#include "clock.h"
#include "cpu_hello.h"
#include "cpu_watch.h"
#include "log.h"
#include "ratelimit.h"

#define HELLO_MAGIC   0x43545044u /* "DPTC" little-endian */
#define REPLY_MAGIC   0x52545044u /* "DPTR" */
#define HELLO_VERSION 2u
#define NONCE_AT      20
#define MAC_AT	      36 /* the HELLO's MAC covers the bytes before it */
#define KEY_LABEL     "dptrain/1/cpu-data-plane"

/* Refusals logged: at most REFUSED_BURST lines per REFUSED_WINDOW_MS in a
 * process. The data plane is set up by one thread at a time (dpt__join),
 * so one unlocked counter is enough. */
#define REFUSED_BURST	  5
#define REFUSED_WINDOW_MS 10000
static struct dpt__ratelimit refused_rl;

/* HMAC-SHA256(KEY, LABEL || 0x00 || MSG) into OUT. The one-shot HMAC()
 * is in every libcrypto from 1.1 on and deprecated in none. */
static int mac(const void *key, size_t key_len, const char *label,
	       const void *msg, size_t len, unsigned char out[32])
{
	unsigned char in[160];
	size_t label_len = strlen(label) + 1;
	unsigned int n = 0;

	if (label_len + len > sizeof(in) || key_len > INT_MAX)
		return DPT_EINVAL;
	memcpy(in, label, label_len);
	memcpy(in + label_len, msg, len);
	if (!HMAC(EVP_sha256(), key, (int)key_len, in, label_len + len, out,
		  &n) ||
	    n != 32)
		return DPT_ESYS;
	return 0;
}

int dpt__hello_key_derive(struct dpt__hello_key *out, const void *step_key,
			  size_t len, const char *session)
{
	if (!out || !step_key || !len || !session)
		return DPT_EINVAL;
	return mac(step_key, len, KEY_LABEL, session, strlen(session), out->k);
}

int dpt__hello_encode(const struct dpt__hello_key *key,
		      const struct dpt__hello *h,
		      unsigned char out[DPT__HELLO_BYTES])
{
	dpt__put32(out, HELLO_MAGIC);
	dpt__put32(out + 4, HELLO_VERSION);
	dpt__put32(out + 8, h->kind);
	dpt__put32(out + 12, h->from);
	dpt__put32(out + 16, h->to);
	if (getrandom(out + NONCE_AT, MAC_AT - NONCE_AT, 0) !=
	    MAC_AT - NONCE_AT)
		return DPT_ESYS;
	return mac(key->k, sizeof(key->k), "hello", out, MAC_AT, out + MAC_AT);
}

int dpt__hello_decode(const struct dpt__hello_key *key,
		      const unsigned char in[DPT__HELLO_BYTES],
		      struct dpt__hello *h)
{
	unsigned char want[32];
	int rc;

	if (dpt__get32(in) != HELLO_MAGIC)
		return DPT_EPROTO;
	if (dpt__get32(in + 4) != HELLO_VERSION)
		return DPT_EVERSION;
	rc = mac(key->k, sizeof(key->k), "hello", in, MAC_AT, want);
	if (rc)
		return rc;
	if (CRYPTO_memcmp(want, in + MAC_AT, sizeof(want)) != 0)
		return DPT_EAUTH;
	h->kind = dpt__get32(in + 8);
	h->from = dpt__get32(in + 12);
	h->to = dpt__get32(in + 16);
	return 0;
}

int dpt__hello_reply(const struct dpt__hello_key *key,
		     const unsigned char hello[DPT__HELLO_BYTES],
		     unsigned char out[DPT__HELLO_REPLY_BYTES])
{
	dpt__put32(out, REPLY_MAGIC);
	dpt__put32(out + 4, HELLO_VERSION);
	return mac(key->k, sizeof(key->k), "reply", hello, MAC_AT, out + 8);
}

int dpt__hello_check_reply(const struct dpt__hello_key *key,
			   const unsigned char hello[DPT__HELLO_BYTES],
			   const unsigned char reply[DPT__HELLO_REPLY_BYTES])
{
	unsigned char want[DPT__HELLO_REPLY_BYTES];

	if (dpt__hello_reply(key, hello, want))
		return DPT_EAUTH;
	if (CRYPTO_memcmp(want, reply, sizeof(want)) != 0)
		return DPT_EAUTH;
	return 0;
}

/* ------------------------------------------------------------ listener */

static void peer_name(int fd, char *buf, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[48], port[8];

	snprintf(buf, size, "an unknown address");
	if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0 &&
	    getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port,
			sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		snprintf(buf, size, "%s port %s", host, port);
}

static void log_refusal(const char *from, const char *why)
{
	long n =
		dpt__ratelimit(&refused_rl, (int64_t)(dpt__now_ns() / 1000000u),
			       REFUSED_BURST, REFUSED_WINDOW_MS);

	if (n == 1)
		dpt__warn("refused a data-plane connection from %s: %s", from,
			  why);
	else if (n > 1)
		dpt__warn("refused a data-plane connection from %s: %s (and "
			  "%ld more not logged)",
			  from, why, n - 1);
}

void dpt__hello_refuse(int fd, const char *why)
{
	char from[64];

	peer_name(fd, from, sizeof(from));
	close(fd);
	log_refusal(from, why);
}

void dpt__hello_gate_init(struct dpt__hello_gate *g,
			  const struct dpt__hello_key *key, uint32_t me)
{
	g->key = key;
	g->me = me;
	g->n = 0;
}

static void drop(struct dpt__hello_gate *g, int i, const char *why)
{
	close(g->pending[i].fd);
	if (why)
		log_refusal(g->pending[i].from, why);
	g->pending[i] = g->pending[--g->n];
}

/* Read what pending connection I has sent. Returns 1 when it is admitted
 * (*FD, *H filled, the REPLY sent, I no longer pending), else 0. */
static int advance(struct dpt__hello_gate *g, int i, int *fd,
		   struct dpt__hello *h)
{
	struct dpt__hello_pending *p = &g->pending[i];
	unsigned char reply[DPT__HELLO_REPLY_BYTES];
	ssize_t k = recv(p->fd, p->buf + p->got, sizeof(p->buf) - p->got, 0);
	int rc;

	if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
		       errno != EINTR)) {
		drop(g, i, "closed before the end of its hello");
		return 0;
	}
	if (k < 0)
		return 0;
	p->got += (size_t)k;
	if (p->got < sizeof(p->buf))
		return 0;
	rc = dpt__hello_decode(g->key, p->buf, h);
	if (rc) {
		drop(g, i,
		     rc == DPT_EPROTO	  ? "not a dptrain hello"
		     : rc == DPT_EVERSION ? "another protocol version"
		     : rc == DPT_EAUTH	  ? "wrong key: not a member of "
					    "this step and generation"
					  : "cannot check its hello");
		return 0;
	}
	if (h->to != g->me) {
		drop(g, i, "meant for another rank");
		return 0;
	}
	/* 40 bytes into a fresh socket's empty buffer: never short. */
	if (dpt__hello_reply(g->key, p->buf, reply) ||
	    send(p->fd, reply, sizeof(reply), MSG_NOSIGNAL | MSG_DONTWAIT) !=
		    (ssize_t)sizeof(reply)) {
		drop(g, i, "cannot send the reply");
		return 0;
	}
	*fd = p->fd;
	g->pending[i] = g->pending[--g->n];
	return 1;
}

/* Accept one connection; a full gate evicts its oldest. Returns as
 * advance() does for the new connection. */
static int accept_one(struct dpt__hello_gate *g, int lfd, int *fd,
		      struct dpt__hello *h)
{
	struct dpt__hello_pending *p;
	int nfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (nfd < 0)
		return 0;
	if (g->n == DPT__HELLO_PENDING_MAX) {
		int oldest = 0;
		for (int i = 1; i < g->n; i++)
			if (g->pending[i].since < g->pending[oldest].since)
				oldest = i;
		drop(g, oldest, "too many connections pending");
	}
	p = &g->pending[g->n++];
	*p = (struct dpt__hello_pending){.fd = nfd, .since = dpt__now_ns()};
	peer_name(nfd, p->from, sizeof(p->from));
	/* A rank sends its HELLO right after connecting: it is usually
	 * here already. */
	return advance(g, g->n - 1, fd, h);
}

int dpt__hello_gate_next(struct dpt__hello_gate *g, int lfd, uint64_t deadline,
			 int *fd, struct dpt__hello *h)
{
	struct pollfd pfd[1 + DPT__HELLO_PENDING_MAX];

	for (;;) {
		uint64_t now = dpt__now_ns();
		int n = g->n, ms, rc;

		if (now >= deadline)
			return DPT_ETIMEDOUT;
		ms = (int)((deadline - now + 999999u) / 1000000u);
		pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
		for (int i = 0; i < n; i++)
			pfd[1 + i] = (struct pollfd){.fd = g->pending[i].fd,
						     .events = POLLIN};
		rc = poll(pfd, (nfds_t)n + 1, ms);
		if (rc < 0 && errno != EINTR)
			return DPT_ESYS;
		if (rc <= 0)
			continue;
		/* Backwards: dropping I moves the last entry, already seen,
		 * into its place. */
		for (int i = n - 1; i >= 0; i--)
			if (pfd[1 + i].revents && advance(g, i, fd, h))
				return 0;
		if ((pfd[0].revents & POLLIN) && accept_one(g, lfd, fd, h))
			return 0;
	}
}

void dpt__hello_gate_release(struct dpt__hello_gate *g)
{
	while (g->n)
		drop(g, g->n - 1,
		     "no whole hello by the time every rank had connected");
}

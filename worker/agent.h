/*
 * A worker's link to its coordinator: a background thread that owns the
 * ZeroMQ DEALER socket (ZeroMQ sockets are not thread-safe, so no other
 * thread touches it), heartbeats, watches that the coordinator is alive,
 * and passes messages to and from the application thread over an inproc
 * pipe.
 *
 * The thread acts on its own in two cases, because the application thread
 * may be blocked inside a collective: when the coordinator ends a
 * generation (GEN_END, ERROR) and when the coordinator falls silent. It
 * then calls the abort hook, which makes the collectives return.
 */
#ifndef DPT_WORKER_AGENT_H
#define DPT_WORKER_AGENT_H

#include <stdint.h>

#include "wire.h"

struct dpt__agent;

/*
 * Called from the agent's thread. GENERATION is the generation that ended
 * (UINT32_MAX: all of them, the link is dead); CAUSE is DPT_EGENERATION,
 * or the fatal error (DPT_ECOORDLOST, DPT_EAUTH, an ERROR's code). It must
 * not block.
 */
typedef void (*dpt__agent_abort_fn)(void *arg, uint32_t generation, int cause);

struct dpt__agent_config {
	const char *endpoint;		    /* copied */
	const struct dpt__curve_keys *keys; /* copied */
	int connect_timeout_ms; /* bound on the wait for the first message */
	int heartbeat_ms;	/* until a WELCOME says otherwise */
	int timeout_ms;		/* until a WELCOME says otherwise */
	dpt__agent_abort_fn abort_fn;
	void *abort_arg;
};

/*
 * Start the thread and connect. Returns 0 and *OUT (the caller owns it and
 * ends it with dpt__agent_stop), DPT_ESYS or DPT_ENOMEM.
 */
int dpt__agent_start(struct dpt__agent **out,
		     const struct dpt__agent_config *cfg);

/* Send M to the coordinator (from the application thread only). */
int dpt__agent_send(struct dpt__agent *a, const struct dpt__msg *m);

/*
 * The next message from the coordinator, waiting at most TIMEOUT_MS (-1:
 * no limit; the agent guarantees an answer within its timeouts). Returns 0
 * and *M (release it with dpt__msg_release), DPT_ETIMEDOUT, or the fatal
 * error that ended the link (DPT_ECOORDLOST, DPT_EAUTH).
 */
int dpt__agent_recv(struct dpt__agent *a, struct dpt__msg *m, int timeout_ms);

/* 0 while the link is up, else the fatal error that ended it. Any thread. */
int dpt__agent_failed(const struct dpt__agent *a);

/*
 * Stop the thread: messages already sent are flushed for up to LINGER_MS,
 * then the socket is closed. Accepts NULL; nulls *A.
 */
void dpt__agent_stop(struct dpt__agent **a, int linger_ms);

#endif

/*
 * The worker's context, struct dpt_ctx (opaque in <dptrain/dptrain.h>),
 * and what worker/dptrain.c (generations, collectives) and worker/init.c
 * (dpt_init's options and the creation of a context) share. Internal to
 * libdptrain.
 */
#ifndef DPT_WORKER_CTX_H
#define DPT_WORKER_CTX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <dptrain/dptrain.h>

#include "wire.h"

#define ENDPOINT_MAX 512

struct dpt__agent;
struct dpt__logger;
struct dpt__coll_ops;

enum worker_state {
	W_JOINING, /* waiting for a generation and its communicator */
	W_ACTIVE,  /* collectives run */
	W_BROKEN,  /* the generation ended or failed: dpt_rejoin */
	W_LOST,	   /* the link to the coordinator is dead */
};

struct dpt_ctx {
	struct dpt__agent *agent;
	struct dpt__curve_keys keys;
	char endpoint[ENDPOINT_MAX];
	char secret_hex[DPT_SECRET_HEX_LEN + 1]; /* for dpt__report */
	char data_host[DPT_HOST_MAX];
	char hostname[DPT_WIRE_NAME_MAX + 1];
	char session_base[40];
	uint32_t caps;
	uint32_t node;
	uint32_t local_hint; /* the node-local task number: picks the GPU */
	uint32_t task_id;
	int comm_timeout_ms;
	void *cuda_stream; /* dpt_set_cuda_stream; NULL: the legacy stream */

	enum worker_state state;
	int error; /* W_BROKEN, W_LOST: what calls return */
	uint32_t generation;
	int rank, world, local_rank, local_world;
	/* The generation's backend (WELCOME's), set while COMM is NULL. */
	const struct dpt__coll_ops *coll;
	uint32_t barrier_seq;
	bool fault_sent;

	/* Shared with the agent's abort hook, under LOCK. */
	pthread_mutex_t lock;
	pthread_cond_t verdict;	  /* the hook ran: ENDED or LINK_DEAD changed */
	uint32_t ended;		  /* newest generation the coordinator ended */
	bool link_dead;		  /* the coordinator is gone or refused us */
	uint32_t comm_generation; /* the generation of COMM */
	void *comm;		  /* COLL's communicator, or NULL */
	atomic_int comm_abort;	  /* struct dpt__coll_gen's abort */
	/* dpt_request_stop, from any thread or a signal handler: a
	 * lock-free atomic is async-signal-safe (C11 7.14.1.1). */
	atomic_int stop_requested;
	bool stop_logged; /* the request was logged when first sent */

	/* dpt_log, dpt_set_total_steps, dpt_set_global_batch
	 * (worker/logger.c): the training thread's. */
	struct dpt__logger *logger; /* started by the first dpt_log */
	bool logger_failed;	    /* no coordinator, or no thread */
	uint64_t total_steps_sent;  /* 0: never */
	uint64_t global_batch_sent; /* 0: never */
};

/*
 * The agent's abort hook (struct dpt__agent_config's abort_fn, ARG the
 * context), run on the agent's thread: GENERATION ended (UINT32_MAX: the
 * link to the coordinator died). Aborts the communicator in use when the
 * verdict reaches it, and wakes whoever waits for a verdict.
 */
void dpt__on_abort(void *arg, uint32_t generation, int cause);

/*
 * Join the next generation (the first, from dpt_init; the next, from
 * dpt_rejoin) and set up its communicator. A generation that breaks during
 * set-up is reported and the next one joined. Returns 0 (the context is
 * active), or the error that stopped it, also left in the context (broken,
 * or lost when the coordinator's link failed).
 */
int dpt__join(struct dpt_ctx *ctx);

#endif

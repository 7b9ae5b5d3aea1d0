/*
 * The collectives' seam: what worker/dptrain.c needs of a backend, one
 * struct dpt__coll_ops per backend (worker/cpu_coll.c: the CPU backend of
 * worker/cpu_comm.h; worker/nccl.c: NCCL). dpt_init offers the
 * coordinator the available backends (JOIN's caps); the coordinator names
 * the generation's in WELCOME; the worker finds its operations there
 * (dpt__coll_find) and calls through them until the generation ends
 * (doc/architecture.md, "Adding a collectives backend").
 */
#ifndef DPT_WORKER_COLL_H
#define DPT_WORKER_COLL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dptrain/dptrain.h>

#include "wire.h"

/* Where a backend's collectives take buffers (struct dpt__coll_ops's
 * memory). */
#define DPT__COLL_HOST	 0x1u /* host memory */
#define DPT__COLL_DEVICE 0x2u /* CUDA device memory of the rank's GPU */

struct dpt__cpu_listener;

/* One generation's communicator as a backend's create is asked for it. */
struct dpt__coll_gen {
	uint32_t generation;
	int rank, world;
	int local_hint;	     /* the node-local task number: picks the GPU */
	const char *session; /* unique to the job step and the generation */
	/* Key material that only the step's ranks hold (borrowed). */
	const void *step_key;
	size_t step_key_len;
	int timeout_ms; /* the set-up's bound, then a collective's */
	void *stream;	/* the caller's CUDA stream (dpt_set_cuda_stream) */
	/* The worker's: set from any thread, it makes every wait of the
	 * set-up and of the collectives end with DPT_EGENERATION. It
	 * outlives the communicator. */
	atomic_int *abort;
	/* The data-plane listener whose address JOIN advertised (when the
	 * worker offered DPT_CAP_CPU), or NULL; a backend that listens
	 * takes it over and nulls *LISTENER. */
	struct dpt__cpu_listener **listener;
};

struct dpt__coll_ops {
	const char *name; /* dpt_backend's answer, and the logs' */
	uint8_t wire;	  /* WELCOME's DPT_BACKEND_* */
	uint32_t cap;	  /* JOIN's DPT_CAP_* */
	unsigned memory;  /* DPT__COLL_HOST, DPT__COLL_DEVICE */
	/* Its ranks connect to each other: it takes the listener of
	 * JOIN's address, which the worker otherwise closes at WELCOME. */
	bool listens;
	/* Whether this build and this machine can run it; when not, why
	 * (for "backend 'NAME' requested, but ..."). */
	int (*available)(void);
	const char *unavailable;
	/* The message type that the coordinator relays to every member with
	 * the generation's bootstrap (DPT_MSG_ROSTER, DPT_MSG_UNIQUE_ID). */
	uint8_t bootstrap;
	/* On the rank that WELCOME names the bootstrap's root
	 * (DPT_WELCOME_CREATE_ID): fill M's body, which the worker sends
	 * the coordinator to relay. The caller stays the root until every
	 * rank has created its communicator. NULL: the coordinator makes
	 * the bootstrap. Returns 0 or an error. */
	int (*root)(struct dpt__msg *m);
	/* Build the generation's communicator from BOOT (the bootstrap
	 * message, borrowed) into *OUT, which the caller then owns. */
	int (*create)(void **out, const struct dpt__coll_gen *g,
		      const struct dpt__msg *boot);
	/* Why the backend cannot allreduce DTYPE (a static string), or
	 * NULL when it can; on every rank alike. NULL: any dtype the
	 * reduction rules admit (dpt__reduce_refusal). */
	const char *(*reduce_refusal)(enum dpt_dtype dtype);
	/* The collectives of <dptrain/dptrain.h>, arguments checked by the
	 * caller; 0 or a dpt_error (DPT_EPEERLOST, DPT_EGENERATION, ...).
	 * After a failure every later call fails. */
	int (*allreduce)(void *comm, const void *send, void *recv, size_t count,
			 enum dpt_dtype dtype, enum dpt_op op);
	int (*broadcast)(void *comm, void *buf, size_t count,
			 enum dpt_dtype dtype, int root);
	int (*allgather)(void *comm, const void *send, void *recv, size_t count,
			 enum dpt_dtype dtype);
	/* Order later collectives after the work queued on STREAM. NULL:
	 * the backend has no streams. */
	void (*set_stream)(void *comm, void *stream);
	/* Make every collective in progress or to come return
	 * DPT_EGENERATION; from any thread, never blocks. NULL: the
	 * backend watches the generation's abort flag only. */
	void (*abort)(void *comm);
	/* Free; accepts NULL; nulls *COMM. */
	void (*destroy)(void **comm);
};

/* Every backend, NULL-terminated. */
extern const struct dpt__coll_ops *const dpt__coll_backends[];

/* The backend that WELCOME names by WIRE; the CPU backend for any value
 * but NCCL's (the wire's rules admit no other). */
const struct dpt__coll_ops *dpt__coll_find(uint8_t wire);

#endif

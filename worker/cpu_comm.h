/*
 * The CPU collective backend: shared memory between the ranks of a node,
 * a TCP ring between nodes (worker/cpu_comm.c). The worker API
 * (worker/dptrain.c) reaches it through its operations, dpt__coll_cpu
 * (worker/coll.h, worker/cpu_coll.c); the tests and the benchmark call it
 * directly. The coordinator is not involved in data movement.
 *
 * Bootstrap of the CPU backend: before joining, each worker opens a
 * listener (dpt__cpu_listen) and sends its address in its JOIN message; the
 * coordinator relays the generation's roster (address and node of every
 * rank) and each worker then connects with dpt__cpu_comm_new.
 */
#ifndef DPT_WORKER_CPU_COMM_H
#define DPT_WORKER_CPU_COMM_H

#include <stddef.h>
#include <stdint.h>

#include <dptrain/dptrain.h>

#include "coll.h"
#include "wire.h" /* struct dpt__peer: the roster is a wire type */

/* The backend's operations (worker/coll.h). */
extern const struct dpt__coll_ops dpt__coll_cpu;

struct dpt__cpu_listener;
struct dpt__cpu_comm;

/*
 * Open a TCP listener on BIND_HOST (numeric: the data address that the
 * worker advertises, never every interface) and an ephemeral port. *PORT
 * receives the port. The caller owns *OUT and releases it with
 * dpt__cpu_listener_destroy (or hands it to dpt__cpu_comm_new, which takes
 * ownership).
 */
int dpt__cpu_listen(struct dpt__cpu_listener **out, const char *bind_host,
		    uint16_t *port);
void dpt__cpu_listener_destroy(struct dpt__cpu_listener **l);

/*
 * Connect the ranks of one generation. LISTENER is taken over (the
 * caller's pointer is nulled). PEERS has WORLD entries indexed by rank.
 * SESSION is a string unique to this job step and generation; STEP_KEY
 * (STEP_KEY_LEN bytes, borrowed) is key material that only the step's
 * ranks hold (the worker's CURVE secret key). The generation's data-plane
 * key derives from both, and a connection is admitted only when it proves
 * that it holds that key (doc/protocol.md, "CPU data plane"). Blocks until
 * every connection is up or TIMEOUT_MS passes (DPT_ETIMEDOUT); DPT_EAUTH
 * when a peer's listener does not hold the key.
 */
int dpt__cpu_comm_new(struct dpt__cpu_comm **out,
		      struct dpt__cpu_listener **listener, int rank, int world,
		      const struct dpt__peer *peers, const char *session,
		      const void *step_key, size_t step_key_len,
		      int timeout_ms);

/*
 * A wait in a collective that sees no progress for TIMEOUT_MS (default
 * 60000; <= 0 waits forever) fails with DPT_EPEERLOST: a peer that is
 * alive but silent. It must exceed the longest time that ranks may enter
 * a collective apart. Not thread-safe against a running collective.
 */
void dpt__cpu_comm_set_timeout(struct dpt__cpu_comm *c, int timeout_ms);

/*
 * Collectives. SEND may equal RECV (in place). COUNT is in elements. They
 * return 0, or DPT_EPEERLOST when a peer closed or went silent, or
 * DPT_EGENERATION after dpt__cpu_comm_abort, or DPT_EINVAL for bad
 * arguments (before any communication). Every rank must call the same
 * collectives in the same order with the same COUNT, DTYPE, OP and ROOT;
 * one collective at a time per communicator. After a failure the
 * communicator is broken: every later call returns the same error, and
 * its peers' calls fail too (it shuts its connections down rather than
 * leave them waiting).
 */
int dpt__cpu_allreduce(struct dpt__cpu_comm *c, const void *send, void *recv,
		       size_t count, enum dpt_dtype dtype, enum dpt_op op);
int dpt__cpu_broadcast(struct dpt__cpu_comm *c, void *buf, size_t count,
		       enum dpt_dtype dtype, int root);
/* RECV holds WORLD * COUNT elements, rank r's contribution at r * COUNT.
 * In place: SEND == RECV (the contribution first in RECV) or, as in MPI,
 * SEND == RECV + rank * COUNT elements. */
int dpt__cpu_allgather(struct dpt__cpu_comm *c, const void *send, void *recv,
		       size_t count, enum dpt_dtype dtype);
int dpt__cpu_barrier(struct dpt__cpu_comm *c);

/*
 * Make every collective in progress or to come return DPT_EGENERATION.
 * Safe to call from another thread (the worker's heartbeat thread calls
 * it when the coordinator reports an eviction) and from a signal handler's
 * deferred context; it never blocks.
 */
void dpt__cpu_comm_abort(struct dpt__cpu_comm *c);
/* Close connections and unmap shared memory; accepts NULL; nulls *C. */
void dpt__cpu_comm_destroy(struct dpt__cpu_comm **c);

#endif

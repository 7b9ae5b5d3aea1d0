/*
 * The NCCL collective backend. Built for real when configure found NCCL
 * (HAVE_NCCL); otherwise every function reports DPT_ENOTSUP and
 * dpt__nccl_available() says no, so callers need no #ifdef. The worker
 * API reaches it through its operations, dpt__coll_nccl (worker/coll.h).
 *
 * Buffers are device memory of the communicator's GPU. Each collective is
 * enqueued on the communicator's stream after the caller's stream's work
 * (dpt__nccl_comm_set_stream) and waited for, so that a call returns only
 * when its result is in RECV, or with an error.
 */
#ifndef DPT_WORKER_NCCL_H
#define DPT_WORKER_NCCL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <dptrain/dptrain.h>

#include "coll.h"
#include "wire.h"

struct dpt__nccl_comm;

/* The backend's operations (worker/coll.h). */
extern const struct dpt__coll_ops dpt__coll_nccl;

/* Whether this build has NCCL and a CUDA device is visible. CUDA is asked
 * (which initialises its driver) only where dpt__gpu_device_files
 * (gpu_probe.h) says yes for /dev and $CUDA_VISIBLE_DEVICES. */
int dpt__nccl_available(void);

/* A fresh NCCL unique ID (ncclGetUniqueId) into ID. The caller must stay
 * alive until every rank has initialised with it (NCCL's bootstrap root
 * lives in this process). Returns 0, DPT_ENCCL or DPT_ENOTSUP. */
int dpt__nccl_unique_id(uint8_t id[DPT_NCCL_ID_SIZE]);

/*
 * Create RANK's communicator of WORLD ranks from ID on the CUDA device of
 * LOCAL_RANK (modulo the visible devices: with one GPU bound per task,
 * that is device 0),
 * non-blocking (ncclCommInitRankConfig with blocking=0) and polled until
 * it is ready, TIMEOUT_MS passes (DPT_ETIMEDOUT) or *ABORT becomes
 * non-zero (DPT_EGENERATION); in both failures the half-made communicator
 * is aborted. ABORT is the caller's and must outlive the communicator:
 * setting it from any thread makes every wait of this communicator abort
 * it and return DPT_EGENERATION. The caller owns *OUT.
 */
int dpt__nccl_comm_new(struct dpt__nccl_comm **out,
		       const uint8_t id[DPT_NCCL_ID_SIZE], int rank, int world,
		       int local_rank, int timeout_ms, atomic_int *abort);

/* The bound of one collective (default DPT__NCCL_TIMEOUT_MS; <= 0: none).
 * A collective that is not complete by then aborts the communicator and
 * returns DPT_EPEERLOST: a peer that is alive but never enters the
 * collective. It must exceed the longest time that ranks may enter a
 * collective apart, as the CPU backend's silence timeout must. */
#define DPT__NCCL_TIMEOUT_MS 60000
void dpt__nccl_comm_set_timeout(struct dpt__nccl_comm *c, int timeout_ms);

/* The caller's stream (a cudaStream_t of the communicator's device; NULL,
 * the default: the legacy default stream): every later collective starts
 * on the communicator's stream only after the work queued on STREAM at
 * its call (an event recorded there and waited for, nothing waits on the
 * host), and is complete when the call returns. */
void dpt__nccl_comm_set_stream(struct dpt__nccl_comm *c, void *stream);

/* Collectives: 0, DPT_EGENERATION (aborted), DPT_EPEERLOST (NCCL reported
 * a remote or network error, or the bound above passed), DPT_ENCCL,
 * DPT_ECUDA; allreduce also DPT_ENOTSUP for a dtype that
 * dpt__nccl_reduce_refusal names and DPT_EINVAL for DPT_AVG of DPT_BOOL
 * (dpt_allreduce refuses both before calling). Broadcast and allgather
 * take every dtype. Buffers may be device memory or host memory (staged
 * through a device buffer that the communicator keeps and grows, a copy
 * each way). SEND may equal RECV; for allgather, in place means
 * SEND == RECV + rank * COUNT elements. After a failure the communicator
 * is aborted and every later call returns DPT_EGENERATION. */
int dpt__nccl_allreduce(struct dpt__nccl_comm *c, const void *send, void *recv,
			size_t count, enum dpt_dtype dtype, enum dpt_op op);
int dpt__nccl_broadcast(struct dpt__nccl_comm *c, void *buf, size_t count,
			enum dpt_dtype dtype, int root);
int dpt__nccl_allgather(struct dpt__nccl_comm *c, const void *send, void *recv,
			size_t count, enum dpt_dtype dtype);

/* Why NCCL cannot allreduce DTYPE (a static string for a log message),
 * or NULL when it can: DPT_INT16 and DPT_UINT16 have no NCCL type. The
 * same answer in builds without NCCL. */
const char *dpt__nccl_reduce_refusal(enum dpt_dtype dtype);

/* Finalize (or, after a failure, abort) and free; accepts NULL; nulls *C.
 * Bounded: the finalize is given 10 s, then aborted; an abort (here or
 * in a failed call) that has not returned after 10 s is left running in
 * its thread, and the communicator's device resources are left alone. */
void dpt__nccl_comm_destroy(struct dpt__nccl_comm **c);

#endif

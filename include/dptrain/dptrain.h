/*
 * libdptrain: ranks, collectives and sharded checkpoints for data-parallel
 * training programs started with `srun --dp-train`. The checkpoint API is
 * in <dptrain/ckpt.h>, the elastic sampler in <dptrain/sampler.h>.
 */
#ifndef DPTRAIN_DPTRAIN_H
#define DPTRAIN_DPTRAIN_H

#include <stddef.h>
#include <stdint.h>

#include <dptrain/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of collectives and checkpointed tensors. The numbers are
 * part of the wire and file formats (and of the Python binding, which
 * passes them through ctypes): append, never renumber. Multi-byte types
 * are little endian in checkpoints. DPT_BOOL is one byte holding 0 or 1
 * (C's bool, torch.bool); the complex types are a real and an imaginary
 * part back to back (C's float complex and double complex). */
enum dpt_dtype {
	DPT_FLOAT32 = 0,
	DPT_FLOAT64 = 1,
	DPT_BFLOAT16 = 2,
	DPT_FLOAT16 = 3,
	DPT_INT32 = 4,
	DPT_INT64 = 5,
	DPT_UINT8 = 6,
	DPT_BOOL = 7,
	DPT_INT8 = 8,
	DPT_INT16 = 9,
	DPT_UINT16 = 10,
	DPT_UINT32 = 11,
	DPT_UINT64 = 12,
	DPT_COMPLEX64 = 13,  /* two float32 */
	DPT_COMPLEX128 = 14, /* two float64 */
};

/* Reduction operations. DPT_AVG is the sum divided by the world size. */
enum dpt_op {
	DPT_SUM = 0,
	DPT_AVG = 1,
};

/*
 * dpt_dtype_size - bytes per element of DTYPE (a complex element counts
 * as one: 8 bytes for DPT_COMPLEX64, 16 for DPT_COMPLEX128).
 * Returns 0 for an unknown dtype.
 */
DPT_EXPORT size_t dpt_dtype_size(enum dpt_dtype dtype);

/*
 * dpt_version - the library's version string ("0.1.0").
 * Returns a static string.
 */
DPT_EXPORT const char *dpt_version(void);

/* ------------------------------------------------------------ the ABI
 *
 * Every public struct that a program hands to the library, or that the
 * library fills for it, travels with its size as the program was compiled:
 * the functions below that take one are static inline wrappers that pass
 * sizeof the struct to an exported *_sized function. Source code calls the
 * plain names and needs no change; a binding that calls the library
 * through its ABI (the Python package) calls the *_sized functions with
 * the size of its own copy of the struct.
 *
 * New fields are only appended to these structs. A size smaller than the
 * library's (a program built against an older header) is accepted: the
 * fields it lacks take their defaults, and an output struct is filled up
 * to its size. A larger size (a program built against a newer header
 * than the library it runs with) or one smaller than the first version
 * of the struct is refused with DPT_EINVAL, and the log names the struct
 * and both sizes. Plain arrays of structs that the library returns
 * (struct dpt_ckpt_entry) and struct dpt_sampler_state have a fixed
 * layout: a new field there means a new struct.
 *
 * Defining DPT_NO_SIZED_WRAPPERS before including the headers declares
 * the plain names as the exported functions they also are (they assume
 * the size of this header's structs), instead of the inline wrappers.
 * libtool's -version-info of libdptrain follows these rules
 * (worker/local.mk).
 */
#ifdef DPT_NO_SIZED_WRAPPERS
#define DPT__SIZED(ret, name, params, call) DPT_EXPORT ret name params;
#else
#define DPT__SIZED(ret, name, params, call)                                    \
	static inline ret name params                                          \
	{                                                                      \
		call;                                                          \
	}
#endif

/* ------------------------------------------------------------ workers */

/*
 * A worker's membership of the job: its link to the coordinator, its rank
 * in the current generation and its communicator. Opaque; one per process
 * is the intended use. Its functions are called from one thread at a
 * time (the library runs its own heartbeat thread internally).
 */
struct dpt_ctx;

/*
 * Options of dpt_init. Fill them with dpt_init_opts_default() first: each
 * field left at its default is read from the environment that
 * `srun --dp-train` sets up, which is what programs should rely on;
 * explicit values are for tests and other launchers.
 */
struct dpt_init_opts {
	const char *coordinator; /* endpoint "tcp://HOST:PORT";
				    default $DPTRAIN_COORDINATOR */
	const char *secret;	 /* the step secret, 64 hex characters;
				    default $DPTRAIN_SECRET when set by
				    hand, else the sealed memfd that srun
				    --dp-train's task has at
				    $DPTRAIN_SECRET_FD (doc/protocol.md);
				    taken once per process, and the
				    variable unset */
	const char *backend;	 /* "auto", "nccl" or "cpu"; default
				    $DPTRAIN_BACKEND, else "auto": NCCL when
				    built with it and a GPU is visible */
	int node;		 /* node index; -1: $SLURM_NODEID, else 0 */
	int local_rank;		 /* rank on the node (picks the GPU);
				    -1: $SLURM_LOCALID, $LOCAL_RANK, else 0 */
	int task_id;		 /* Slurm task id; -1: $SLURM_PROCID, else
				    unknown */
	const char *data_host;	 /* numeric address of the CPU data plane;
				    default $DPTRAIN_DATA_HOST, else the
				    address that routes to the coordinator */
	int connect_timeout_ms;	 /* wait for the coordinator's first word;
				    0: $DPTRAIN_CONNECT_TIMEOUT_MS, else 30000 */
	int timeout_ms;		 /* coordinator silence that means it is lost,
				    until it says its own; 0:
				    $DPTRAIN_TIMEOUT_MS, else 10000 */
	int comm_timeout_ms;	 /* communicator set-up bound; 0:
				    $DPTRAIN_COMM_TIMEOUT_MS, else 60000 */
};

/*
 * dpt_init_opts_default - set every field of OPTS to "take it from the
 * environment" (NULL strings, -1 ranks, 0 timeouts).
 * dpt_init_opts_default_sized: the same for a struct of SIZE bytes; returns
 * 0, or DPT_EINVAL (SIZE unknown to this library: nothing written).
 */
DPT_EXPORT int dpt_init_opts_default_sized(struct dpt_init_opts *opts,
					   size_t size);
DPT__SIZED(void, dpt_init_opts_default, (struct dpt_init_opts * opts),
	   (void)dpt_init_opts_default_sized(opts, sizeof(*opts)))

/*
 * dpt_init - join the job: connect to the coordinator, wait until the
 * first generation is formed, and set up the communicator (NCCL, or the
 * CPU backend). OPTS may be NULL (everything from the environment).
 * Blocks until every worker of the generation has joined.
 *
 * Returns 0 and *CTX (the caller owns it; release it with dpt_finalize),
 * or DPT_ECONFIG (environment or options unusable: the log says which),
 * DPT_ENOTSUP (backend "nccl" without NCCL or GPU), DPT_EAUTH (wrong
 * secret), DPT_ECOORDLOST (coordinator unreachable or lost),
 * DPT_EBUSY (the job already has all its workers), DPT_EINVAL (the size
 * of OPTS is unknown to this library: "the ABI" above), or another error.
 * On error *CTX is NULL.
 */
DPT_EXPORT int dpt_init_sized(struct dpt_ctx **ctx,
			      const struct dpt_init_opts *opts, size_t size);
DPT__SIZED(int, dpt_init,
	   (struct dpt_ctx * *ctx, const struct dpt_init_opts *opts),
	   return dpt_init_sized(ctx, opts, sizeof(*opts)))

/*
 * dpt_rank, dpt_world_size - this worker's rank in the current
 * generation, and the number of ranks in it. Ranks are dense, 0..N-1,
 * ordered by node and local rank. Return -1 for a NULL context.
 */
DPT_EXPORT int dpt_rank(const struct dpt_ctx *ctx);
DPT_EXPORT int dpt_world_size(const struct dpt_ctx *ctx);

/*
 * dpt_local_rank - this worker's rank among the members of the current
 * generation on its node (0..members on the node - 1). Returns -1 for a
 * NULL context.
 */
DPT_EXPORT int dpt_local_rank(const struct dpt_ctx *ctx);

/*
 * dpt_generation - the current generation (1, 2, ...): it grows by one
 * each time the member list changes. Returns 0 for a NULL context.
 */
DPT_EXPORT uint32_t dpt_generation(const struct dpt_ctx *ctx);

/*
 * dpt_backend - the backend of the current generation: "nccl" or "cpu".
 * Returns a static string ("none" for a NULL context).
 */
DPT_EXPORT const char *dpt_backend(const struct dpt_ctx *ctx);

/*
 * dpt_barrier - wait until every member of the generation has called it.
 * Returns 0, DPT_EGENERATION (the generation ended: call dpt_rejoin),
 * DPT_ECOORDLOST, or the error of an earlier failed call.
 */
DPT_EXPORT int dpt_barrier(struct dpt_ctx *ctx);

/*
 * dpt_should_stop - whether the program should stop now: its job's end
 * time is within the grace (srun --dp-grace; doc/walltime.md), or a rank
 * asked for a stop (dpt_request_stop).
 * Collective: every rank of the generation calls it at the same point of
 * the training loop (every step, or every few steps), and *STOP receives
 * the same answer on every rank: 1, save a checkpoint, wait for its
 * commit, dpt_finalize and exit 0 (the job is then requeued and resumes
 * from that checkpoint); 0, go on. Once 1, it stays 1. Costs one round
 * trip to the coordinator. Returns 0 (*STOP is 0 on any error), DPT_EINVAL
 * when STOP is NULL, or as dpt_barrier.
 */
DPT_EXPORT int dpt_should_stop(struct dpt_ctx *ctx, int *stop);

/*
 * dpt_request_stop - ask for the same agreed stop as the walltime's, for
 * every rank of the step (doc/walltime.md, "A stop asked by a rank"):
 * this rank's next vote (dpt_should_stop, dpt_ckpt_step) carries the
 * request, the coordinator answers that vote with the stop on every
 * rank, so all stop at the same step and dpt_ckpt_step saves and commits
 * there; once the step has ended cleanly the job is requeued, as after a
 * walltime stop (srun --dp-requeue). Meant for a signal handler: Slurm's
 * preemption (SIGTERM, then SIGKILL after GraceTime) and `scancel
 * --signal=USR1|TERM`.
 *
 * Async-signal-safe: it only sets a lock-free atomic flag in CTX, which
 * stays set (a request cannot be taken back). It sends nothing and
 * blocks on nothing; the request waits for the next vote, so a program
 * that never votes never stops. CTX may be NULL (nothing is done); it
 * must otherwise be a context from dpt_init that dpt_finalize has not
 * freed: clear the pointer a handler uses, or block the signal, before
 * dpt_finalize.
 */
DPT_EXPORT void dpt_request_stop(struct dpt_ctx *ctx);

/*
 * dpt_log - record N scalars (NAMES[i] = VALUES[i]) of global step STEP in
 * the run's events (doc/checkpoint-format.md, "Events"), where `dptrain
 * plot` and `dptrain status` read them: "loss", "samples_per_s" and any
 * other name of 1 to 31 characters of [A-Za-z0-9_.-], at most 16 per
 * call. Only rank 0's values are recorded; every rank may call it (the
 * others' values are checked and ignored), so a loop need not test its
 * rank. A value that is not finite is recorded as null.
 *
 * Cheap enough for every step: the record is appended to a buffer in
 * the library and a thread of its own sends the buffer to the
 * coordinator every 2 s, after each commit and in dpt_finalize; the
 * calling thread never waits for the network. Records logged after the
 * last commit of a worker that is killed are lost, and so are the
 * oldest when the coordinator does not take them (a warning says so):
 * events are the run's story, not its state. Without a coordinator
 * (outside srun --dp-train) nothing is recorded.
 *
 * Call it from one thread at a time (the training loop's), as the
 * other calls of a context.
 *
 * NAMES and VALUES are the caller's, read during the call only. Returns
 * 0, or DPT_EINVAL (CTX NULL, N 0 or above 16, a bad or repeated name),
 * DPT_ETOOBIG (the record is longer than 255 bytes of text).
 */
DPT_EXPORT int dpt_log(struct dpt_ctx *ctx, uint64_t step, size_t n,
		       const char *const names[], const double values[]);

/*
 * dpt_set_total_steps - declare that the run ends at global step TOTAL:
 * `dptrain status` then draws its progress. Rank 0's call is sent once
 * (one round trip to the coordinator, about a millisecond; a repeated
 * TOTAL sends nothing); other ranks' calls do nothing. Call it after
 * dpt_init, on every start of the run (each run's events say it anew).
 * Returns 0, or DPT_EINVAL (CTX NULL, TOTAL 0).
 */
DPT_EXPORT int dpt_set_total_steps(struct dpt_ctx *ctx, uint64_t total);

/*
 * dpt_set_global_batch - declare that each global step takes BATCH
 * samples in all ranks together: a job that changes size (srun
 * --dp-shapes) is never given a world size that does not divide BATCH.
 * Sent as dpt_set_total_steps is (rank 0, once per value, one round
 * trip); call it on every start of the run. Returns 0, or DPT_EINVAL
 * (CTX NULL, BATCH 0).
 */
DPT_EXPORT int dpt_set_global_batch(struct dpt_ctx *ctx, uint64_t batch);

/*
 * dpt_allreduce - RECV = the sum (DPT_SUM) or the mean (DPT_AVG) of every
 * rank's SEND, element-wise, for COUNT elements of DTYPE. SEND may equal
 * RECV (in place). Buffers are host memory with the CPU backend, device
 * memory with NCCL (host memory is accepted too and staged through a
 * device buffer, a copy each way: for small buffers); the caller owns
 * them. With NCCL, the collective is ordered after the work queued on
 * the caller's stream (dpt_set_cuda_stream) and complete on return.
 *
 * What each dtype means:
 * - floating types: the sum, or the sum divided by the world size; the
 *   16-bit types are added in float32 (CPU backend) and rounded back;
 * - integer types: the sum wraps around in the element type (modulo 2^bits,
 *   as in C's unsigned arithmetic); DPT_AVG is that sum divided by the
 *   world size, truncated toward zero;
 * - complex types: the real and imaginary parts are reduced as the
 *   matching float type (a complex sum, a complex mean);
 * - DPT_BOOL: DPT_SUM is a logical OR (1 where any rank has a nonzero
 *   byte, as PyTorch's all_reduce does on torch.bool); DPT_AVG has no
 *   boolean meaning and is refused with DPT_EINVAL. NCCL computes the
 *   OR as the largest byte, which is 0 or 1 when the inputs are (the CPU
 *   backend gives 1 for any nonzero byte).
 * The NCCL backend has no 16-bit integer type: DPT_INT16 and DPT_UINT16
 * reductions are refused there with DPT_ENOTSUP (broadcast and allgather
 * move them); everything else is as above.
 *
 * Returns 0; DPT_EPEERLOST (a peer vanished: the coordinator is told) or
 * DPT_EGENERATION (the coordinator ended the generation): call
 * dpt_rejoin, then repeat the step; DPT_ECOORDLOST: the job is over for
 * this worker; DPT_EINVAL for bad arguments (the log says which: an
 * unknown dtype or op, DPT_AVG of DPT_BOOL); DPT_ENOTSUP for a reduction
 * that the backend cannot perform (above). The generation goes on after
 * DPT_EINVAL and DPT_ENOTSUP: nothing was sent.
 */
DPT_EXPORT int dpt_allreduce(struct dpt_ctx *ctx, const void *send, void *recv,
			     size_t count, enum dpt_dtype dtype,
			     enum dpt_op op);

/*
 * dpt_set_cuda_stream - the CUDA stream (a cudaStream_t of the rank's
 * device) whose work the NCCL backend's collectives are ordered after:
 * each dpt_allreduce, dpt_broadcast and dpt_allgather starts on the
 * GPU only after the work queued on STREAM before the call (an event
 * recorded on STREAM and waited for by dptrain's own stream; the host
 * does not wait), and the call returns when the result is in RECV, so
 * that work queued on any stream after the call sees it. NULL, the
 * default: the legacy default stream, which comes after the work of
 * every blocking stream of the device (PyTorch's default stream; a
 * program that computes on a stream created with cudaStreamNonBlocking,
 * or on a torch.cuda.Stream, names it here: the Python binding passes
 * torch's current stream of the tensor's device). Kept across
 * generations. No effect with the CPU backend. Returns 0, or DPT_EINVAL
 * (CTX NULL).
 */
DPT_EXPORT int dpt_set_cuda_stream(struct dpt_ctx *ctx, void *stream);

/*
 * dpt_broadcast - copy ROOT's BUF (COUNT elements of DTYPE, any dtype:
 * the bytes are moved as they are) into BUF on every rank. Returns as
 * dpt_allreduce.
 */
DPT_EXPORT int dpt_broadcast(struct dpt_ctx *ctx, void *buf, size_t count,
			     enum dpt_dtype dtype, int root);

/*
 * dpt_allgather - RECV (world size * COUNT elements) receives every
 * rank's SEND (COUNT elements, any dtype: bytes moved as they are) at
 * rank * COUNT. In place when SEND points
 * at RECV + rank * COUNT elements. Returns as dpt_allreduce.
 */
DPT_EXPORT int dpt_allgather(struct dpt_ctx *ctx, const void *send, void *recv,
			     size_t count, enum dpt_dtype dtype);

/*
 * dpt_rejoin - leave the current generation and join the next one, after
 * a call returned DPT_EPEERLOST or DPT_EGENERATION (calling it at any
 * other time ends the generation for everyone). Blocks until the next
 * generation is formed and its communicator is ready; rank, world size
 * and generation may all change. Returns 0, or DPT_ECOORDLOST, DPT_EAUTH,
 * DPT_EPEERLOST (fewer workers are left than the job's minimum: the
 * coordinator gave up), or another error.
 */
DPT_EXPORT int dpt_rejoin(struct dpt_ctx *ctx);

/*
 * dpt_finalize - leave the job cleanly: tell the coordinator, close the
 * communicator and the link, free the context. Accepts NULL; nulls *CTX.
 * Returns 0, or the error that had ended the link earlier (the context is
 * freed all the same).
 */
DPT_EXPORT int dpt_finalize(struct dpt_ctx **ctx);

#ifdef __cplusplus
}
#endif
#endif

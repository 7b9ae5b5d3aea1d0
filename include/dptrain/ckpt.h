/*
 * libdptrain: sharded checkpoints (doc/checkpoint-format.md).
 *
 * Every rank registers the tensors of the training state (host memory, or
 * CUDA device memory when libdptrain is built with CUDA), then saves
 * asynchronously and waits for the commit, or loads the newest committed step
 * on any world size:
 *
 *   struct dpt_ckpt *ck;
 *   dpt_ckpt_new(&ck, ctx, NULL);               // $DPTRAIN_CKPT_URI,
 * $DPTRAIN_RUN dpt_ckpt_register(ck, &(struct dpt_ckpt_tensor){...}); if
 * (dpt_ckpt_load(ck, DPT_CKPT_LATEST, &info) == 0) step = info.step; for (;;) {
 *       train_step();
 *       if (step % 1000 == 0) {
 *           dpt_ckpt_wait(ck);                  // commits the previous save
 *           dpt_ckpt_save(ck, &(struct dpt_ckpt_meta){.step = step, ...});
 *       }
 *   }
 *
 * The functions of a checkpoint object are called from one thread at a
 * time, the one that calls the collectives of its context: saving and
 * loading run collectives (the commit, the choice of the step to load) on
 * the context given to dpt_ckpt_new, in the same order on every rank.
 */
#ifndef DPTRAIN_CKPT_H
#define DPTRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include <dptrain/dptrain.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DPT_CKPT_MAX_DIMS 8
/* dpt_ckpt_load: the newest committed step. */
#define DPT_CKPT_LATEST UINT64_MAX

/* How a tensor is held by the ranks. */
enum dpt_ckpt_kind {
	/* Every rank holds the whole tensor (plain data parallel): it is
	 * written once, split across the ranks. */
	DPT_CKPT_REPLICATED = 0,
	/* Each rank holds a disjoint box of it (optimizer state split across
	 * ranks): each rank writes its box. */
	DPT_CKPT_SHARDED = 1,
};

/* Where a tensor's bytes live (doc/checkpoint-format.md, "Device memory"). */
enum dpt_ckpt_memory {
	/* Host memory, pageable or pinned: copied with memcpy. */
	DPT_CKPT_HOST = 0,
	/* CUDA device memory (cudaMalloc, cudaMallocAsync, PyTorch's
	 * caching allocator: tensor.data_ptr() of a CUDA tensor) or managed
	 * memory, on the device the pointer belongs to; every device
	 * tensor of one checkpoint object on the same device. Only in a
	 * build with CUDA. */
	DPT_CKPT_DEVICE = 1,
};

/* What dpt_ckpt_save does while an earlier save has not been waited for. */
enum dpt_ckpt_busy {
	DPT_CKPT_BUSY_WAIT = 0,	  /* dpt_ckpt_wait() for it first */
	DPT_CKPT_BUSY_REFUSE = 1, /* return DPT_EBUSY, touch nothing */
};

struct dpt_ckpt_opts {
	/* The root of the runs, "file:///path" or "s3://bucket/prefix";
	 * default $DPTRAIN_CKPT_URI. */
	const char *uri;
	/* The run's name, a directory under the root; default $DPTRAIN_RUN;
	 * "" (or unset) uses the root itself. */
	const char *run;
	/* Retention: keep the newest KEEP_LAST committed steps (0: the
	 * default, $DPTRAIN_KEEP, which srun --dp-keep sets, else 3) and
	 * every step that is a multiple of KEEP_EVERY (0: none). */
	int keep_last;
	uint64_t keep_every;
	enum dpt_ckpt_busy busy;
	/* Bytes per checksum block, 4096 to 32 MiB (default 1 MiB). */
	size_t block_size;
	/* Storage tuning (storage/storage.h): 0 for the defaults. */
	size_t part_size;
	int max_inflight;
	/* posix: write shards through the page cache instead of with
	 * O_DIRECT (the default: a checkpoint is not read back soon, and
	 * buffered writes of hundreds of MiB stall in dirty-page throttling;
	 * measured 3 to 20 times slower here). Default: 1 when
	 * $DPTRAIN_CKPT_BUFFERED is "1". */
	int buffered_io;
	/* The CUDA stream (a cudaStream_t) of the training step that writes
	 * the device tensors: dpt_ckpt_save copies them on it, after the
	 * work already queued there; dpt_ckpt_load's copies into them start
	 * after the work queued there when it is called. NULL: the legacy
	 * default stream, which comes after the work of every blocking
	 * stream of the device. dpt_ckpt_set_cuda_stream changes it.
	 * Unused without device tensors. */
	void *cuda_stream;
};

/* Sets every field of OPTS to its default (NULL, 0). The *_sized
 * functions of this header take the size of their struct (<dptrain/
 * dptrain.h>, "the ABI") and return DPT_EINVAL for a size unknown to the
 * library. */
DPT_EXPORT int dpt_ckpt_opts_default_sized(struct dpt_ckpt_opts *opts,
					   size_t size);
DPT__SIZED(void, dpt_ckpt_opts_default, (struct dpt_ckpt_opts * opts),
	   (void)dpt_ckpt_opts_default_sized(opts, sizeof(*opts)))

struct dpt_ckpt;

/*
 * dpt_ckpt_new - a checkpoint object for the run, on the ranks of CTX
 * (NULL: a single process, rank 0 of 1). CTX must outlive it. OPTS may be
 * NULL. Opens the storage (no I/O on S3). Returns 0 and *OUT (released by
 * dpt_ckpt_destroy), DPT_ECONFIG (no URI), DPT_EINVAL, DPT_EAUTH or
 * DPT_ENOMEM.
 */
DPT_EXPORT int dpt_ckpt_new_sized(struct dpt_ckpt **out, struct dpt_ctx *ctx,
				  const struct dpt_ckpt_opts *opts,
				  size_t size);
DPT__SIZED(int, dpt_ckpt_new,
	   (struct dpt_ckpt * *out, struct dpt_ctx *ctx,
	    const struct dpt_ckpt_opts *opts),
	   return dpt_ckpt_new_sized(out, ctx, opts, sizeof(*opts)))

/*
 * dpt_ckpt_destroy - waits for the background writes of a save in flight
 * (without committing it: that needs every rank, in dpt_ckpt_wait), frees
 * the buffers. Nulls *CK; accepts NULL.
 */
DPT_EXPORT void dpt_ckpt_destroy(struct dpt_ckpt **ck);

/*
 * dpt_ckpt_set_cuda_stream - the training's CUDA stream for the next
 * dpt_ckpt_save, dpt_ckpt_step and dpt_ckpt_load calls, as
 * dpt_ckpt_opts.cuda_stream (NULL: the legacy default stream), for a
 * program whose current stream changes (PyTorch's torch.cuda.stream()
 * blocks: the Python binding passes torch's current stream before each
 * save and load). Returns 0, or DPT_EINVAL (CK NULL).
 */
DPT_EXPORT int dpt_ckpt_set_cuda_stream(struct dpt_ckpt *ck, void *stream);

struct dpt_ckpt_tensor {
	const char *name; /* unique; copied */
	enum dpt_dtype dtype;
	enum dpt_ckpt_kind kind;
	int ndim;	       /* 0 (a scalar) to DPT_CKPT_MAX_DIMS */
	const uint64_t *shape; /* the global shape, NDIM extents; copied */
	/* The box this rank holds: OFFSET[d] .. OFFSET[d] + COUNT[d] of the
	 * global tensor, stored row-major (C order) at DATA. NULL for both:
	 * the whole tensor (required for DPT_CKPT_REPLICATED). A sharded
	 * box may be empty (a COUNT of 0). Copied. */
	const uint64_t *offset;
	const uint64_t *count;
	/* Memory owned by the caller, read by dpt_ckpt_save (during the
	 * call only: every copy is complete when it returns) and written by
	 * dpt_ckpt_load; it must stay valid while the object lives. */
	void *data;
	/* Where DATA is: DPT_CKPT_HOST (0, the default) or
	 * DPT_CKPT_DEVICE. */
	enum dpt_ckpt_memory memory;
};

/*
 * dpt_ckpt_register - add a tensor to the state. Every rank registers the
 * same tensors (names, dtypes, shapes, kinds) in the same order; sharded
 * boxes of all ranks must be disjoint and cover the tensor. Not while a
 * save is in flight (DPT_EBUSY). A device tensor's pointer is checked
 * with CUDA (cudaPointerGetAttributes). Returns 0, DPT_EINVAL (bad shape,
 * box, dtype, memory; a name registered twice; DPT_CKPT_DEVICE for a
 * pointer that is not device memory, or on another device than the
 * device tensors registered before), DPT_ENOTSUP (DPT_CKPT_DEVICE in a
 * build without CUDA), DPT_ECUDA (DPT_CKPT_DEVICE and no usable CUDA
 * device) or DPT_ENOMEM. On error nothing is registered; the message
 * names the tensor.
 */
DPT_EXPORT int dpt_ckpt_register_sized(struct dpt_ckpt *ck,
				       const struct dpt_ckpt_tensor *t,
				       size_t size);
DPT__SIZED(int, dpt_ckpt_register,
	   (struct dpt_ckpt * ck, const struct dpt_ckpt_tensor *t),
	   return dpt_ckpt_register_sized(ck, t, sizeof(*t)))

/*
 * dpt_ckpt_clear - forget every registered tensor, for example after
 * dpt_rejoin gave a new world size and the boxes of the sharded tensors
 * change: register them again. The snapshot buffers are kept. Returns 0
 * or DPT_EBUSY (a save is in flight: dpt_ckpt_wait first).
 */
DPT_EXPORT int dpt_ckpt_clear(struct dpt_ckpt *ck);

/*
 * dpt_ckpt_prepare - allocate and map the snapshot buffers of this rank
 * (and, on S3, the part buffers of its uploads) now, after the
 * registrations, rather than in the first dpt_ckpt_save:
 * mapping hundreds of MiB takes seconds on some machines, better spent at
 * start-up than as a stall of training; with device tensors registered,
 * the buffers are also pinned (cudaHostRegister) here. Optional; call it
 * again after a change of world size. Returns 0, DPT_EBUSY (a save is in
 * flight) or DPT_ENOMEM.
 */
DPT_EXPORT int dpt_ckpt_prepare(struct dpt_ckpt *ck);

/* What is saved with the tensors. The blobs are copied (those of rank 0
 * are the ones kept). */
struct dpt_ckpt_meta {
	uint64_t step;
	uint64_t sample_cursor; /* global: samples consumed by all ranks */
	const void *rng;	/* RNG state, RNG_LEN bytes (may be NULL) */
	size_t rng_len;
	const void *user; /* anything, USER_LEN bytes (may be NULL) */
	size_t user_len;
};

/*
 * dpt_ckpt_save - start saving META->step: copies the bytes this rank
 * writes into host buffers allocated on the first save and reused (the
 * only time training stalls; device tensors are copied on OPTS->cuda_stream
 * into pinned buffers while the host tensors are copied, and the copies
 * are complete when it returns), then returns while a background thread
 * checksums and writes the shard file. The step is committed by
 * dpt_ckpt_wait. Every rank calls it with the same step.
 *
 * With a save not yet waited for: policy DPT_CKPT_BUSY_WAIT waits for it
 * (and returns its error, if it failed, without starting this one);
 * DPT_CKPT_BUSY_REFUSE returns DPT_EBUSY. Returns 0, DPT_EINVAL (nothing
 * registered), or DPT_ENOMEM / DPT_ESYS / DPT_ECUDA (no memory for the
 * snapshot, no thread, a failed device copy): the save then stays pending as
 * failed, so that this rank still meets the others in the commit: call
 * dpt_ckpt_wait on every rank as usual, it returns the error and nothing is
 * committed. That a step is already committed (a committed step is never
 * overwritten) is found by the background thread and returned by dpt_ckpt_wait
 * as DPT_EEXIST.
 */
DPT_EXPORT int dpt_ckpt_save_sized(struct dpt_ckpt *ck,
				   const struct dpt_ckpt_meta *meta,
				   size_t size);
DPT__SIZED(int, dpt_ckpt_save,
	   (struct dpt_ckpt * ck, const struct dpt_ckpt_meta *meta),
	   return dpt_ckpt_save_sized(ck, meta, sizeof(*meta)))

/*
 * dpt_ckpt_wait - wait until this rank's shard is durable, then commit
 * the step with every rank (collectives: call it on every rank): rank 0
 * writes the manifest once every rank's part is durable, then starts
 * retention (keep_last, keep_every) in a background thread that the next
 * dpt_ckpt_wait, dpt_ckpt_load and dpt_ckpt_destroy wait for. Returns 0
 * when the step is committed (or no save was in flight); otherwise the
 * step is not committed, the previous committed step stays the newest,
 * and the error is this rank's (DPT_ENOSPC,
 * DPT_EIO, ...), DPT_EIO when another rank failed, or the collective's
 * (DPT_EPEERLOST: a rank died).
 */
DPT_EXPORT int dpt_ckpt_wait(struct dpt_ckpt *ck);

/*
 * dpt_ckpt_step - the end of training step META->step, on every rank:
 * saves when a checkpoint is due and says whether to stop (the walltime,
 * dptrain(8)). One vote through the coordinator, then:
 * - the commit of the save in flight, if there is one and every rank's
 *   shard is written (so a periodic checkpoint is committed a step or so
 *   after its writes end, and this never waits for a writer);
 * - a save of META (asynchronous, as dpt_ckpt_save; the previous one is
 *   committed first) when the coordinator says a periodic checkpoint is
 *   due (srun --dp-ckpt-every=DURATION, counted by the coordinator; or
 *   auto, below), when META->step is a multiple of N
 *   (--dp-ckpt-every=Nsteps, from $DPTRAIN_CKPT_EVERY), or when the step
 *   must stop;
 * - when the step must stop: dpt_ckpt_wait, and *STOP = 1: the program
 *   calls dpt_ckpt_destroy and dpt_finalize and exits 0 (the job is
 *   requeued and resumes from this step).
 * *SAVED (SAVED may be NULL) is 1 when this call saved META->step: a
 * program that ends its training at this step then only calls
 * dpt_ckpt_wait, not dpt_ckpt_save again. Every rank gets the same answers, so
 * all save the same steps.
 *
 * --dp-ckpt-every=auto ($DPTRAIN_CKPT_EVERY=auto): rank 0 asks for the
 * save in its vote once sqrt(2 C M) seconds have passed since its last
 * save started and no save is pending; C is the cost of a save to the
 * training measured by this library (the stall of dpt_ckpt_save plus the
 * blocking part of the commit in dpt_ckpt_wait, averaged over the saves
 * with weight 1/2 on the newest), M the job's mean time between failures
 * ($DPTRAIN_MTBF, seconds; default 30 days); at most min(30 minutes, M),
 * at least $DPTRAIN_MIN_CKPT_INTERVAL; before any save is measured, the
 * cap. The coordinator's own 30-minute SAVE still applies.
 *
 * A periodic save that fails on any rank (a full disk, a snapshot without
 * memory) is given up by every rank at the commit that follows: rank 0
 * logs a warning once ("checkpoint of step N failed ...: CAUSE; the last
 * committed step M is intact; training goes on ..."), the step is not an
 * error and the next due save tries again. Returns 0,
 * DPT_EINVAL, the vote's error (as dpt_barrier; also from a commit), or
 * the error of the save of a stop (*STOP is 1 all the same: the program
 * exits with the error, its step is not committed).
 */
DPT_EXPORT int dpt_ckpt_step_sized(struct dpt_ckpt *ck,
				   const struct dpt_ckpt_meta *meta,
				   size_t size, int *stop, int *saved);
DPT__SIZED(int, dpt_ckpt_step,
	   (struct dpt_ckpt * ck, const struct dpt_ckpt_meta *meta, int *stop,
	    int *saved),
	   return dpt_ckpt_step_sized(ck, meta, sizeof(*meta), stop, saved))

/* What dpt_ckpt_poll says is due (bits of *DUE). */
#define DPT_CKPT_DUE_SAVE 0x1u /* save this step now */
#define DPT_CKPT_DUE_STOP 0x2u /* save it, wait for the commit, stop */

/*
 * dpt_ckpt_poll - the decision half of dpt_ckpt_step, for callers that
 * build what they save only when a save is due (the Python binding's
 * state dicts): one vote through the coordinator, then the commit of the
 * save in flight when every rank's shard is written, then *DUE (0 or
 * DPT_CKPT_DUE_* bits) says whether this step must be saved (a periodic
 * checkpoint, as in dpt_ckpt_step, auto included; --dp-ckpt-every=Nsteps when
 * STEP is a multiple of N, the stop) and whether the program must stop after
 * that save has been waited for. Every rank gets the same *DUE. A save in
 * flight is committed when every writer is done, or now when a save is due
 * (DPT_CKPT_BUSY_WAIT); one that failed is given up by every rank with
 * rank 0's warning, as in dpt_ckpt_step, and is not an error. Returns 0,
 * DPT_EINVAL, or the error of a collective (the vote, the commit's:
 * DPT_EPEERLOST, ...).
 */
DPT_EXPORT int dpt_ckpt_poll(struct dpt_ckpt *ck, uint64_t step, unsigned *due);

/*
 * dpt_ckpt_step_error - what dpt_ckpt_step makes of RC, the error of the
 * save of a step whose dpt_ckpt_poll said DUE, for callers that save
 * between dpt_ckpt_poll and dpt_ckpt_save themselves (the Python
 * binding's Checkpoint.step): the same rule in one place. Returns 0 when
 * RC is 0 or when the failed save stays pending as failed (a periodic
 * save whose snapshot failed on this rank, DPT_ENOMEM, DPT_ESYS,
 * DPT_ECUDA: every rank gives it up at the next commit, rank 0 warns, and
 * training goes on, as dpt_ckpt_step does); else RC, the step's error:
 * the save of a stop (DPT_CKPT_DUE_STOP in DUE) must succeed, and a save
 * that left nothing pending (DPT_EINVAL: nothing registered; DPT_EBUSY;
 * an error before dpt_ckpt_save started) is an error of the program. CK
 * is only read; a NULL CK returns RC.
 */
DPT_EXPORT int dpt_ckpt_step_error(const struct dpt_ckpt *ck, unsigned due,
				   int rc);

/* One tensor of a committed step (dpt_ckpt_inspect). An element of an
 * array: its layout is fixed, unlike the other structs' (<dptrain/
 * dptrain.h>, "the ABI"). */
struct dpt_ckpt_entry {
	const char *name;
	enum dpt_dtype dtype;
	int ndim;
	const uint64_t *shape; /* the global shape, NDIM extents */
};

/* What a committed step holds. Pointers are owned by the checkpoint
 * object and valid until the next dpt_ckpt_inspect or dpt_ckpt_destroy. */
struct dpt_ckpt_contents {
	uint64_t step;
	uint64_t sample_cursor;
	uint32_t world_size; /* the world size the step was written with */
	size_t ntensors;
	const struct dpt_ckpt_entry *tensors;
	const void *rng;
	size_t rng_len;
	const void *user;
	size_t user_len;
	/* The bytes of the step's shard files as the storage reports their
	 * sizes (a file of the manifest that the storage lacks counts 0): a
	 * bound on the bytes of its tensors, whose shapes come from a
	 * manifest that may be another user's (a shared checkpoint root).
	 * Allocate no more than this from the shapes above. */
	uint64_t stored_bytes;
};

/*
 * dpt_ckpt_inspect - what the newest committed step at or below STEP
 * (DPT_CKPT_LATEST: the newest) holds, read from its manifest without
 * reading a shard: the tensors' names, dtypes and global shapes and the
 * blobs of its meta, so that a program can allocate and register what it
 * loads (state created lazily, like an optimizer's) or say exactly how
 * its own state differs, and the bytes its shards hold (one listing of
 * the step), which bound what it may allocate. A step whose manifest is
 * damaged is skipped for the one before. Collective: rank 0 reads, every
 * rank receives the same answer. Returns 0, DPT_ENOENT (no committed
 * step), DPT_EINVAL, or the storage's or the collective's error.
 */
DPT_EXPORT int dpt_ckpt_inspect_sized(struct dpt_ckpt *ck, uint64_t step,
				      struct dpt_ckpt_contents *out,
				      size_t size);
DPT__SIZED(int, dpt_ckpt_inspect,
	   (struct dpt_ckpt * ck, uint64_t step, struct dpt_ckpt_contents *out),
	   return dpt_ckpt_inspect_sized(ck, step, out, sizeof(*out)))

/* What dpt_ckpt_load found. Pointers are owned by the checkpoint object
 * and valid until the next load or its destruction. */
struct dpt_ckpt_info {
	uint64_t step;
	uint64_t sample_cursor;
	uint32_t world_size; /* the world size the step was written with */
	const void *rng;
	size_t rng_len;
	const void *user;
	size_t user_len;
};

/*
 * dpt_ckpt_load - fill every registered tensor (this rank's box) from the
 * committed step STEP (or, if it is not committed, the newest below it),
 * or the newest (DPT_CKPT_LATEST); every rank calls it. The world size
 * may differ from the one that wrote it. Each rank reads only the byte
 * ranges its boxes need (rounded to checksum blocks) and verifies their
 * checksums. A damaged or missing shard is logged, naming the shard, the
 * chunk and the step, and the previous committed step is used (for every
 * rank). Once a step has loaded, rank 0 quarantines the newer steps that
 * every failing rank found damaged (a checksum or manifest mismatch, not
 * an I/O error or a missing shard): they stop counting as committed, so
 * that saves of their step numbers commit again
 * (doc/checkpoint-format.md, "Damaged steps"). Device tensors are filled by
 * copies from pinned staging buffers that are complete when it returns; no work
 * on the device may use them meanwhile. INFO may be NULL. A run without any
 * committed step (its first start, or a mistyped path or run name) is said once
 * by rank 0 at the default log level, "no checkpoint at 'URI': starting run
 * 'RUN' from step 0" (dpt_ckpt_inspect says it too). Returns 0, DPT_ENOENT (no
 * committed step, at or below STEP), DPT_EAUTH (the storage refused the
 * credentials, for the listing or a read: logged with the storage's answer and
 * what to fix; older steps are not tried), DPT_EMISMATCH (a registered tensor
 * is not in the step, or with another dtype or shape: logged with both; older
 * steps are not tried, a mismatch is not damage), or the error of the newest
 * step tried when none was usable (DPT_ECORRUPT, DPT_ECUDA: a copy to a device
 * tensor failed),
 * DPT_EBUSY (a save is in flight: dpt_ckpt_wait first) or a collective's
 * error. On error the tensors may hold parts of any step tried.
 */
DPT_EXPORT int dpt_ckpt_load_sized(struct dpt_ckpt *ck, uint64_t step,
				   struct dpt_ckpt_info *info, size_t size);
DPT__SIZED(int, dpt_ckpt_load,
	   (struct dpt_ckpt * ck, uint64_t step, struct dpt_ckpt_info *info),
	   return dpt_ckpt_load_sized(ck, step, info, sizeof(*info)))

/* Counters of this rank, for benchmarks and logs. */
struct dpt_ckpt_stats {
	uint64_t saves, loads;
	uint64_t bytes_written; /* shard bytes of the last save */
	uint64_t stall_ns;	/* time in dpt_ckpt_save of the last save */
	uint64_t bytes_needed;	/* bytes the last load had to fill */
	uint64_t bytes_read;	/* bytes the last load read */
};

/* Copies the counters into *OUT (SIZE bytes of it). Returns 0 or
 * DPT_EINVAL (the size is unknown: nothing is written). */
DPT_EXPORT int dpt_ckpt_stats_sized(const struct dpt_ckpt *ck,
				    struct dpt_ckpt_stats *out, size_t size);
DPT__SIZED(void, dpt_ckpt_stats,
	   (const struct dpt_ckpt *ck, struct dpt_ckpt_stats *out),
	   (void)dpt_ckpt_stats_sized(ck, out, sizeof(*out)))

#ifdef __cplusplus
}
#endif
#endif

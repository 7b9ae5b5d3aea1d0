/*
 * The elastic sampler: which samples of the dataset each rank trains on at
 * each global step, the same for every world size and across restarts
 * (doc/sampler.md defines the sequence bit for bit).
 *
 * Every epoch has one seeded permutation of the dataset's indices 0..N-1.
 * Global step S of an epoch consumes its samples S * B .. S * B + B - 1
 * (B: the global batch); rank R of W takes the R-th of W equal contiguous
 * blocks of them (B / W indices: W must divide B). The last incomplete
 * global batch of an epoch is dropped; the step after the last full one
 * starts the next epoch, with the next permutation.
 *
 * A sampler is used from one thread at a time. The functions need no
 * dptrain context: the caller tells the sampler its rank and world size
 * (dpt_rank, dpt_world_size), again after each change of generation.
 */
#ifndef DPTRAIN_SAMPLER_H
#define DPTRAIN_SAMPLER_H

#include <stdint.h>

#include <dptrain/error.h>

#ifdef __cplusplus
extern "C" {
#endif

struct dpt_sampler;

/*
 * dpt_sampler_permutation - the definition of the sequence: writes the
 * permutation of 0..N-1 of EPOCH for SEED into OUT (N entries, the
 * caller's): a Fisher-Yates shuffle driven by splitmix64 (doc/sampler.md),
 * or the identity when SHUFFLE is 0. Stateless.
 * Returns 0, or DPT_EINVAL when OUT is NULL and N is not 0.
 */
DPT_EXPORT int dpt_sampler_permutation(uint64_t seed, uint64_t epoch,
				       uint64_t n, int shuffle, uint64_t *out);

/*
 * dpt_sampler_new - a sampler of a dataset of DATASET_LEN samples, global
 * batches of GLOBAL_BATCH samples, permutations of SEED (SHUFFLE 0: the
 * identity every epoch), at the start of epoch 0, as rank 0 of 1.
 * Returns 0 and *OUT (the caller owns it: dpt_sampler_destroy), or
 * DPT_EINVAL (OUT NULL, GLOBAL_BATCH 0, or a dataset smaller than one
 * global batch: the log says which), or DPT_ENOMEM (the permutation of a
 * shuffled sampler takes 8 bytes per sample). On error *OUT is NULL.
 */
DPT_EXPORT int dpt_sampler_new(struct dpt_sampler **out, uint64_t dataset_len,
			       uint64_t global_batch, uint64_t seed,
			       int shuffle);

/* dpt_sampler_destroy - free *S and null it; accepts NULL and a NULL *S. */
DPT_EXPORT void dpt_sampler_destroy(struct dpt_sampler **s);

/*
 * dpt_sampler_set_world - this process is rank RANK of WORLD_SIZE: the
 * following dpt_sampler_next calls return its share of each global batch.
 * The position in the sequence does not change.
 * Returns 0, or DPT_EINVAL (and nothing changes) when WORLD_SIZE does not
 * divide the global batch (the log names both numbers), WORLD_SIZE < 1,
 * or RANK is outside 0..WORLD_SIZE-1.
 */
DPT_EXPORT int dpt_sampler_set_world(struct dpt_sampler *s, int rank,
				     int world_size);

/* dpt_sampler_steps_per_epoch - global steps per epoch:
 * floor(dataset_len / global_batch) (at least 1). 0 for a NULL S. */
DPT_EXPORT uint64_t dpt_sampler_steps_per_epoch(const struct dpt_sampler *s);

/*
 * dpt_sampler_next - this rank's share of the next global step: writes
 * global_batch / world_size dataset indices into INDICES (the caller's).
 * At the end of an epoch (cursor = steps per epoch * global batch) it
 * first moves to the start of the next epoch. Advances the cursor by one
 * global batch (every rank's share: all ranks call it once per step).
 * Returns 0, or DPT_EINVAL for a NULL argument.
 */
DPT_EXPORT int dpt_sampler_next(struct dpt_sampler *s, uint64_t *indices);

/* Where a sampler is in its sequence: what a checkpoint saves. */
struct dpt_sampler_state {
	uint64_t seed;	 /* the permutations' seed */
	uint64_t epoch;	 /* the current epoch */
	uint64_t cursor; /* samples of the epoch consumed globally, a
			    multiple of global_batch, at most steps per
			    epoch * global_batch (the epoch's end) */
};

/* dpt_sampler_get_state - the sampler's state into *ST. */
DPT_EXPORT void dpt_sampler_get_state(const struct dpt_sampler *s,
				      struct dpt_sampler_state *st);

/*
 * dpt_sampler_set_state - continue from *ST (saved by get_state, on any
 * world size): its seed replaces the sampler's, its epoch and cursor are
 * the position. Returns 0, or DPT_EINVAL (the log says why; nothing
 * changes) when the cursor is not a multiple of the global batch or lies
 * beyond the epoch's last full batch.
 */
DPT_EXPORT int dpt_sampler_set_state(struct dpt_sampler *s,
				     const struct dpt_sampler_state *st);

/*
 * dpt_sampler_set_epoch - move to EPOCH: the current epoch leaves the
 * position as it is (a resumed run may call it at every epoch's start,
 * as with torch's DistributedSampler); another epoch moves to its start.
 * Returns 0, or DPT_EINVAL for a NULL S.
 */
DPT_EXPORT int dpt_sampler_set_epoch(struct dpt_sampler *s, uint64_t epoch);

/*
 * dpt_sampler_sample_cursor - the samples consumed by all ranks together
 * since the start of epoch 0: epoch * steps per epoch * global batch +
 * cursor, the manifest's sample_cursor (dpt_ckpt_save). 0 for a NULL S.
 */
DPT_EXPORT uint64_t dpt_sampler_sample_cursor(const struct dpt_sampler *s);

#ifdef __cplusplus
}
#endif
#endif

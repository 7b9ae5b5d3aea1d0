/*
 * The sampler's random stream (doc/sampler.md, "The permutation"), for
 * its unit test: the parts of the definition that the permutations of
 * any dataset that fits in memory cannot reach (the rejection of a
 * bounded draw happens with probability bound / 2^64).
 */
#ifndef DPT_WORKER_SAMPLER_INT_H
#define DPT_WORKER_SAMPLER_INT_H

#include <stdint.h>

/* The splitmix64 state that starts the stream of (SEED, EPOCH). */
uint64_t dpt__sampler_stream(uint64_t seed, uint64_t epoch);

/* A uniform draw in [0, BOUND), BOUND >= 1, from *STATE (advanced). */
uint64_t dpt__sampler_bounded(uint64_t *state, uint64_t bound);

#endif

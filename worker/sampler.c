/*
 * The elastic sampler (include/dptrain/sampler.h). doc/sampler.md defines
 * the sequence; the Python ElasticSampler calls these functions through
 * ctypes, so the definition below is the one both languages share.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>

#include <dptrain/sampler.h>

#include "log.h"
#include "sampler_int.h"

struct dpt_sampler {
	uint64_t len;	/* samples in the dataset */
	uint64_t batch; /* global batch */
	uint64_t steps; /* full global batches per epoch */
	uint64_t seed;
	uint64_t epoch;
	uint64_t cursor; /* samples of the epoch consumed, globally */
	int shuffle;
	int rank, world;
	uint64_t *perm;	    /* the permutation of PERM_EPOCH (shuffled only) */
	uint64_t perm_seed; /* ...for this seed */
	uint64_t perm_epoch;
	int perm_valid;
};

/* splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
 * generators", 2014): the increment and its output function. */
#define GAMMA 0x9e3779b97f4a7c15ull

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t next64(uint64_t *state)
{
	*state += GAMMA;
	return mix64(*state);
}

/*
 * A uniform integer in [0, BOUND), BOUND >= 1, without bias: Lemire's
 * multiply-and-reject ("Fast random integer generation in an interval",
 * 2019). The high half of X * BOUND is the draw; products whose low half
 * falls below 2^64 mod BOUND are the excess that makes a plain multiply
 * biased, and are drawn again.
 */
uint64_t dpt__sampler_bounded(uint64_t *state, uint64_t bound)
{
	unsigned __int128 m = (unsigned __int128)next64(state) * bound;
	uint64_t low = (uint64_t)m;

	if (low < bound) {
		uint64_t threshold = -bound % bound; /* 2^64 mod bound */
		while (low < threshold) {
			m = (unsigned __int128)next64(state) * bound;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

/* One stream per (seed, epoch). Mixing the epoch before the XOR keeps
 * epoch 0 away from a zero input and neighbouring epochs' starting
 * states far apart. */
uint64_t dpt__sampler_stream(uint64_t seed, uint64_t epoch)
{
	return mix64(seed ^ mix64(epoch + GAMMA));
}

int dpt_sampler_permutation(uint64_t seed, uint64_t epoch, uint64_t n,
			    int shuffle, uint64_t *out)
{
	uint64_t state;

	if (n && !out)
		return DPT_EINVAL;
	for (uint64_t i = 0; i < n; i++)
		out[i] = i;
	if (!shuffle || n < 2)
		return 0;
	state = dpt__sampler_stream(seed, epoch);
	/* Fisher-Yates as Durstenfeld wrote it: the last place first. */
	for (uint64_t i = n - 1; i > 0; i--) {
		uint64_t j = dpt__sampler_bounded(&state, i + 1), t = out[i];
		out[i] = out[j];
		out[j] = t;
	}
	return 0;
}

int dpt_sampler_new(struct dpt_sampler **out, uint64_t dataset_len,
		    uint64_t global_batch, uint64_t seed, int shuffle)
{
	struct dpt_sampler *s = NULL;
	int rc = DPT_EINVAL;

	if (!out)
		return DPT_EINVAL;
	*out = NULL;
	if (global_batch == 0) {
		dpt__error("sampler: the global batch is 0: give the number of "
			   "samples of one step of all ranks together");
		goto out;
	}
	if (dataset_len < global_batch) {
		dpt__error("sampler: the dataset's %" PRIu64
			   " samples are fewer "
			   "than one global batch of %" PRIu64
			   ": no full batch, no step",
			   dataset_len, global_batch);
		goto out;
	}
	rc = DPT_ENOMEM;
	s = calloc(1, sizeof(*s));
	if (!s)
		goto out;
	*s = (struct dpt_sampler){
		.len = dataset_len,
		.batch = global_batch,
		.steps = dataset_len / global_batch,
		.seed = seed,
		.shuffle = shuffle != 0,
		.world = 1,
	};
	if (s->shuffle) {
		if (dataset_len > SIZE_MAX / sizeof(uint64_t)) {
			dpt__error("sampler: a permutation of %" PRIu64
				   " samples does not fit in memory",
				   dataset_len);
			goto out;
		}
		s->perm = malloc((size_t)dataset_len * sizeof(uint64_t));
		if (!s->perm) {
			dpt__error(
				"sampler: cannot allocate the permutation of "
				"%" PRIu64 " samples (%" PRIu64 " bytes)",
				dataset_len, dataset_len * 8);
			goto out;
		}
	}
	*out = s;
	s = NULL;
	rc = 0;
out:
	dpt_sampler_destroy(&s);
	return rc;
}

void dpt_sampler_destroy(struct dpt_sampler **sp)
{
	if (!sp || !*sp)
		return;
	free((*sp)->perm);
	free(*sp);
	*sp = NULL;
}

int dpt_sampler_set_world(struct dpt_sampler *s, int rank, int world_size)
{
	if (!s)
		return DPT_EINVAL;
	if (world_size < 1 || rank < 0 || rank >= world_size) {
		dpt__error("sampler: rank %d of a world of %d ranks does not "
			   "exist",
			   rank, world_size);
		return DPT_EINVAL;
	}
	if (s->batch % (uint64_t)world_size) {
		dpt__error("sampler: the global batch %" PRIu64
			   " is not a multiple of the world size %d: every "
			   "rank takes an equal share, so pick a global batch "
			   "that %d divides (or another world size)",
			   s->batch, world_size, world_size);
		return DPT_EINVAL;
	}
	s->rank = rank;
	s->world = world_size;
	return 0;
}

uint64_t dpt_sampler_steps_per_epoch(const struct dpt_sampler *s)
{
	return s ? s->steps : 0;
}

int dpt_sampler_next(struct dpt_sampler *s, uint64_t *indices)
{
	uint64_t share, first;

	if (!s || !indices)
		return DPT_EINVAL;
	if (s->cursor >= s->steps * s->batch) {
		s->epoch++;
		s->cursor = 0;
	}
	share = s->batch / (uint64_t)s->world;
	first = s->cursor + (uint64_t)s->rank * share;
	if (s->shuffle && (!s->perm_valid || s->perm_epoch != s->epoch ||
			   s->perm_seed != s->seed)) {
		dpt_sampler_permutation(s->seed, s->epoch, s->len, 1, s->perm);
		s->perm_seed = s->seed;
		s->perm_epoch = s->epoch;
		s->perm_valid = 1;
	}
	for (uint64_t i = 0; i < share; i++)
		indices[i] = s->shuffle ? s->perm[first + i] : first + i;
	s->cursor += s->batch;
	return 0;
}

void dpt_sampler_get_state(const struct dpt_sampler *s,
			   struct dpt_sampler_state *st)
{
	if (!s || !st)
		return;
	*st = (struct dpt_sampler_state){
		.seed = s->seed, .epoch = s->epoch, .cursor = s->cursor};
}

int dpt_sampler_set_state(struct dpt_sampler *s,
			  const struct dpt_sampler_state *st)
{
	if (!s || !st)
		return DPT_EINVAL;
	if (st->cursor % s->batch) {
		dpt__error("sampler: cursor %" PRIu64
			   " is not a multiple of the global batch %" PRIu64
			   ": the state was saved with another global batch",
			   st->cursor, s->batch);
		return DPT_EINVAL;
	}
	if (st->cursor > s->steps * s->batch) {
		dpt__error("sampler: cursor %" PRIu64
			   " lies beyond the epoch's %" PRIu64
			   " samples in full batches: the state was saved "
			   "with another dataset or global batch",
			   st->cursor, s->steps * s->batch);
		return DPT_EINVAL;
	}
	s->seed = st->seed;
	s->epoch = st->epoch;
	s->cursor = st->cursor;
	return 0;
}

int dpt_sampler_set_epoch(struct dpt_sampler *s, uint64_t epoch)
{
	if (!s)
		return DPT_EINVAL;
	if (epoch != s->epoch) {
		s->epoch = epoch;
		s->cursor = 0;
	}
	return 0;
}

uint64_t dpt_sampler_sample_cursor(const struct dpt_sampler *s)
{
	return s ? s->epoch * s->steps * s->batch + s->cursor : 0;
}

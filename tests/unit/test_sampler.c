/*
 * The elastic sampler (include/dptrain/sampler.h, doc/sampler.md): the
 * sequence against known answers computed by an independent
 * implementation of doc/sampler.md (the Python listing there), the
 * permutations' validity, the same samples per global step on every world
 * size, resume from a saved state, epochs, and the errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dptrain/sampler.h>

#include "log.h"
#include "worker/sampler_int.h"

static char last_log[512];

static void capture(enum dpt__log_level level, const char *msg)
{
	(void)level;
	snprintf(last_log, sizeof(last_log), "%s", msg);
}

static uint64_t *perm_of(uint64_t seed, uint64_t epoch, uint64_t n)
{
	uint64_t *p = malloc((n ? n : 1) * sizeof(*p));

	assert_non_null(p);
	assert_int_equal(dpt_sampler_permutation(seed, epoch, n, 1, p), 0);
	return p;
}

static void check_prefix(uint64_t seed, uint64_t epoch, uint64_t n,
			 const uint64_t *want, size_t nwant)
{
	uint64_t *p = perm_of(seed, epoch, n);

	for (size_t i = 0; i < nwant; i++)
		if (p[i] != want[i])
			fail_msg("seed %llu epoch %llu n %llu: entry %zu is "
				 "%llu, want %llu",
				 (unsigned long long)seed,
				 (unsigned long long)epoch,
				 (unsigned long long)n, i,
				 (unsigned long long)p[i],
				 (unsigned long long)want[i]);
	free(p);
}

/* The vectors of doc/sampler.md, "Known answers". */
static void known_answers(void **state)
{
	uint64_t *p;
	(void)state;

	check_prefix(0, 0, 10, (uint64_t[]){1, 4, 5, 0, 7, 6, 9, 8, 2, 3}, 10);
	check_prefix(7, 0, 20,
		     (uint64_t[]){4, 13, 16, 15, 19, 7, 5, 0, 18, 14, 6, 8, 3,
				  17, 2, 11},
		     16);
	check_prefix(7, 1, 20,
		     (uint64_t[]){19, 16, 11, 12, 10, 13, 18, 3, 14, 2, 0, 4, 1,
				  17, 7, 5},
		     16);
	check_prefix(42, 3, 1000,
		     (uint64_t[]){262, 732, 424, 483, 274, 861, 952, 485, 631,
				  876, 751, 670, 814, 363, 151, 708},
		     16);
	check_prefix(0xdeadbeef, 0, 5, (uint64_t[]){2, 4, 0, 1, 3}, 5);
	check_prefix(1, 2, 2, (uint64_t[]){1, 0}, 2);
	p = perm_of(2026, 5, 100000);
	assert_memory_equal(p,
			    ((uint64_t[]){99149, 93148, 33209, 74, 78996, 68814,
					  78632, 35151}),
			    8 * sizeof(uint64_t));
	assert_memory_equal(p + 100000 - 4,
			    ((uint64_t[]){66641, 99414, 41367, 88180}),
			    4 * sizeof(uint64_t));
	free(p);
}

/* The stream and the bounded draw, rejection included: with a bound of
 * 2^63 + 1 nearly half the draws are rejected (8 draws take 15 steps),
 * which no permutation of a dataset in memory would ever exercise. */
static void stream_known_answers(void **state)
{
	static const uint64_t big[] = {
		5313783761930159449ull, 832860599877902977ull,
		6750031320341670196ull, 1623516025674929553ull,
		2677950643558589039ull, 2043029493203810240ull,
		170783684158985637ull,	981551369437037073ull};
	static const uint64_t ten[] = {4, 6, 5, 0, 7, 1, 7, 2};
	uint64_t s;
	(void)state;

	assert_int_equal(dpt__sampler_stream(0, 0), 0x48218226ff3cd4bfull);
	assert_int_equal(dpt__sampler_stream(7, 1), 0xb3f2e391ee2ab8a6ull);
	s = dpt__sampler_stream(7, 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(dpt__sampler_bounded(&s, (1ull << 63) + 1),
				 big[i]);
	assert_int_equal(s, 0x488a020a0aeca8eaull);
	assert_int_equal(s - dpt__sampler_stream(7, 0),
			 15 * 0x9e3779b97f4a7c15ull);
	s = dpt__sampler_stream(7, 0);
	for (int i = 0; i < 8; i++)
		assert_int_equal(dpt__sampler_bounded(&s, 10), ten[i]);
	s = 12345;
	for (int i = 0; i < 100; i++)
		assert_int_equal(dpt__sampler_bounded(&s, 1), 0);
}

/* Each index exactly once; epochs and seeds differ; shuffle 0 and the
 * trivial sizes are the identity. */
static void permutations_are_valid(void **state)
{
	static const uint64_t sizes[] = {0, 1, 2, 3, 17, 1000, 4097};
	uint64_t id[8];
	(void)state;

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint64_t n = sizes[k];
		for (uint64_t seed = 0; seed < 3; seed++) {
			uint64_t *p = perm_of(seed, seed * 11, n);
			unsigned char *seen = calloc(n + 1, 1);

			assert_non_null(seen);
			for (uint64_t i = 0; i < n; i++) {
				assert_true(p[i] < n);
				assert_false(seen[p[i]]);
				seen[p[i]] = 1;
			}
			free(seen);
			free(p);
		}
	}
	{
		uint64_t *a = perm_of(7, 0, 1000), *b = perm_of(7, 1, 1000),
			 *c = perm_of(8, 0, 1000);
		assert_memory_not_equal(a, b, 1000 * sizeof(uint64_t));
		assert_memory_not_equal(a, c, 1000 * sizeof(uint64_t));
		free(a);
		free(b);
		free(c);
	}
	assert_int_equal(dpt_sampler_permutation(7, 3, 8, 0, id), 0);
	for (uint64_t i = 0; i < 8; i++)
		assert_int_equal(id[i], i);
	assert_int_equal(dpt_sampler_permutation(7, 3, 0, 1, NULL), 0);
	assert_int_equal(dpt_sampler_permutation(7, 3, 1, 1, NULL), DPT_EINVAL);
}

/* W samplers, one per rank of a world of W. */
static void world_new(struct dpt_sampler **s, int w, uint64_t len,
		      uint64_t batch, uint64_t seed, int shuffle)
{
	for (int r = 0; r < w; r++) {
		assert_int_equal(
			dpt_sampler_new(&s[r], len, batch, seed, shuffle), 0);
		assert_int_equal(dpt_sampler_set_world(s[r], r, w), 0);
	}
}

/* One global step of a world of W: the ranks' shares in rank order. */
static void world_step(struct dpt_sampler **s, int w, uint64_t batch,
		       uint64_t *out)
{
	for (int r = 0; r < w; r++)
		assert_int_equal(
			dpt_sampler_next(s[r],
					 out + (uint64_t)r *
							 (batch / (uint64_t)w)),
			0);
}

static void world_destroy(struct dpt_sampler **s, int w)
{
	for (int r = 0; r < w; r++) {
		dpt_sampler_destroy(&s[r]);
		assert_null(s[r]);
	}
}

/* The samples of global step S are the same on 1, 2, 3, 4, 6 and 8
 * ranks, over three epochs, and they are the permutation's slices. */
static void every_world_size_sees_the_same_steps(void **state)
{
	enum { LEN = 1000, B = 24, STEPS = 41 * 3 + 5 };
	static const int worlds[] = {1, 2, 3, 4, 6, 8};
	struct dpt_sampler *one, *s[8];
	uint64_t want[B], got[B];
	(void)state;

	for (size_t k = 0; k < sizeof(worlds) / sizeof(worlds[0]); k++) {
		int w = worlds[k];

		assert_int_equal(dpt_sampler_new(&one, LEN, B, 9, 1), 0);
		assert_int_equal(dpt_sampler_steps_per_epoch(one), 41);
		world_new(s, w, LEN, B, 9, 1);
		for (int step = 0; step < STEPS; step++) {
			uint64_t epoch = (uint64_t)step / 41;
			uint64_t *p = perm_of(9, epoch, LEN);

			assert_int_equal(dpt_sampler_next(one, want), 0);
			world_step(s, w, B, got);
			assert_memory_equal(want, got, sizeof(want));
			assert_memory_equal(want, p + (step % 41) * B,
					    sizeof(want));
			assert_int_equal(dpt_sampler_sample_cursor(s[w - 1]),
					 (uint64_t)(step + 1) * B);
			free(p);
		}
		world_destroy(s, w);
		dpt_sampler_destroy(&one);
	}
}

/* Saved by 6 ranks mid-epoch, resumed by 4 (and by 8 at an epoch's
 * end): the continuation is that of an uninterrupted 1-rank run. */
static void resume_from_state(void **state)
{
	enum { LEN = 500, B = 24 }; /* 20 steps per epoch, 20 dropped */
	struct dpt_sampler *one, *six[6], *four[4], *eight[8];
	struct dpt_sampler_state st, st2;
	uint64_t want[B], got[B];
	(void)state;

	assert_int_equal(dpt_sampler_new(&one, LEN, B, 77, 1), 0);
	world_new(six, 6, LEN, B, 77, 1);
	for (int step = 0; step < 27; step++) {
		assert_int_equal(dpt_sampler_next(one, want), 0);
		world_step(six, 6, B, got);
	}
	dpt_sampler_get_state(six[3], &st);
	assert_int_equal(st.seed, 77);
	assert_int_equal(st.epoch, 1);
	assert_int_equal(st.cursor, 7 * B);
	assert_int_equal(dpt_sampler_sample_cursor(six[0]), 27 * B);
	/* A sampler made with another seed takes the state's. */
	world_new(four, 4, LEN, B, 1234, 1);
	for (int r = 0; r < 4; r++)
		assert_int_equal(dpt_sampler_set_state(four[r], &st), 0);
	assert_int_equal(dpt_sampler_sample_cursor(four[0]), 27 * B);
	for (int step = 27; step < 40; step++) {
		assert_int_equal(dpt_sampler_next(one, want), 0);
		world_step(four, 4, B, got);
		assert_memory_equal(want, got, sizeof(want));
	}
	/* At the end of epoch 1: the state says so, and a resume goes on
	 * with epoch 2. */
	dpt_sampler_get_state(four[0], &st2);
	assert_int_equal(st2.epoch, 1);
	assert_int_equal(st2.cursor, 20 * B);
	world_new(eight, 8, LEN, B, 77, 1);
	for (int r = 0; r < 8; r++)
		assert_int_equal(dpt_sampler_set_state(eight[r], &st2), 0);
	for (int step = 40; step < 45; step++) {
		assert_int_equal(dpt_sampler_next(one, want), 0);
		world_step(eight, 8, B, got);
		assert_memory_equal(want, got, sizeof(want));
	}
	dpt_sampler_get_state(eight[0], &st2);
	assert_int_equal(st2.epoch, 2);
	assert_int_equal(st2.cursor, 5 * B);
	world_destroy(six, 6);
	world_destroy(four, 4);
	world_destroy(eight, 8);
	dpt_sampler_destroy(&one);
}

/* 100 samples, batches of 24: 4 steps per epoch, the last 4 samples of
 * each epoch's permutation dropped, then the next permutation. */
static void epochs_roll_over_and_drop_the_last_batch(void **state)
{
	struct dpt_sampler *s;
	struct dpt_sampler_state st;
	uint64_t *p0 = perm_of(5, 0, 100), *p1 = perm_of(5, 1, 100);
	uint64_t got[24];
	(void)state;

	assert_int_equal(dpt_sampler_new(&s, 100, 24, 5, 1), 0);
	assert_int_equal(dpt_sampler_steps_per_epoch(s), 4);
	for (int step = 0; step < 4; step++) {
		assert_int_equal(dpt_sampler_next(s, got), 0);
		assert_memory_equal(got, p0 + step * 24, sizeof(got));
	}
	dpt_sampler_get_state(s, &st);
	assert_int_equal(st.epoch, 0);
	assert_int_equal(st.cursor, 96);
	assert_int_equal(dpt_sampler_next(s, got), 0);
	assert_memory_equal(got, p1, sizeof(got)); /* not p0[96..99] */
	dpt_sampler_get_state(s, &st);
	assert_int_equal(st.epoch, 1);
	assert_int_equal(st.cursor, 24);
	assert_int_equal(dpt_sampler_sample_cursor(s), 96 + 24);
	/* set_epoch: the current epoch changes nothing, another starts. */
	assert_int_equal(dpt_sampler_set_epoch(s, 1), 0);
	assert_int_equal(dpt_sampler_sample_cursor(s), 120);
	assert_int_equal(dpt_sampler_set_epoch(s, 3), 0);
	dpt_sampler_get_state(s, &st);
	assert_int_equal(st.epoch, 3);
	assert_int_equal(st.cursor, 0);
	assert_int_equal(dpt_sampler_sample_cursor(s), 3 * 96);
	free(p1);
	p1 = perm_of(5, 3, 100);
	assert_int_equal(dpt_sampler_next(s, got), 0);
	assert_memory_equal(got, p1, sizeof(got));
	free(p0);
	free(p1);
	dpt_sampler_destroy(&s);
}

/* shuffle 0: the identity every epoch, rank shares included. */
static void no_shuffle_is_the_identity(void **state)
{
	struct dpt_sampler *s;
	uint64_t got[5];
	(void)state;

	assert_int_equal(dpt_sampler_new(&s, 23, 10, 99, 0), 0);
	assert_int_equal(dpt_sampler_set_world(s, 1, 2), 0);
	for (int step = 0; step < 5; step++) {
		assert_int_equal(dpt_sampler_next(s, got), 0);
		for (uint64_t i = 0; i < 5; i++)
			assert_int_equal(got[i],
					 (uint64_t)(step % 2) * 10 + 5 + i);
	}
	dpt_sampler_destroy(&s);
}

/* A world size that does not divide the global batch is refused with
 * both numbers in the message, and changes nothing. */
static void bad_world_size(void **state)
{
	struct dpt_sampler *s;
	uint64_t got[24];
	(void)state;

	assert_int_equal(dpt_sampler_new(&s, 1000, 24, 3, 1), 0);
	last_log[0] = 0;
	assert_int_equal(dpt_sampler_set_world(s, 0, 5), DPT_EINVAL);
	assert_non_null(strstr(last_log, "global batch 24"));
	assert_non_null(strstr(last_log, "world size 5"));
	assert_int_equal(dpt_sampler_set_world(s, 2, 2), DPT_EINVAL);
	assert_int_equal(dpt_sampler_set_world(s, 0, 0), DPT_EINVAL);
	assert_int_equal(dpt_sampler_set_world(s, -1, 4), DPT_EINVAL);
	assert_int_equal(dpt_sampler_set_world(NULL, 0, 1), DPT_EINVAL);
	/* Still rank 0 of 1: a whole batch. */
	assert_int_equal(dpt_sampler_next(s, got), 0);
	{
		uint64_t *p = perm_of(3, 0, 1000);
		assert_memory_equal(got, p, sizeof(got));
		free(p);
	}
	dpt_sampler_destroy(&s);
}

static void bad_state_and_arguments(void **state)
{
	struct dpt_sampler *s = (struct dpt_sampler *)&s;
	struct dpt_sampler_state st;
	uint64_t x;
	(void)state;

	last_log[0] = 0;
	assert_int_equal(dpt_sampler_new(&s, 10, 24, 1, 1), DPT_EINVAL);
	assert_null(s);
	assert_non_null(strstr(last_log, "10 samples"));
	assert_int_equal(dpt_sampler_new(&s, 10, 0, 1, 1), DPT_EINVAL);
	assert_int_equal(dpt_sampler_new(NULL, 10, 2, 1, 1), DPT_EINVAL);
	assert_int_equal(dpt_sampler_new(&s, 100, 24, 1, 1), 0);
	/* Not a multiple of the batch; beyond the last full batch. */
	st = (struct dpt_sampler_state){.seed = 2, .epoch = 4, .cursor = 25};
	assert_int_equal(dpt_sampler_set_state(s, &st), DPT_EINVAL);
	assert_non_null(strstr(last_log, "cursor 25"));
	st.cursor = 120;
	assert_int_equal(dpt_sampler_set_state(s, &st), DPT_EINVAL);
	dpt_sampler_get_state(s, &st);
	assert_int_equal(st.seed, 1);
	assert_int_equal(st.epoch, 0);
	assert_int_equal(st.cursor, 0);
	/* The end of the epoch is a valid position. */
	st = (struct dpt_sampler_state){.seed = 2, .epoch = 4, .cursor = 96};
	assert_int_equal(dpt_sampler_set_state(s, &st), 0);
	assert_int_equal(dpt_sampler_sample_cursor(s), 5 * 96);
	assert_int_equal(dpt_sampler_next(s, NULL), DPT_EINVAL);
	assert_int_equal(dpt_sampler_next(NULL, &x), DPT_EINVAL);
	assert_int_equal(dpt_sampler_set_state(s, NULL), DPT_EINVAL);
	assert_int_equal(dpt_sampler_set_epoch(NULL, 1), DPT_EINVAL);
	assert_int_equal(dpt_sampler_steps_per_epoch(NULL), 0);
	assert_int_equal(dpt_sampler_sample_cursor(NULL), 0);
	dpt_sampler_destroy(&s);
	assert_null(s);
	dpt_sampler_destroy(&s);
	dpt_sampler_destroy(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(known_answers),
		cmocka_unit_test(stream_known_answers),
		cmocka_unit_test(permutations_are_valid),
		cmocka_unit_test(every_world_size_sees_the_same_steps),
		cmocka_unit_test(resume_from_state),
		cmocka_unit_test(epochs_roll_over_and_drop_the_last_batch),
		cmocka_unit_test(no_shuffle_is_the_identity),
		cmocka_unit_test(bad_world_size),
		cmocka_unit_test(bad_state_and_arguments),
	};
	dpt__log_set_sink(capture);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

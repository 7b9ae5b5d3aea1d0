/*
 * The resharding planner: what each rank writes of a replicated tensor,
 * and plans that fill any box of a tensor from chunks written by another
 * world size. Each plan is executed on buffers in memory and checked
 * element by element; every byte of the destination is written exactly
 * once and nothing else is planned.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ckpt/ckpt_int.h"

static uint64_t linear(const struct dpt__box *b, const uint64_t *shape,
		       uint64_t local)
{
	uint64_t idx[DPT__CKPT_MAXDIM], g = 0;

	for (int d = b->ndim - 1; d >= 0; d--) {
		idx[d] = local % b->len[d];
		local /= b->len[d];
	}
	for (int d = 0; d < b->ndim; d++)
		g = g * shape[d] + b->off[d] + idx[d];
	return g;
}

/* The box of RANK of WORLD when cutting SHAPE along DIM. */
static struct dpt__box cut(int ndim, const uint64_t *shape, int dim, int rank,
			   int world)
{
	struct dpt__box b = {.ndim = ndim};

	for (int d = 0; d < ndim; d++)
		b.len[d] = shape[d];
	if (ndim > 0) {
		b.off[dim] = shape[dim] * (uint64_t)rank / (uint64_t)world;
		b.len[dim] =
			shape[dim] * (uint64_t)(rank + 1) / (uint64_t)world -
			b.off[dim];
	}
	return b;
}

/* Copies ACC as cudaMemcpy2D would (COUNT rows of LEN bytes at the
 * pitches) and empties it; counts the copies in *NCOPIES. */
static void copy2d(struct dpt__run2d *acc, char *dst, const char *src,
		   size_t *ncopies)
{
	for (uint64_t i = 0; i < acc->count; i++)
		memcpy(dst + acc->dst + i * acc->dpitch,
		       src + acc->src + i * acc->spitch, acc->len);
	if (acc->count)
		++*ncopies;
	acc->count = 0;
}

/* Executes the runs PR[0..N) from SRC to DST merged into 2-D copies with
 * pitches of at most MAX_PITCH, as ckpt/cuda.c does; returns the number
 * of copies. */
static size_t exec2d(const struct dpt__plan_run *pr, size_t n, char *dst,
		     char *const *src, uint64_t max_pitch)
{
	struct dpt__run2d acc = {0};
	size_t ncopies = 0, chunk = 0;

	for (size_t k = 0; k < n; k++) {
		if (acc.count && pr[k].chunk != chunk)
			copy2d(&acc, dst, src[chunk], &ncopies);
		chunk = pr[k].chunk;
		if (!dpt__run2d_add(&acc, &pr[k].run, max_pitch)) {
			copy2d(&acc, dst, src[chunk], &ncopies);
			assert_true(
				dpt__run2d_add(&acc, &pr[k].run, max_pitch));
		}
	}
	copy2d(&acc, dst, src[chunk], &ncopies);
	return ncopies;
}

/* Saves a tensor of SHAPE (uint32 elements equal to their global index)
 * with SAVE_WORLD ranks (replicated split, or cut along SAVE_DIM), then
 * plans and executes the load of every box of LOAD_WORLD ranks cut along
 * LOAD_DIM. */
static void reshard(int ndim, const uint64_t *shape, bool replicated,
		    int save_dim, int save_world, int load_dim, int load_world)
{
	struct dpt__tensor_desc t = {
		.name = "t", .dtype = DPT_INT32, .ndim = ndim};
	uint32_t **chunk_data = calloc((size_t)save_world, sizeof(*chunk_data));
	size_t esz = 4;

	for (int d = 0; d < ndim; d++)
		t.shape[d] = shape[d];
	t.chunks = calloc((size_t)save_world, sizeof(*t.chunks));
	for (int r = 0; r < save_world; r++) {
		struct dpt__box b;
		uint64_t n;

		if (replicated) {
			if (!dpt__box_split(ndim, shape, save_world, r, &b))
				continue;
		} else {
			b = cut(ndim, shape, save_dim, r, save_world);
			if (dpt__box_volume(&b) == 0)
				continue;
		}
		n = dpt__box_volume(&b);
		chunk_data[t.nchunks] = malloc(n * esz);
		for (uint64_t i = 0; i < n; i++)
			chunk_data[t.nchunks][i] =
				(uint32_t)linear(&b, shape, i);
		t.chunks[t.nchunks].box = b;
		t.chunks[t.nchunks].length = n * esz;
		t.nchunks++;
	}
	for (int r = 0; r < load_world; r++) {
		struct dpt__box local =
			cut(ndim, shape, load_dim, r, load_world);
		uint64_t n = dpt__box_volume(&local), planned = 0;
		uint32_t *dst = malloc(n * esz + 1),
			 *dst2 = malloc(n * esz + 1);
		unsigned char *hits = calloc(n * esz + 1, 1);
		struct dpt__plan plan = {0};

		assert_int_equal(dpt__plan_tensor(&t, &local, &plan), 0);
		for (size_t k = 0; k < plan.n; k++) {
			const struct dpt__plan_run *pr = &plan.runs[k];
			assert_true(pr->chunk < t.nchunks);
			assert_true(pr->run.src + pr->run.len <=
				    t.chunks[pr->chunk].length);
			assert_true(pr->run.dst + pr->run.len <= n * esz);
			memcpy((char *)dst + pr->run.dst,
			       (char *)chunk_data[pr->chunk] + pr->run.src,
			       pr->run.len);
			for (uint64_t b = 0; b < pr->run.len; b++)
				hits[pr->run.dst + b]++;
			planned += pr->run.len;
			/* Sorted by chunk, then source offset. */
			if (k > 0 && plan.runs[k - 1].chunk == pr->chunk)
				assert_true(plan.runs[k - 1].run.src <
					    pr->run.src);
			if (k > 0)
				assert_true(plan.runs[k - 1].chunk <=
					    pr->chunk);
		}
		assert_int_equal(planned,
				 n * esz); /* nothing more than needed */
		for (uint64_t b = 0; b < n * esz; b++)
			assert_int_equal(hits[b], 1);
		for (uint64_t i = 0; i < n; i++)
			assert_int_equal(dst[i],
					 (uint32_t)linear(&local, shape, i));
		/* The same runs merged into 2-D copies (device tensors), with
		 * any pitch and with the smallest one: the same bytes, in no
		 * more copies than runs. */
		for (int limit = 0; limit < 2; limit++) {
			size_t copies;

			memset(dst2, 0xee, n * esz);
			copies = exec2d(plan.runs, plan.n, (char *)dst2,
					(char *const *)chunk_data,
					limit ? esz : UINT64_MAX);
			assert_true(copies <= plan.n);
			assert_memory_equal(dst2, dst, n * esz);
		}
		dpt__plan_release(&plan);
		free(hits);
		free(dst2);
		free(dst);
	}
	for (size_t j = 0; j < t.nchunks; j++)
		free(chunk_data[j]);
	free(chunk_data);
	free(t.chunks);
}

static void split_covers(void **state)
{
	static const uint64_t shapes[][3] = {
		{10, 3, 2}, {3, 17, 5}, {2, 2, 2}, {1, 1, 1}, {0, 4, 4}};
	(void)state;

	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		for (int world = 1; world <= 9; world++) {
			struct dpt__box whole = {.ndim = 3};
			uint64_t total = 0;
			struct dpt__box boxes[9];
			bool has[9];

			for (int d = 0; d < 3; d++)
				whole.len[d] = shapes[s][d];
			for (int r = 0; r < world; r++) {
				has[r] = dpt__box_split(3, shapes[s], world, r,
							&boxes[r]);
				if (has[r])
					total += dpt__box_volume(&boxes[r]);
				for (int q = 0; has[r] && q < r; q++) {
					struct dpt__box x;
					assert_false(has[q] &&
						     dpt__box_intersect(
							     &boxes[q],
							     &boxes[r], &x));
				}
			}
			assert_int_equal(total, dpt__box_volume(&whole));
		}
	}
	/* The split dimension is the first one with enough rows for all. */
	{
		struct dpt__box b;
		const uint64_t shape[] = {3, 17};
		assert_true(dpt__box_split(2, shape, 4, 3, &b));
		assert_int_equal(b.off[0], 0);
		assert_int_equal(b.len[0], 3);
		assert_int_equal(b.off[1], 12);
		assert_int_equal(b.len[1], 5);
	}
	/* A scalar: rank 0 writes it. */
	{
		struct dpt__box b;
		assert_true(dpt__box_split(0, NULL, 4, 0, &b));
		assert_false(dpt__box_split(0, NULL, 4, 1, &b));
	}
}

static void reshard_rows(void **state)
{
	static const uint64_t s1[] = {1001};
	static const uint64_t s2[] = {37, 16};
	(void)state;

	for (int sw = 1; sw <= 8; sw++)
		for (int lw = 1; lw <= 8; lw++) {
			reshard(1, s1, false, 0, sw, 0, lw);
			reshard(2, s2, false, 0, sw, 0, lw);
			reshard(2, s2, true, 0, sw, 0, lw);
		}
}

static void reshard_other_dims(void **state)
{
	static const uint64_t s3[] = {6, 50, 4};
	static const uint64_t s4[] = {3, 4, 5, 7};
	(void)state;

	/* Saved along one dimension, loaded along another. */
	for (int sw = 1; sw <= 5; sw++)
		for (int lw = 1; lw <= 5; lw++) {
			reshard(3, s3, false, 1, sw, 1, lw);
			reshard(3, s3, false, 0, sw, 2, lw);
			reshard(3, s3, true, 0, sw, 1, lw);
			reshard(4, s4, false, 3, sw, 1, lw);
			reshard(4, s4, false, 2, sw, 2, lw);
		}
	reshard(0, NULL, true, 0, 4, 0, 3);
}

static void runs_merge(void **state)
{
	/* A row-sharded tensor loaded with the same world: one run each. */
	static const uint64_t shape[] = {64, 8, 8};
	struct dpt__tensor_desc t = {
		.name = "t", .dtype = DPT_FLOAT64, .ndim = 3};
	struct dpt__chunk c[4];
	struct dpt__plan plan = {0};
	(void)state;

	memset(c, 0, sizeof(c));
	memcpy(t.shape, shape, sizeof(shape));
	for (int r = 0; r < 4; r++) {
		c[r].box = cut(3, shape, 0, r, 4);
		c[r].length = dpt__box_volume(&c[r].box) * 8;
	}
	t.chunks = c;
	t.nchunks = 4;
	for (int r = 0; r < 4; r++) {
		struct dpt__box local = cut(3, shape, 0, r, 4);
		plan.n = 0;
		assert_int_equal(dpt__plan_tensor(&t, &local, &plan), 0);
		assert_int_equal(plan.n, 1);
		assert_int_equal(plan.runs[0].chunk, (size_t)r);
		assert_int_equal(plan.runs[0].run.len, 16 * 64 * 8);
	}
	/* Rows 10..40 of 4 chunks of 16 rows: 3 runs. */
	{
		struct dpt__box local = {
			.ndim = 3, .off = {10, 0, 0}, .len = {30, 8, 8}};
		plan.n = 0;
		assert_int_equal(dpt__plan_tensor(&t, &local, &plan), 0);
		assert_int_equal(plan.n, 3);
		assert_int_equal(plan.runs[0].run.src, 10 * 64 * 8);
		assert_int_equal(plan.runs[2].run.len, 8 * 64 * 8);
	}
	/* A box outside the tensor is refused. */
	{
		struct dpt__box bad = {
			.ndim = 3, .off = {60, 0, 0}, .len = {5, 8, 8}};
		assert_int_equal(dpt__plan_tensor(&t, &bad, &plan), DPT_EINVAL);
	}
	dpt__plan_release(&plan);
}

static void runs_2d(void **state)
{
	/* A 6 x 50 x 4 tensor cut along its middle dimension into 4 chunks,
	 * loaded whole: the 6 runs of a chunk are one 2-D copy. */
	static const uint64_t shape[] = {6, 50, 4};
	struct dpt__tensor_desc t = {
		.name = "t", .dtype = DPT_UINT8, .ndim = 3};
	struct dpt__chunk c[4];
	struct dpt__plan plan = {0};
	struct dpt__run2d acc = {0};
	(void)state;

	memset(c, 0, sizeof(c));
	memcpy(t.shape, shape, sizeof(shape));
	for (int r = 0; r < 4; r++) {
		c[r].box = cut(3, shape, 1, r, 4);
		c[r].length = dpt__box_volume(&c[r].box);
	}
	t.chunks = c;
	t.nchunks = 4;
	{
		struct dpt__box local = cut(3, shape, 1, 0, 1);
		assert_int_equal(dpt__plan_tensor(&t, &local, &plan), 0);
		assert_int_equal(plan.n, 4 * 6);  /* one run per row */
		for (size_t k = 6; k < 12; k++) { /* chunk 1: 12..25 of 50 */
			assert_int_equal(plan.runs[k].chunk, 1);
			assert_true(dpt__run2d_add(&acc, &plan.runs[k].run,
						   UINT64_MAX));
		}
		assert_int_equal(acc.count, 6);
		assert_int_equal(acc.len, 13 * 4);
		assert_int_equal(acc.src, 0);
		assert_int_equal(acc.dst, 12 * 4);
		assert_int_equal(acc.spitch, 13 * 4);
		assert_int_equal(acc.dpitch, 50 * 4);
	}
	/* Runs contiguous in both buffers make one longer row. */
	acc.count = 0;
	assert_true(dpt__run2d_add(
		&acc, &(struct dpt__run){.src = 0, .dst = 8, .len = 4}, 0));
	assert_true(dpt__run2d_add(
		&acc, &(struct dpt__run){.src = 4, .dst = 12, .len = 4}, 0));
	assert_int_equal(acc.count, 1);
	assert_int_equal(acc.len, 8);
	/* A pitch above the limit, another length, a broken stride, a row
	 * that goes backwards: not merged, ACC unchanged. */
	assert_false(dpt__run2d_add(
		&acc, &(struct dpt__run){.src = 100, .dst = 100, .len = 8},
		64));
	assert_false(dpt__run2d_add(
		&acc, &(struct dpt__run){.src = 20, .dst = 20, .len = 4}, 64));
	assert_false(dpt__run2d_add(
		&acc, &(struct dpt__run){.src = 4, .dst = 20, .len = 8}, 64));
	assert_int_equal(acc.count, 1);
	assert_true(dpt__run2d_add(
		&acc, &(struct dpt__run){.src = 16, .dst = 40, .len = 8}, 64));
	assert_false(dpt__run2d_add(
		&acc, &(struct dpt__run){.src = 33, .dst = 72, .len = 8}, 64));
	assert_true(dpt__run2d_add(
		&acc, &(struct dpt__run){.src = 32, .dst = 72, .len = 8}, 64));
	assert_int_equal(acc.count, 3);
	assert_int_equal(acc.spitch, 16);
	assert_int_equal(acc.dpitch, 32);
	dpt__plan_release(&plan);
}

/* The runs of every dtype are in bytes of its elements: the same cut of
 * a 6 x 50 x 4 tensor as runs_2d, for the 1- to 16-byte dtypes. */
static void runs_scale_with_the_dtype(void **state)
{
	static const uint64_t shape[] = {6, 50, 4};
	static const enum dpt_dtype dts[] = {
		DPT_BOOL,   DPT_INT8,	DPT_INT16,     DPT_UINT16,
		DPT_UINT32, DPT_UINT64, DPT_COMPLEX64, DPT_COMPLEX128};
	static const uint64_t sizes[] = {1, 1, 2, 2, 4, 8, 8, 16};
	(void)state;

	for (size_t k = 0; k < sizeof(dts) / sizeof(dts[0]); k++) {
		struct dpt__tensor_desc t = {
			.name = "t", .dtype = dts[k], .ndim = 3};
		struct dpt__box local = cut(3, shape, 1, 0, 1);
		struct dpt__plan plan = {0};
		struct dpt__chunk c[4];
		uint64_t es = sizes[k];

		memset(c, 0, sizeof(c));
		memcpy(t.shape, shape, sizeof(shape));
		for (int r = 0; r < 4; r++) {
			c[r].box = cut(3, shape, 1, r, 4);
			c[r].length = dpt__box_volume(&c[r].box) * es;
		}
		t.chunks = c;
		t.nchunks = 4;
		assert_int_equal(dpt__plan_tensor(&t, &local, &plan), 0);
		assert_int_equal(plan.n, 4 * 6);
		/* Chunk 1 holds columns 12..25: its second row. */
		assert_int_equal(plan.runs[7].chunk, 1);
		assert_int_equal(plan.runs[7].run.src, 13 * 4 * es);
		assert_int_equal(plan.runs[7].run.dst, (50 + 12) * 4 * es);
		assert_int_equal(plan.runs[7].run.len, 13 * 4 * es);
		dpt__plan_release(&plan);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(split_covers),
		cmocka_unit_test(reshard_rows),
		cmocka_unit_test(reshard_other_dims),
		cmocka_unit_test(runs_merge),
		cmocka_unit_test(runs_2d),
		cmocka_unit_test(runs_scale_with_the_dtype),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

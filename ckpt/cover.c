/*
 * Whether the chunks of a tensor cover it exactly: every element in one
 * chunk, none in two (doc/checkpoint-format.md, "Manifest"). A manifest
 * may come from another user of a shared checkpoint root, so the cost of
 * this check must not grow with the square of the chunks, as comparing
 * every pair did (2^31 box intersections for a tensor of 65536 chunks).
 *
 * The method. The box [a, b) of one dimension is a difference of steps,
 * H(x - a) - H(x - b) with H(y) = 1 for y >= 0 and 0 below; a box of
 * several dimensions is the product of such differences. Let F be the sum
 * of the chunks' boxes minus the tensor's box, as indicator functions: the
 * chunks cover the tensor exactly when F is 0 everywhere. In dimension d,
 *
 *   F(x) = sum over c of H(x_d - c) G_c(the other coordinates of x),
 *
 * c running over the coordinates where a box begins or ends in dimension
 * d, and G_c the sum of the boxes that begin at c (with their sign) and of
 * those that end at c (with the opposite sign), without dimension d. Steps
 * at distinct c are linearly independent, so F is 0 exactly when every G_c
 * is: a sum of the same kind in one dimension fewer. With no dimension
 * left, a sum of signs, which must be 0.
 *
 * The cost. A box goes into two sums per dimension, so it is seen 2^k
 * times when the chunks cut the tensor in k dimensions. A sum whose boxes
 * all have the same extent in a dimension goes on as one sum (its two are
 * equal up to the sign), so a dimension that no chunk cuts costs nothing,
 * and the usual tensor, cut in slabs along one dimension, costs one sort
 * of its chunks' 2n ends. With n chunks, O(2^k n log n) time, k at most
 * DPT__CKPT_MAXDIM (2^k <= 256, whatever the manifest says), and
 * O(DPT__CKPT_MAXDIM n) memory: a sum holds at most one end of each box of
 * the sum it came from (a box's two ends differ), so one buffer of 2 (n +
 * 1) ends per dimension serves every sum.
 */
#include "config.h"

#include <stdlib.h>

#include <dptrain/error.h>

#include "ckpt_int.h"

/* A box of a sum: a chunk (its index), or the tensor (index nchunks). */
struct term {
	uint64_t at; /* where this end of the box lies, in the dimension
			being expanded */
	uint32_t box;
	int32_t sign; /* +1 or -1 */
};

struct cover {
	const struct dpt__tensor_desc *t;
	struct term *dim[DPT__CKPT_MAXDIM]; /* 2 (n + 1) terms each */
};

/* Box BOX's extent LO..HI in dimension D. */
static void extent(const struct cover *cv, uint32_t box, int d, uint64_t *lo,
		   uint64_t *hi)
{
	const struct dpt__box *b;

	if (box == cv->t->nchunks) {
		*lo = 0;
		*hi = cv->t->shape[d];
		return;
	}
	b = &cv->t->chunks[box].box;
	*lo = b->off[d];
	*hi = b->off[d] + b->len[d]; /* inside the tensor: no overflow */
}

static int by_coordinate(const void *a_p, const void *b_p)
{
	const struct term *a = a_p, *b = b_p;

	return (a->at > b->at) - (a->at < b->at);
}

/* The first dimension from D on in which the boxes of S[0..N) do not all
 * have the same extent; ndim if none. */
static int first_cut(const struct cover *cv, const struct term *s, size_t n,
		     int d)
{
	for (; d < cv->t->ndim; d++) {
		uint64_t lo0, hi0, lo, hi;
		size_t i;

		extent(cv, s[0].box, d, &lo0, &hi0);
		for (i = 1; i < n; i++) {
			extent(cv, s[i].box, d, &lo, &hi);
			if (lo != lo0 || hi != hi0)
				break;
		}
		if (i < n)
			return d;
	}
	return d;
}

/* Whether the sum of the boxes of S[0..N) (N > 0), in dimensions D and
 * up, is 0 everywhere. */
static bool sum_is_zero(const struct cover *cv, const struct term *s, size_t n,
			int d)
{
	struct term *e;
	size_t i, j;

	d = first_cut(cv, s, n, d);
	if (d == cv->t->ndim) {
		int64_t sum = 0;

		for (i = 0; i < n; i++)
			sum += s[i].sign;
		return sum == 0;
	}
	e = cv->dim[d];
	for (i = 0; i < n; i++) {
		uint64_t lo, hi;

		extent(cv, s[i].box, d, &lo, &hi);
		e[2 * i] = (struct term){lo, s[i].box, s[i].sign};
		e[2 * i + 1] = (struct term){hi, s[i].box, -s[i].sign};
	}
	qsort(e, 2 * n, sizeof(*e), by_coordinate);
	for (i = 0; i < 2 * n; i = j) {
		for (j = i + 1; j < 2 * n && e[j].at == e[i].at; j++)
			;
		if (!sum_is_zero(cv, e + i, j - i, d + 1))
			return false;
	}
	return true;
}

int dpt__chunks_cover(const struct dpt__tensor_desc *t, bool *exact)
{
	struct cover cv = {.t = t};
	struct term *all;
	size_t n = t->nchunks + 1;

	if (t->nchunks >= UINT32_MAX)
		return DPT_ERANGE;
	all = calloc(n * (1 + 2 * (size_t)(t->ndim ? t->ndim : 1)),
		     sizeof(*all));
	if (!all)
		return DPT_ENOMEM;
	for (int d = 0; d < t->ndim; d++)
		cv.dim[d] = all + n + 2 * n * (size_t)d;
	for (size_t i = 0; i < n; i++)
		all[i] = (struct term){0, (uint32_t)i, i < t->nchunks ? 1 : -1};
	*exact = sum_is_zero(&cv, all, n, 0);
	free(all);
	return 0;
}

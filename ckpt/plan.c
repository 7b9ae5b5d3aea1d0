/*
 * Boxes and the resharding planner (doc/checkpoint-format.md, "Loading
 * and resharding"): what a rank writes of a replicated tensor, and the
 * runs of bytes that copy one box of a tensor into another.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ckpt_int.h"

uint64_t dpt__box_volume(const struct dpt__box *b)
{
	uint64_t v = 1;

	for (int d = 0; d < b->ndim; d++)
		v *= b->len[d];
	return v;
}

bool dpt__box_intersect(const struct dpt__box *a, const struct dpt__box *b,
			struct dpt__box *out)
{
	out->ndim = a->ndim;
	if (a->ndim != b->ndim)
		return false;
	for (int d = 0; d < a->ndim; d++) {
		uint64_t lo = a->off[d] > b->off[d] ? a->off[d] : b->off[d];
		uint64_t ea = a->off[d] + a->len[d], eb = b->off[d] + b->len[d];
		uint64_t hi = ea < eb ? ea : eb;

		if (hi <= lo)
			return false;
		out->off[d] = lo;
		out->len[d] = hi - lo;
	}
	return dpt__box_volume(a) > 0 && dpt__box_volume(b) > 0;
}

bool dpt__box_split(int ndim, const uint64_t *shape, int world, int rank,
		    struct dpt__box *out)
{
	int dim = 0;
	uint64_t n;

	memset(out, 0, sizeof(*out));
	out->ndim = ndim;
	for (int d = 0; d < ndim; d++)
		out->len[d] = shape[d];
	if (dpt__box_volume(out) == 0)
		return false;
	if (ndim == 0)
		return rank == 0; /* a scalar: rank 0 writes it */
	/* The first dimension that gives every rank a share; the first one
	 * when none does (small tensors: a few ranks write them). */
	for (int d = 0; d < ndim; d++)
		if (shape[d] >= (uint64_t)world) {
			dim = d;
			break;
		}
	n = shape[dim];
	out->off[dim] = n * (uint64_t)rank / (uint64_t)world;
	out->len[dim] =
		n * (uint64_t)(rank + 1) / (uint64_t)world - out->off[dim];
	return out->len[dim] > 0;
}

int dpt__box_runs(const struct dpt__box *src, const struct dpt__box *dst,
		  size_t esize, dpt__run_fn fn, void *ctx)
{
	uint64_t sstride[DPT__CKPT_MAXDIM], dstride[DPT__CKPT_MAXDIM];
	uint64_t idx[DPT__CKPT_MAXDIM] = {0};
	struct dpt__box in;
	uint64_t run;
	int n = src->ndim, k, rc;

	if (!dpt__box_intersect(src, dst, &in))
		return 0;
	if (n == 0) {
		struct dpt__run r = {.src = 0, .dst = 0, .len = esize};
		return fn(ctx, &r);
	}
	sstride[n - 1] = dstride[n - 1] = 1;
	for (int d = n - 2; d >= 0; d--) {
		sstride[d] = sstride[d + 1] * src->len[d + 1];
		dstride[d] = dstride[d + 1] * dst->len[d + 1];
	}
	/* Trailing dimensions that both boxes span fully are contiguous in
	 * both buffers: they make one run with the dimension before them. */
	k = n - 1;
	run = in.len[k];
	while (k > 0 && in.len[k] == src->len[k] && in.len[k] == dst->len[k]) {
		k--;
		run *= in.len[k];
	}
	for (;;) {
		uint64_t s = 0, t = 0;
		struct dpt__run r;
		int d;

		for (d = 0; d < n; d++) {
			uint64_t g = in.off[d] + (d < k ? idx[d] : 0);
			s += (g - src->off[d]) * sstride[d];
			t += (g - dst->off[d]) * dstride[d];
		}
		r.src = s * esize;
		r.dst = t * esize;
		r.len = run * esize;
		rc = fn(ctx, &r);
		if (rc)
			return rc;
		/* The odometer over the dimensions before K. */
		for (d = k - 1; d >= 0; d--) {
			if (++idx[d] < in.len[d])
				break;
			idx[d] = 0;
		}
		if (d < 0)
			return 0;
	}
}

bool dpt__run2d_add(struct dpt__run2d *acc, const struct dpt__run *r,
		    uint64_t max_pitch)
{
	if (acc->count == 0) {
		*acc = (struct dpt__run2d){.src = r->src,
					   .dst = r->dst,
					   .len = r->len,
					   .count = 1};
		return true;
	}
	if (acc->count == 1) {
		if (r->src == acc->src + acc->len &&
		    r->dst == acc->dst + acc->len) {
			acc->len += r->len;
			return true;
		}
		if (r->len != acc->len || r->src < acc->src + acc->len ||
		    r->dst < acc->dst + acc->len ||
		    r->src - acc->src > max_pitch ||
		    r->dst - acc->dst > max_pitch)
			return false;
		acc->spitch = r->src - acc->src;
		acc->dpitch = r->dst - acc->dst;
		acc->count = 2;
		return true;
	}
	if (r->len != acc->len ||
	    r->src != acc->src + acc->count * acc->spitch ||
	    r->dst != acc->dst + acc->count * acc->dpitch)
		return false;
	acc->count++;
	return true;
}

struct plan_ctx {
	struct dpt__plan *plan;
	size_t chunk;
};

static int plan_add(void *ctx_p, const struct dpt__run *r)
{
	struct plan_ctx *ctx = ctx_p;
	struct dpt__plan *p = ctx->plan;

	/* Runs of one chunk that continue each other in both buffers merge. */
	if (p->n > 0) {
		struct dpt__plan_run *last = &p->runs[p->n - 1];
		if (last->chunk == ctx->chunk &&
		    last->run.src + last->run.len == r->src &&
		    last->run.dst + last->run.len == r->dst) {
			last->run.len += r->len;
			return 0;
		}
	}
	if (dpt__array_room(&p->runs, p->n, &p->cap, sizeof(*p->runs)))
		return DPT_ENOMEM;
	p->runs[p->n].chunk = ctx->chunk;
	p->runs[p->n].run = *r;
	p->n++;
	return 0;
}

int dpt__plan_tensor(const struct dpt__tensor_desc *t,
		     const struct dpt__box *local, struct dpt__plan *plan)
{
	struct plan_ctx ctx = {.plan = plan};
	size_t esz = dpt_dtype_size(t->dtype);
	int rc;

	if (local->ndim != t->ndim)
		return DPT_EINVAL;
	for (int d = 0; d < t->ndim; d++)
		if (local->off[d] > t->shape[d] ||
		    local->len[d] > t->shape[d] - local->off[d])
			return DPT_EINVAL;
	for (size_t j = 0; j < t->nchunks; j++) {
		ctx.chunk = j;
		rc = dpt__box_runs(&t->chunks[j].box, local, esz, plan_add,
				   &ctx);
		if (rc)
			return rc;
	}
	return 0;
}

void dpt__plan_release(struct dpt__plan *plan)
{
	free(plan->runs);
	memset(plan, 0, sizeof(*plan));
}

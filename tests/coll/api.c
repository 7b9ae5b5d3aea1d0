/*
 * One worker of tests/coll/api.sh: a training program's view of the
 * collectives, through libdptrain's public API only. It joins the job
 * (dpt_init against a real dptrain-coordinator, options from the command
 * line or from the DPTRAIN_* and SLURM_* environment), prints what it
 * got, runs every collective for every float type, in place and out of
 * place, and compares each result with a reference computed here.
 *
 *   api [--coordinator EP --secret HEX --backend B --node N
 *        --local-rank L] [--big BYTES]
 *
 * Output, one line each:
 *   joined rank=R world=W local_rank=L generation=G backend=B
 *   check COLLECTIVE MODE DTYPE COUNT ok|FAIL [why]
 *   done checks=C failures=F
 * Exit status 0 when every check passed, 1 otherwise, 2 for bad usage.
 *
 * Inputs are small integers times a power of two, chosen per dtype so
 * that every partial sum is exact: the sum is the same in any order and
 * the comparison is exact. The average is, as dptrain.h documents it,
 * the exact sum divided by the world size in the accumulation type
 * (float32 for the 16-bit types), rounded once to the element type; the
 * reference does the same with its own conversions (the compiler's
 * _Float16, and round-to-nearest-even written out for bfloat16), not the
 * library's.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/dptrain.h>

#include "parse.h"
#include "tests/testlib.h"

#define GARBAGE 0x5a /* what outputs hold before a collective */

static int checks, failures;

/* ------------------------------------------------------------ values */

#define SMALL_MIN (-32)
#define SMALL_N	  64		  /* rank inputs are in [-32, 31] */
#define SUM_MIN	  (SMALL_MIN * 4) /* sums of up to 4 ranks */
#define SUM_N	  (SMALL_N * 4)

/* Rank R's integer at element I, in [-32, 31]; KEY (rank_key) tells
 * ranks and collectives apart. */
static uint32_t rank_key(int r, uint32_t salt)
{
	return mix((uint32_t)r * 0x9e3779b9u + salt);
}

static int small(uint32_t key, size_t i)
{
	return (int)(mix((uint32_t)i ^ key) >> 26) + SMALL_MIN;
}

/* The power of two the integers are scaled by: fractions where the type
 * has bits for them, and still exact for a sum of 4 ranks (|sum| <= 128). */
static double scale(enum dpt_dtype t)
{
	switch (t) {
	case DPT_FLOAT32:
		return 1.0 / 64;
	case DPT_FLOAT64:
		return 1.0 / 1024;
	case DPT_FLOAT16:
		return 1.0 / 4;
	default:
		return 1.0; /* bfloat16: 8 significant bits */
	}
}

/* The bits of V in type T: V itself when representable, else rounded as
 * the type's conversion from float32 (or float64) does. */
static uint64_t bits_of(enum dpt_dtype t, double v)
{
	float f = (float)v;
	uint32_t u;
	uint64_t x;

	switch (t) {
	case DPT_FLOAT32:
		memcpy(&u, &f, 4);
		return u;
	case DPT_FLOAT64:
		memcpy(&x, &v, 8);
		return x;
	case DPT_BFLOAT16:
		return bf16_of(f);
	default:
		return half_of(f);
	}
}

static double value_of(enum dpt_dtype t, uint64_t bits)
{
	uint32_t u = (uint32_t)bits;
	float f;
	double d;

	switch (t) {
	case DPT_FLOAT32:
		memcpy(&f, &u, 4);
		return f;
	case DPT_FLOAT64:
		memcpy(&d, &bits, 8);
		return d;
	case DPT_BFLOAT16:
		return float_of_bf16((uint16_t)bits);
	default:
		return float_of_half((uint16_t)bits);
	}
}

/*
 * The reference of one dtype, as tables of bit patterns: the inputs (by
 * integer), and the sum and the average of WORLD inputs (by integer sum).
 * Every element's expected value is then a lookup, whatever the cost of
 * the type's conversions (float16's are in software here).
 */
struct ref {
	enum dpt_dtype t;
	size_t es;
	uint64_t in[SMALL_N];
	uint64_t sum[SUM_N];
	uint64_t avg[SUM_N];
};

static void ref_init(struct ref *f, enum dpt_dtype t, int world)
{
	double k = scale(t);

	f->t = t;
	f->es = dpt_dtype_size(t);
	for (int v = 0; v < SMALL_N; v++)
		f->in[v] = bits_of(t, (v + SMALL_MIN) * k);
	for (int v = 0; v < SUM_N; v++) {
		double s = (v + SUM_MIN) * k; /* exact in every type */

		f->sum[v] = bits_of(t, s);
		/* The average: the exact sum divided by the world size in
		 * the accumulation type, rounded once to T. */
		f->avg[v] =
			t == DPT_FLOAT64
				? bits_of(t, s / world)
				: bits_of(t, (double)((float)s / (float)world));
	}
}

static uint64_t load(const void *buf, size_t es, size_t i)
{
	switch (es) {
	case 2:
		return ((const uint16_t *)buf)[i];
	case 4:
		return ((const uint32_t *)buf)[i];
	default:
		return ((const uint64_t *)buf)[i];
	}
}

static void store(void *buf, size_t es, size_t i, uint64_t x)
{
	switch (es) {
	case 2:
		((uint16_t *)buf)[i] = (uint16_t)x;
		break;
	case 4:
		((uint32_t *)buf)[i] = (uint32_t)x;
		break;
	default:
		((uint64_t *)buf)[i] = x;
		break;
	}
}

/* BUF = rank R's input for the collective SALT. */
static void fill(void *buf, const struct ref *f, int r, size_t count,
		 uint32_t salt)
{
	uint32_t key = rank_key(r, salt);

	for (size_t i = 0; i < count; i++)
		store(buf, f->es, i, f->in[small(key, i) - SMALL_MIN]);
}

/* ------------------------------------------------------------ checks */

static const char *dtype_name(enum dpt_dtype t)
{
	switch (t) {
	case DPT_FLOAT32:
		return "float32";
	case DPT_FLOAT64:
		return "float64";
	case DPT_BFLOAT16:
		return "bfloat16";
	default:
		return "float16";
	}
}

static void verdict(const char *coll, const char *mode, enum dpt_dtype t,
		    size_t count, const char *why)
{
	checks++;
	if (why)
		failures++;
	printf("check %s %s %s %zu %s%s%s\n", coll, mode, dtype_name(t), count,
	       why ? "FAIL" : "ok", why ? " " : "", why ? why : "");
	fflush(stdout);
}

static void mismatch(const struct ref *f, const char *what, size_t i,
		     uint64_t got, uint64_t want, char *why, size_t size)
{
	snprintf(why, size, "%selement %zu is %.17g, want %.17g", what, i,
		 value_of(f->t, got), value_of(f->t, want));
}

/* Whether BUF holds the sum (or the average) of WORLD ranks' inputs. */
static int compare_allreduce(const void *buf, const struct ref *f,
			     enum dpt_op op, int world, size_t count,
			     uint32_t salt, char *why, size_t size)
{
	const uint64_t *table = op == DPT_SUM ? f->sum : f->avg;
	uint32_t key[4];

	for (int r = 0; r < world; r++)
		key[r] = rank_key(r, salt);
	for (size_t i = 0; i < count; i++) {
		int sum = 0;
		uint64_t got = load(buf, f->es, i);

		for (int r = 0; r < world; r++)
			sum += small(key[r], i);
		if (got != table[sum - SUM_MIN]) {
			mismatch(f, "", i, got, table[sum - SUM_MIN], why,
				 size);
			return -1;
		}
	}
	return 0;
}

/* Whether BUF holds rank R's input; WHAT names BUF in the message. */
static int compare_input(const void *buf, const struct ref *f, int r,
			 size_t count, uint32_t salt, const char *what,
			 char *why, size_t size)
{
	uint32_t key = rank_key(r, salt);

	for (size_t i = 0; i < count; i++) {
		uint64_t got = load(buf, f->es, i);
		uint64_t want = f->in[small(key, i) - SMALL_MIN];

		if (got != want) {
			mismatch(f, what, i, got, want, why, size);
			return -1;
		}
	}
	return 0;
}

struct run {
	struct dpt_ctx *ctx;
	int rank, world;
	unsigned char *a, *b; /* the largest size's bytes each */
};

/* Each collective and variant has inputs of its own, so that the result
 * of the check before cannot pass for this one's. */
enum salt { S_SUM = 1, S_SUM_IN, S_AVG, S_AVG_IN, S_BCAST, S_GATHER };

static void check_allreduce(struct run *w, const struct ref *f, size_t count,
			    enum dpt_op op, int in_place)
{
	const char *coll = op == DPT_SUM ? "allreduce-sum" : "allreduce-avg";
	const char *mode = in_place ? "in-place" : "out-of-place";
	uint32_t salt = (op == DPT_SUM ? S_SUM : S_AVG) + (in_place ? 1 : 0);
	unsigned char *send = w->a, *recv = in_place ? w->a : w->b;
	char why[256];
	int rc;

	fill(send, f, w->rank, count, salt);
	if (!in_place)
		memset(recv, GARBAGE, count * f->es);
	rc = dpt_allreduce(w->ctx, send, recv, count, f->t, op);
	if (rc) {
		snprintf(why, sizeof(why), "dpt_allreduce: %s",
			 dpt_err_name(rc));
		verdict(coll, mode, f->t, count, why);
		return;
	}
	if (compare_allreduce(recv, f, op, w->world, count, salt, why,
			      sizeof(why)) ||
	    (!in_place &&
	     compare_input(send, f, w->rank, count, salt,
			   "send buffer changed: ", why, sizeof(why)))) {
		verdict(coll, mode, f->t, count, why);
		return;
	}
	verdict(coll, mode, f->t, count, NULL);
}

static void check_broadcast(struct run *w, const struct ref *f, size_t count,
			    int root)
{
	char mode[32], why[256];
	int rc;

	snprintf(mode, sizeof(mode), "root=%d", root);
	if (w->rank == root)
		fill(w->a, f, root, count, S_BCAST);
	else
		memset(w->a, GARBAGE, count * f->es);
	rc = dpt_broadcast(w->ctx, w->a, count, f->t, root);
	if (rc) {
		snprintf(why, sizeof(why), "dpt_broadcast: %s",
			 dpt_err_name(rc));
		verdict("broadcast", mode, f->t, count, why);
		return;
	}
	if (compare_input(w->a, f, root, count, S_BCAST, "", why, sizeof(why)))
		verdict("broadcast", mode, f->t, count, why);
	else
		verdict("broadcast", mode, f->t, count, NULL);
}

static void check_allgather(struct run *w, const struct ref *f, size_t count,
			    int in_place)
{
	const char *mode = in_place ? "in-place" : "out-of-place";
	size_t block = count * f->es;
	unsigned char *recv = w->b;
	/* In place as dptrain.h (and MPI) define it: SEND is this rank's
	 * block of RECV. */
	unsigned char *send = in_place ? recv + (size_t)w->rank * block : w->a;
	char why[256], what[64];
	int rc;

	memset(recv, GARBAGE, block * (size_t)w->world);
	fill(send, f, w->rank, count, S_GATHER);
	rc = dpt_allgather(w->ctx, send, recv, count, f->t);
	if (rc) {
		snprintf(why, sizeof(why), "dpt_allgather: %s",
			 dpt_err_name(rc));
		verdict("allgather", mode, f->t, count, why);
		return;
	}
	for (int r = 0; r < w->world; r++) {
		snprintf(what, sizeof(what), "block %d ", r);
		if (compare_input(recv + (size_t)r * block, f, r, count,
				  S_GATHER, what, why, sizeof(why))) {
			verdict("allgather", mode, f->t, count, why);
			return;
		}
	}
	verdict("allgather", mode, f->t, count, NULL);
}

/* Every collective at COUNT elements; FULL: every variant, else (the
 * largest size, slow to check on two cores) one variant of each. */
static void check_all(struct run *w, const struct ref *f, size_t count,
		      int full)
{
	/* Allgather's output is WORLD blocks: at the largest size they
	 * share its bytes, and their count is no multiple of the world. */
	size_t gather = full ? count : count / (size_t)w->world - 1;

	check_allreduce(w, f, count, DPT_SUM, 0);
	check_allreduce(w, f, count, DPT_AVG, 1);
	if (full) {
		check_allreduce(w, f, count, DPT_SUM, 1);
		check_allreduce(w, f, count, DPT_AVG, 0);
		check_broadcast(w, f, count, 0);
	}
	check_broadcast(w, f, count, w->world - 1);
	check_allgather(w, f, gather, 1);
	if (full)
		check_allgather(w, f, gather, 0);
}

/* ------------------------------------------------------------ main */

/*
 * The boolean reductions through the public API: DPT_AVG is refused with
 * DPT_EINVAL before anything is sent (the generation goes on: the caller
 * checks that the next collectives work), and DPT_SUM is a logical or
 * whose result is 0 or 1 even from bytes other than 1. Element I is true
 * on rank I % (WORLD + 1) only, with the byte 2 or 0xff.
 */
static void check_bool(struct run *w)
{
	enum { N = 1021 };
	uint8_t *in = w->a, *out = w->b;
	const char *why = NULL;
	int rc;

	rc = dpt_allreduce(w->ctx, in, out, N, DPT_BOOL, DPT_AVG);
	checks++;
	if (rc != DPT_EINVAL)
		failures++;
	printf("check refuse-bool-avg %s\n",
	       rc == DPT_EINVAL ? "ok" : dpt_err_name(rc));
	for (size_t i = 0; i < N; i++)
		in[i] = i % (size_t)(w->world + 1) == (size_t)w->rank
				? (i % 2 ? 2 : 0xff)
				: 0;
	memset(out, GARBAGE, N);
	rc = dpt_allreduce(w->ctx, in, out, N, DPT_BOOL, DPT_SUM);
	if (rc)
		why = dpt_err_name(rc);
	for (size_t i = 0; !why && i < N; i++)
		if (out[i] != (i % (size_t)(w->world + 1) < (size_t)w->world))
			why = "wrong element";
	checks++;
	if (why)
		failures++;
	printf("check bool-or %s\n", why ? why : "ok");
	fflush(stdout);
}

static void usage(void)
{
	fprintf(stderr, "usage: api [--coordinator EP --secret HEX --backend B "
			"--node N --local-rank L] [--big BYTES]\n");
}

int main(int argc, char **argv)
{
	static const enum dpt_dtype types[] = {DPT_FLOAT32, DPT_FLOAT64,
					       DPT_BFLOAT16, DPT_FLOAT16};
	/* Element counts: one element, small and large counts that are no
	 * multiple of 2, 3 or 4, and counts that cross the CPU backend's
	 * 1 MiB shared-memory chunks. */
	static const size_t counts[] = {1, 5, 1021, 262147, 786433};
	struct dpt_init_opts opts;
	struct run w = {0};
	long big = 64L << 20, v;
	size_t bytes;
	int rc;

	dpt_init_opts_default(&opts);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i],
			   *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (!val) {
			usage();
			return 2;
		}
		if (!strcmp(a, "--coordinator")) {
			opts.coordinator = val;
		} else if (!strcmp(a, "--secret")) {
			opts.secret = val;
		} else if (!strcmp(a, "--backend")) {
			opts.backend = val;
		} else if (!strcmp(a, "--node") &&
			   !dpt__parse_long(val, 0, 1 << 20, &v)) {
			opts.node = (int)v;
		} else if (!strcmp(a, "--local-rank") &&
			   !dpt__parse_long(val, 0, 1 << 20, &v)) {
			opts.local_rank = (int)v;
		} else if (!strcmp(a, "--big") &&
			   !dpt__parse_long(val, 1 << 20, 1L << 30, &v)) {
			big = v;
		} else {
			usage();
			return 2;
		}
		i++;
	}
	rc = dpt_init(&w.ctx, &opts);
	if (rc) {
		printf("init FAIL %s: %s\n", dpt_err_name(rc),
		       dpt_strerror(rc));
		return 1;
	}
	w.rank = dpt_rank(w.ctx);
	w.world = dpt_world_size(w.ctx);
	if (w.world < 1 || w.world > 4) {
		/* The reference tables hold sums of up to 4 ranks. */
		printf("FAIL world size %d: this test runs 2 to 4 workers\n",
		       w.world);
		rc = 1;
		goto out;
	}
	printf("joined rank=%d world=%d local_rank=%d generation=%u "
	       "backend=%s\n",
	       w.rank, w.world, dpt_local_rank(w.ctx), dpt_generation(w.ctx),
	       dpt_backend(w.ctx));
	fflush(stdout);
	/* The buffers hold the largest size, and WORLD blocks of the
	 * largest count of float64 for the allgathers. */
	bytes = counts[sizeof(counts) / sizeof(counts[0]) - 1] * 8 *
		(size_t)w.world;
	if (bytes < (size_t)big)
		bytes = (size_t)big;
	w.a = malloc(bytes);
	w.b = malloc(bytes);
	if (!w.a || !w.b) {
		printf("FAIL out of memory\n");
		rc = 1;
		goto out;
	}
	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
		struct ref f;

		ref_init(&f, types[k], w.world);
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
			check_all(&w, &f, counts[c], 1);
		check_all(&w, &f, (size_t)big / f.es, 0);
	}
	check_bool(&w);
	rc = dpt_barrier(w.ctx);
	if (rc) {
		printf("FAIL dpt_barrier: %s\n", dpt_err_name(rc));
		failures++;
	}
	printf("done checks=%d failures=%d\n", checks, failures);
	rc = failures ? 1 : 0;
out:
	free(w.a);
	free(w.b);
	if (dpt_finalize(&w.ctx))
		rc = 1;
	return rc;
}

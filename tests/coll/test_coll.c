/*
 * Every collective of the CPU backend, every dtype, between real processes
 * over loopback: shared memory only, TCP only, and mixes where some ranks
 * share a node and some do not (the node of a rank is given per rank, so
 * one machine plays several nodes). Results are compared with a reference
 * computed locally: inputs are small integers, so that float sums are
 * exact in any order and the comparison can be bitwise.
 *
 * Each configuration forks its ranks; they run the same list of checks and
 * write a verdict per check into memory shared with the parent, which
 * prints one TAP line per check and configuration.
 */
#include "config.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dptrain/dptrain.h>

#include "harness.h"
#include "worker/cpu_comm.h"
#include "worker/cpu_reduce.h"

#define MAX_WORLD  8
#define MAX_CHECKS 64
#define GUARD	   64 /* bytes after every output, which must stay untouched */
#define BIG	   ((size_t)64 << 20) /* bytes */
#define LARGE	   ((size_t)1000003)  /* elements */

struct verdict {
	int state; /* 0 not run, 1 passed, 2 failed */
	char why[200];
};

struct table {
	int nchecks;
	char name[MAX_CHECKS][64];
	struct verdict v[MAX_CHECKS][MAX_WORLD];
	double arrive[MAX_WORLD]; /* barrier check */
	double leave[MAX_WORLD];
};

struct config {
	int world;
	uint32_t nodes[MAX_WORLD];
	int big;      /* also the 64 MiB checks */
	size_t large; /* the largest count (elements) */
};

static const struct config configs[] = {
	{2, {0, 0}, 1, LARGE},	     /* shared memory */
	{2, {0, 1}, 0, LARGE},	     /* TCP */
	{3, {5, 5, 9}, 0, LARGE},    /* mixed, node ids are labels */
	{4, {0, 1, 0, 1}, 1, LARGE}, /* mixed, nodes interleaved */
	{4, {0, 0, 0, 0}, 0, LARGE}, /* more ranks than CPUs */
	/* Uneven nodes, a lone rank; 8 ranks on 2 CPUs: modest sizes. */
	{8, {0, 0, 0, 1, 1, 2, 2, 3}, 0, 100003},
};

static const enum dpt_dtype dtypes[] = {
	DPT_FLOAT32, DPT_FLOAT64, DPT_BFLOAT16, DPT_FLOAT16,   DPT_INT32,
	DPT_INT64,   DPT_UINT8,	  DPT_BOOL,	DPT_INT8,      DPT_INT16,
	DPT_UINT16,  DPT_UINT32,  DPT_UINT64,	DPT_COMPLEX64, DPT_COMPLEX128};

static const char *dtype_name(enum dpt_dtype dt)
{
	static const char *const names[] = {
		"float32", "float64", "bfloat16", "float16",   "int32",
		"int64",   "uint8",   "bool",	  "int8",      "int16",
		"uint16",  "uint32",  "uint64",	  "complex64", "complex128"};
	return names[dt];
}

#define MAX_ES 16 /* bytes of the largest element (complex128) */

/* ------------------------------------------------------------ checks */

struct ctx {
	struct dpt__cpu_comm *c;
	int rank;
	int world;
	struct table *t;
	int check;    /* index of the running check, counted by each rank */
	size_t large; /* the largest count of the configuration */
	/* Inputs and outputs of every case, mapped once: first touches of
	 * memory cost ~50 times a warm copy on this VM, and fresh buffers
	 * per case made the test ten times slower. */
	unsigned char *a;
	unsigned char *b;
};

static void begin(struct ctx *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void begin(struct ctx *x, const char *fmt, ...)
{
	va_list ap;

	if (x->check < MAX_CHECKS - 1)
		x->check++;
	if (x->rank == 0) {
		va_start(ap, fmt);
		vsnprintf(x->t->name[x->check], sizeof(x->t->name[0]), fmt, ap);
		va_end(ap);
	}
	x->t->nchecks = x->check + 1;
	x->t->v[x->check][x->rank].state = 1;
}

/* Record the first failure of the running check on this rank. */
static void fail(struct ctx *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void fail(struct ctx *x, const char *fmt, ...)
{
	struct verdict *v = &x->t->v[x->check][x->rank];
	va_list ap;

	if (v->state == 2)
		return;
	v->state = 2;
	va_start(ap, fmt);
	vsnprintf(v->why, sizeof(v->why), fmt, ap);
	va_end(ap);
}

/* Rank R's input element I: a small integer, or any byte for uint8 so
 * that sums wrap around. */
static int64_t input(int r, size_t i, int seed)
{
	uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)(r + 1) * 40503u ^
		     (uint32_t)seed * 977u;
	h ^= h >> 15;
	h *= 2246822519u;
	h ^= h >> 13;
	return (int64_t)(h % 9) - 4;
}

static uint8_t input_u8(int r, size_t i, int seed)
{
	return (uint8_t)(input(r, i, seed) * 37 + (int64_t)i + r);
}

#define VBLOCK 4096 /* elements verified at a time */

/* OUT[k] = V[k] (for uint8 and int8: B[k]; for bool: B[k] where V[k] is
 * 3 or more, so that a few ranks are true and true is not always 1; for
 * complex: V[k] - 2V[k]i) as DTYPE, for K < N. */
static void store(enum dpt_dtype dt, void *out, const int64_t *v,
		  const uint8_t *b, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		switch (dt) {
		case DPT_FLOAT32:
			((float *)out)[k] = (float)v[k];
			break;
		case DPT_FLOAT64:
			((double *)out)[k] = (double)v[k];
			break;
		case DPT_BFLOAT16:
			((uint16_t *)out)[k] =
				dpt__bf16_from_float((float)v[k]);
			break;
		case DPT_FLOAT16:
			((uint16_t *)out)[k] =
				dpt__fp16_from_float((float)v[k]);
			break;
		case DPT_INT32:
			((int32_t *)out)[k] = (int32_t)v[k];
			break;
		case DPT_INT64:
			((int64_t *)out)[k] = v[k];
			break;
		case DPT_UINT8:
		case DPT_INT8:
			((uint8_t *)out)[k] = b[k];
			break;
		case DPT_BOOL:
			((uint8_t *)out)[k] =
				v[k] >= 3 ? (uint8_t)(b[k] | 1) : 0;
			break;
		case DPT_INT16:
		case DPT_UINT16:
			((uint16_t *)out)[k] = (uint16_t)v[k];
			break;
		case DPT_UINT32:
			((uint32_t *)out)[k] = (uint32_t)v[k];
			break;
		case DPT_UINT64:
			((uint64_t *)out)[k] = (uint64_t)v[k];
			break;
		case DPT_COMPLEX64:
			((float *)out)[2 * k] = (float)v[k];
			((float *)out)[2 * k + 1] = (float)(-2 * v[k]);
			break;
		case DPT_COMPLEX128:
			((double *)out)[2 * k] = (double)v[k];
			((double *)out)[2 * k + 1] = (double)(-2 * v[k]);
			break;
		}
	}
}

/* Rank R's inputs I0 .. I0 + N (N <= VBLOCK) as DTYPE into OUT. */
static void inputs(enum dpt_dtype dt, void *out, int r, size_t i0, size_t n,
		   int seed)
{
	int64_t v[VBLOCK];
	uint8_t b[VBLOCK];

	for (size_t k = 0; k < n; k++) {
		v[k] = input(r, i0 + k, seed);
		b[k] = input_u8(r, i0 + k, seed);
	}
	store(dt, out, v, b, n);
}

static void fill(enum dpt_dtype dt, void *buf, int r, size_t n, int seed)
{
	size_t es = dpt_dtype_size(dt);

	for (size_t i = 0; i < n; i += VBLOCK)
		inputs(dt, (char *)buf + i * es, r, i,
		       n - i < VBLOCK ? n - i : VBLOCK, seed);
}

/* What elements should hold: rank RANK's inputs, or the allreduce of
 * all ranks' inputs with OP, as the backend defines it (cpu_reduce.h). */
struct expect {
	enum dpt_dtype dt;
	int seed;
	int rank; /* an input; -1: the allreduce */
	enum dpt_op op;
	int world;
};

static void expected(const struct expect *e, size_t i0, size_t n, void *out)
{
	int64_t s[VBLOCK];
	uint8_t b[VBLOCK], any[VBLOCK];

	if (e->rank >= 0) {
		inputs(e->dt, out, e->rank, i0, n, e->seed);
		return;
	}
	memset(s, 0, n * sizeof(s[0]));
	memset(b, 0, n);
	memset(any, 0, n);
	for (int r = 0; r < e->world; r++)
		for (size_t k = 0; k < n; k++) {
			s[k] += input(r, i0 + k, e->seed);
			b[k] = (uint8_t)(b[k] + input_u8(r, i0 + k, e->seed));
			any[k] |= input(r, i0 + k, e->seed) >= 3;
		}
	if (e->dt == DPT_BOOL) {
		/* A logical or: exactly 1 where any rank is true. */
		memcpy(out, any, n);
		return;
	}
	if (e->op == DPT_SUM) {
		store(e->dt, out, s, b, n);
		return;
	}
	for (size_t k = 0; k < n; k++) {
		/* Floats divide the exact sum once in their accumulation
		 * type and round once; integers truncate toward zero. */
		float f = (float)s[k] / (float)e->world;

		switch (e->dt) {
		case DPT_FLOAT32:
			((float *)out)[k] = f;
			break;
		case DPT_FLOAT64:
			((double *)out)[k] = (double)s[k] / (double)e->world;
			break;
		case DPT_BFLOAT16:
			((uint16_t *)out)[k] = dpt__bf16_from_float(f);
			break;
		case DPT_FLOAT16:
			((uint16_t *)out)[k] = dpt__fp16_from_float(f);
			break;
		case DPT_INT32:
			((int32_t *)out)[k] = (int32_t)(s[k] / e->world);
			break;
		case DPT_INT64:
			((int64_t *)out)[k] = s[k] / e->world;
			break;
		case DPT_UINT8:
			((uint8_t *)out)[k] = (uint8_t)(b[k] / e->world);
			break;
		case DPT_INT8:
			((int8_t *)out)[k] = (int8_t)((int8_t)b[k] / e->world);
			break;
		case DPT_INT16:
			((int16_t *)out)[k] = (int16_t)(s[k] / e->world);
			break;
		case DPT_UINT16:
			/* The sum wraps first (negative inputs are large). */
			((uint16_t *)out)[k] =
				(uint16_t)((uint16_t)s[k] / (unsigned)e->world);
			break;
		case DPT_UINT32:
			((uint32_t *)out)[k] =
				(uint32_t)s[k] / (uint32_t)e->world;
			break;
		case DPT_UINT64:
			((uint64_t *)out)[k] =
				(uint64_t)s[k] / (uint64_t)e->world;
			break;
		case DPT_COMPLEX64:
			((float *)out)[2 * k] = f;
			((float *)out)[2 * k + 1] =
				(float)(-2 * s[k]) / (float)e->world;
			break;
		case DPT_COMPLEX128:
			((double *)out)[2 * k] =
				(double)s[k] / (double)e->world;
			((double *)out)[2 * k + 1] =
				(double)(-2 * s[k]) / (double)e->world;
			break;
		case DPT_BOOL:
			break;
		}
	}
}

/* Compare N elements of GOT with E's; name the first difference. */
static void compare(struct ctx *x, const struct expect *e, const void *got,
		    size_t n, const char *what)
{
	size_t es = dpt_dtype_size(e->dt);
	uint64_t want[VBLOCK * MAX_ES / sizeof(uint64_t)];

	for (size_t i = 0; i < n; i += VBLOCK) {
		size_t m = n - i < VBLOCK ? n - i : VBLOCK;
		const char *g = (const char *)got + i * es;

		expected(e, i, m, want);
		if (!memcmp(g, want, m * es))
			continue;
		for (size_t k = 0; k < m; k++) {
			uint64_t gv = 0, wv = 0;

			if (!memcmp(g + k * es, (char *)want + k * es, es))
				continue;
			/* The first 8 bytes (the real part of a
			 * complex128). */
			memcpy(&gv, g + k * es, es < 8 ? es : 8);
			memcpy(&wv, (char *)want + k * es, es < 8 ? es : 8);
			fail(x,
			     "%s: element %zu of %zu is 0x%" PRIx64
			     ", want 0x%" PRIx64,
			     what, i + k, n, gv, wv);
			return;
		}
	}
}

/* Outputs are followed by GUARD bytes that must stay untouched. */
static void set_guard(void *buf, size_t bytes)
{
	memset((unsigned char *)buf + bytes, 0xa5, GUARD);
}

static void check_guard(struct ctx *x, const void *buf, size_t bytes,
			const char *what)
{
	const unsigned char *p = (const unsigned char *)buf + bytes;

	for (int i = 0; i < GUARD; i++)
		if (p[i] != 0xa5) {
			fail(x, "%s: wrote past the buffer", what);
			return;
		}
}

static void counts_for(const struct ctx *x, size_t *counts, int *n)
{
	size_t all[] = {1, 7, (size_t)x->world - 1, x->large};

	*n = 0;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		int dup = all[i] == 0;
		for (int j = 0; j < *n; j++)
			dup |= counts[j] == all[i];
		if (!dup)
			counts[(*n)++] = all[i];
	}
}

static void check_rc(struct ctx *x, int rc, const char *what)
{
	if (rc)
		fail(x, "%s: %s", what, dpt_err_name(rc));
}

static void allreduce_case(struct ctx *x, enum dpt_dtype dt, enum dpt_op op,
			   size_t n, int in_place, int seed)
{
	struct expect in = {.dt = dt, .seed = seed, .rank = x->rank};
	struct expect out = {.dt = dt,
			     .seed = seed,
			     .rank = -1,
			     .op = op,
			     .world = x->world};
	size_t bytes = n * dpt_dtype_size(dt);
	void *send = x->a, *recv = in_place ? x->a : x->b;
	char what[96];

	snprintf(what, sizeof(what), "%s count %zu %s",
		 op == DPT_AVG ? "avg" : "sum", n,
		 in_place ? "in place" : "out of place");
	fill(dt, send, x->rank, n, seed);
	set_guard(send, bytes);
	if (!in_place) {
		memset(recv, 0x5a, bytes);
		set_guard(recv, bytes);
	}
	check_rc(x, dpt__cpu_allreduce(x->c, send, recv, n, dt, op), what);
	compare(x, &out, recv, n, what);
	if (!in_place)
		compare(x, &in, send, n, "the send buffer changed");
	check_guard(x, send, bytes, what);
	check_guard(x, recv, bytes, what);
}

static void check_allreduce(struct ctx *x, enum dpt_dtype dt)
{
	size_t counts[4];
	int nc, seed = 1;

	begin(x, "allreduce %s", dtype_name(dt));
	counts_for(x, counts, &nc);
	/* A boolean has a sum (a logical or) and no average: refused
	 * before anything is sent, so the ranks go on in step. */
	if (dt == DPT_BOOL &&
	    dpt__cpu_allreduce(x->c, x->a, x->b, 1, dt, DPT_AVG) != DPT_EINVAL)
		fail(x, "avg of bool was not refused with DPT_EINVAL");
	for (int op = DPT_SUM; op <= (dt == DPT_BOOL ? DPT_SUM : DPT_AVG); op++)
		for (int i = 0; i < nc; i++)
			for (int in_place = 0; in_place < 2; in_place++)
				allreduce_case(x, dt, (enum dpt_op)op,
					       counts[i], in_place, seed++);
	/* A zero count is a no-op that still validates and returns 0. */
	check_rc(x, dpt__cpu_allreduce(x->c, NULL, NULL, 0, dt, DPT_SUM),
		 "count 0");
}

static void broadcast_case(struct ctx *x, enum dpt_dtype dt, size_t n, int root,
			   int seed)
{
	struct expect e = {.dt = dt, .seed = seed, .rank = root};
	size_t bytes = n * dpt_dtype_size(dt);
	char what[64];

	snprintf(what, sizeof(what), "root %d count %zu", root, n);
	if (x->rank == root)
		fill(dt, x->a, root, n, seed);
	else
		memset(x->a, 0x5a, bytes);
	set_guard(x->a, bytes);
	check_rc(x, dpt__cpu_broadcast(x->c, x->a, n, dt, root), what);
	compare(x, &e, x->a, n, what);
	check_guard(x, x->a, bytes, what);
}

static void check_broadcast(struct ctx *x, enum dpt_dtype dt)
{
	/* The first rank, a rank that leads no node in the mixed
	 * configurations, and the last. */
	int roots[] = {0, 1, x->world - 1};
	size_t counts[4];
	int nc, seed = 100;

	begin(x, "broadcast %s", dtype_name(dt));
	counts_for(x, counts, &nc);
	for (int ri = 0; ri < 3; ri++) {
		if (ri == 2 && roots[2] <= 1)
			break;
		for (int i = 0; i < nc; i++)
			broadcast_case(x, dt, counts[i], roots[ri], seed++);
	}
}

static void allgather_case(struct ctx *x, enum dpt_dtype dt, size_t n,
			   int placement, int seed)
{
	static const char *const names[] = {"out of place", "send == recv",
					    "send at own block"};
	size_t bytes = n * dpt_dtype_size(dt), all = bytes * (size_t)x->world;
	unsigned char *recv = x->b, *send = x->a;
	char what[64];

	snprintf(what, sizeof(what), "count %zu %s", n, names[placement]);
	memset(recv, 0x5a, all);
	set_guard(recv, all);
	if (placement == 1)
		send = recv;
	else if (placement == 2)
		send = recv + (size_t)x->rank * bytes;
	fill(dt, send, x->rank, n, seed);
	check_rc(x, dpt__cpu_allgather(x->c, send, recv, n, dt), what);
	for (int r = 0; r < x->world; r++) {
		struct expect e = {.dt = dt, .seed = seed, .rank = r};
		compare(x, &e, recv + (size_t)r * bytes, n, what);
	}
	check_guard(x, recv, all, what);
}

static void check_allgather(struct ctx *x, enum dpt_dtype dt)
{
	size_t counts[4];
	int nc, seed = 200;

	begin(x, "allgather %s", dtype_name(dt));
	counts_for(x, counts, &nc);
	for (int i = 0; i < nc; i++)
		for (int placement = 0; placement < 3; placement++)
			allgather_case(x, dt, counts[i], placement, seed++);
}

/* Nobody leaves a barrier before the last rank has arrived. */
static void check_barrier(struct ctx *x)
{
	double last = 0;

	begin(x, "barrier");
	for (int round = 0; round < 3; round++) {
		usleep((useconds_t)(((x->rank + round) % x->world) * 20000));
		x->t->arrive[x->rank] = harness_now();
		check_rc(x, dpt__cpu_barrier(x->c), "barrier");
		x->t->leave[x->rank] = harness_now();
		for (int r = 0; r < x->world; r++)
			if (x->t->arrive[r] > last)
				last = x->t->arrive[r];
		if (x->t->leave[x->rank] < last)
			fail(x, "left round %d %.3f s before the last arrival",
			     round, last - x->t->leave[x->rank]);
		/* Nobody may overwrite ARRIVE before all have read it. */
		check_rc(x, dpt__cpu_barrier(x->c), "second barrier");
	}
}

static void check_big(struct ctx *x)
{
	begin(x, "64 MiB allreduce float32 sum, bfloat16 avg in place");
	allreduce_case(x, DPT_FLOAT32, DPT_SUM, BIG / 4, 0, 300);
	allreduce_case(x, DPT_BFLOAT16, DPT_AVG, BIG / 2, 1, 301);
	begin(x, "64 MiB broadcast uint8 and allgather float32");
	broadcast_case(x, DPT_UINT8, BIG, x->world - 1, 302);
	allgather_case(x, DPT_FLOAT32, BIG / 4 / (size_t)x->world, 0, 303);
}

/* BYTES plus the guard, populated in one go (faulting page by page is
 * several times slower here). */
static unsigned char *arena(size_t bytes)
{
	void *p = mmap(NULL, bytes + GUARD, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

struct run_arg {
	struct table *t;
	const struct config *cfg;
	const struct harness_shm_seen *before; /* /dev/shm before the run */
};

static int rank_main(struct dpt__cpu_comm *c, int rank, void *arg)
{
	struct run_arg *a = arg;
	struct ctx x = {.c = c,
			.rank = rank,
			.world = a->cfg->world,
			.t = a->t,
			.check = -1,
			.large = a->cfg->large};
	char leaked[64];

	/* A hang must fail the test, not the harness's patience. */
	alarm(120);
	x.a = arena(a->cfg->big ? BIG : x.large * MAX_ES);
	x.b = arena(a->cfg->big && BIG > x.large * MAX_ES * (size_t)x.world
			    ? BIG
			    : x.large * MAX_ES * (size_t)x.world);
	if (!x.a || !x.b)
		return 1;
	begin(&x, "connected, nothing left in /dev/shm");
	check_rc(&x, dpt__cpu_barrier(c), "barrier");
	if (harness_shm_leaked(a->before, leaked, sizeof(leaked)))
		fail(&x, "segment '%s' is left in /dev/shm", leaked);
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
		check_allreduce(&x, dtypes[i]);
		check_broadcast(&x, dtypes[i]);
		check_allgather(&x, dtypes[i]);
	}
	check_barrier(&x);
	if (a->cfg->big)
		check_big(&x);
	return 0;
}

int main(void)
{
	size_t nconf = sizeof(configs) / sizeof(configs[0]);
	struct table *t = harness_shared(sizeof(*t));
	static struct harness_shm_seen before;
	int n = 0, failed = 0;

	if (!t) {
		printf("1..0 # SKIP cannot map shared memory\n");
		return 77;
	}
	for (size_t k = 0; k < nconf; k++) {
		const struct config *cfg = &configs[k];
		double t0 = harness_now();
		char label[64], session[64];
		int len = 0, status[MAX_WORLD], clean = 1;
		pid_t pids[MAX_WORLD];
		struct run_arg a = {.t = t, .cfg = cfg, .before = &before};

		memset(t, 0, sizeof(*t));
		len += snprintf(label + len, sizeof(label) - (size_t)len,
				"%d ranks, nodes", cfg->world);
		for (int r = 0; r < cfg->world; r++)
			len += snprintf(label + len,
					sizeof(label) - (size_t)len, "%c%u",
					r ? ',' : ' ', (unsigned)cfg->nodes[r]);
		snprintf(session, sizeof(session), "test-coll-%ld-%zu",
			 (long)getpid(), k);
		if (getenv("TEST_COLL_ONLY") &&
		    (int)strtol(getenv("TEST_COLL_ONLY"), NULL, 10) != (int)k)
			continue;
		harness_shm_snapshot(&before);
		if (harness_spawn(cfg->world, cfg->nodes, session, rank_main,
				  &a, pids)) {
			printf("not ok %d - %s: cannot start the ranks\n", ++n,
			       label);
			failed = 1;
			continue;
		}
		harness_wait(cfg->world, pids, status, 180);
		for (int i = 0; i < t->nchecks; i++) {
			int bad = 0;

			for (int r = 0; r < cfg->world; r++)
				bad |= t->v[i][r].state != 1;
			printf("%s %d - %s: %s\n", bad ? "not ok" : "ok", ++n,
			       label, t->name[i]);
			for (int r = 0; r < cfg->world; r++)
				if (t->v[i][r].state != 1)
					printf("# rank %d: %s\n", r,
					       t->v[i][r].state
						       ? t->v[i][r].why
						       : "did not run");
			failed |= bad;
		}
		for (int r = 0; r < cfg->world; r++)
			if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]))
				clean = 0;
		printf("%s %d - %s: every rank exited with 0\n",
		       clean ? "ok" : "not ok", ++n, label);
		for (int r = 0; r < cfg->world && !clean; r++)
			printf("# rank %d: wait status 0x%x\n", r, status[r]);
		failed |= !clean;
		printf("# %s: %.1f s\n", label, harness_now() - t0);
		fflush(stdout);
	}
	printf("1..%d\n", n);
	return failed;
}

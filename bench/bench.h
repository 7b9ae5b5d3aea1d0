/*
 * What the benchmarks must do alike: the iteration counts and the median,
 * so that bench/allreduce.c's and bench/allreduce_mpi.c's figures compare,
 * and the reading of numeric arguments.
 */
#ifndef DPT_BENCH_BENCH_H
#define DPT_BENCH_BENCH_H

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* Timed iterations for one size: ITERS, fewer for large sizes (about
 * 1 GiB moved per size), never fewer than 5. */
static inline int bench_iterations(size_t bytes, int iters)
{
	size_t cap = ((size_t)1 << 30) / (bytes ? bytes : 1);

	if (cap < 5)
		cap = 5;
	return (size_t)iters < cap ? iters : (int)cap;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of T[0..N), which it sorts. */
static inline double bench_median(double *t, int n)
{
	qsort(t, (size_t)n, sizeof(*t), bench_cmp_double);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* Argument S of option OPT as a number, or exit 2 saying why. */
static inline double bench_arg(const char *opt, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end) {
		fprintf(stderr, "%s: '%s' is not a number\n", opt, s);
		exit(2);
	}
	return v;
}

#endif

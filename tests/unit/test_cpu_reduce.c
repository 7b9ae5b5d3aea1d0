/*
 * The CPU backend's reduction kernels and 16-bit float conversions,
 * against references computed independently: rounding of bfloat16 and
 * float16 by exact arithmetic in double (and by the compiler's _Float16
 * where it has one), reductions by scalar loops.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "worker/cpu_reduce.h"

/* ----------------------------------------------------- references */

/*
 * X rounded to nearest, ties to even, in a binary format with P bits of
 * precision, smallest normal exponent EMIN and largest finite MAX:
 * scaling by a power of two is exact, and nearbyint() rounds to even in
 * the default mode.
 */
static double ref_round(double x, int p, int emin, double max)
{
	double q, r;
	int e;

	if (isnan(x) || isinf(x) || x == 0)
		return x;
	frexp(x, &e); /* |x| = m 2^e, m in [0.5, 1): leading bit 2^(e-1) */
	if (e - 1 < emin)
		e = emin + 1; /* subnormal: the quantum stops shrinking */
	q = ldexp(1.0, e - 1 - (p - 1));
	r = nearbyint(x / q) * q;
	if (fabs(r) > max)
		return copysign(INFINITY, x);
	return r;
}

static double ref_bf16(float f)
{
	return ref_round(f, 8, -126, ldexp(255.0 / 128, 127));
}

static double ref_fp16(float f)
{
	return ref_round(f, 11, -14, 65504.0);
}

/* float16 bits decoded by the definition of the format. */
static double decode_fp16(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v;

	if (e == 0x1f)
		v = m ? NAN : INFINITY;
	else if (e == 0)
		v = ldexp(m, -24);
	else
		v = ldexp(1024 + m, e - 25);
	return h & 0x8000 ? -v : v;
}

static float bits_float(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t float_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

/* Whether two doubles are the same value, signed zeros and NaN included. */
static int same(double a, double b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b);
	return a == b && signbit(a) == signbit(b);
}

/* ------------------------------------------------------ conversions */

static void bf16_round_trips(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = dpt__bf16_to_float((uint16_t)h);
		assert_int_equal(float_bits(f), h << 16);
		if (isnan(f))
			assert_true(isnan(
				dpt__bf16_to_float(dpt__bf16_from_float(f))));
		else
			assert_int_equal(dpt__bf16_from_float(f), h);
	}
}

/* Every bfloat16 value's neighbourhood: just below, at, and just above
 * the midpoint to the next value, and the values themselves. */
static void bf16_rounds_to_nearest_even(void **state)
{
	static const uint32_t offsets[] = {0,	   1,	   0x7fff,
					   0x8000, 0x8001, 0xffff};
	(void)state;
	for (uint32_t h = 0; h < 0x10000; h++) {
		for (size_t k = 0; k < sizeof(offsets) / sizeof(offsets[0]);
		     k++) {
			float f = bits_float(h << 16 | offsets[k]);
			float got = dpt__bf16_to_float(dpt__bf16_from_float(f));
			if (!same(got, ref_bf16(f)))
				fail_msg("bf16(%a [0x%08x]) = %a, want %a",
					 (double)f, float_bits(f), (double)got,
					 ref_bf16(f));
		}
	}
	/* Ties: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7. */
	assert_int_equal(dpt__bf16_from_float(1.0f + 0x1p-8f), 0x3f80);
	assert_int_equal(dpt__bf16_from_float(1.0f + 3 * 0x1p-8f), 0x3f82);
	assert_int_equal(dpt__bf16_from_float(0x1.fffffep127f), 0x7f80);
	assert_int_equal(dpt__bf16_from_float(-INFINITY), 0xff80);
	assert_true(isnan(dpt__bf16_to_float(dpt__bf16_from_float(NAN))));
}

static void fp16_decodes_every_value(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = dpt__fp16_to_float((uint16_t)h);
		if (!same(f, decode_fp16((uint16_t)h)))
			fail_msg("fp16 0x%04x reads as %a, want %a", h,
				 (double)f, decode_fp16((uint16_t)h));
		if (!isnan(f))
			assert_int_equal(dpt__fp16_from_float(f), h);
	}
}

static void check_fp16(float f)
{
	double want = ref_fp16(f);
	uint16_t h = dpt__fp16_from_float(f);

	if (!same(decode_fp16(h), want))
		fail_msg("fp16(%a [0x%08x]) = 0x%04x (%a), want %a", (double)f,
			 float_bits(f), h, decode_fp16(h), want);
#ifdef __FLT16_MAX__
	{
		_Float16 c = (_Float16)f;
		uint16_t bits;
		memcpy(&bits, &c, sizeof(bits));
		if (!isnan(f))
			assert_int_equal(h, bits);
	}
#endif
}

/* Midpoints between neighbouring float16 values (exact in float32), the
 * floats next to them, subnormals, the overflow threshold, and a sweep
 * through all float32 exponents. */
static void fp16_rounds_to_nearest_even(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 0x7bff; h++) {
		double a = decode_fp16((uint16_t)h);
		double b = decode_fp16((uint16_t)(h + 1));
		float mid = (float)((a + b) / 2);

		for (int s = 0; s < 2; s++) {
			float m = s ? -mid : mid;
			check_fp16(m);
			check_fp16(nextafterf(m, 0));
			check_fp16(nextafterf(m, s ? -INFINITY : INFINITY));
			check_fp16(s ? -(float)a : (float)a);
		}
	}
	check_fp16(65504.0f);
	check_fp16(65519.996f); /* rounds down to the largest finite */
	check_fp16(65520.0f);	/* the tie: to infinity */
	check_fp16(1e9f);
	check_fp16(0x1p-25f); /* half the smallest subnormal: a tie to 0 */
	check_fp16(nextafterf(0x1p-25f, 1));
	check_fp16(INFINITY);
	check_fp16(-INFINITY);
	for (uint64_t u = 0; u <= 0xffffffffu; u += 65521)
		check_fp16(bits_float((uint32_t)u));
	assert_true(isnan(dpt__fp16_to_float(dpt__fp16_from_float(NAN))));
}

/* ------------------------------------------------------- reductions */

static const enum dpt_dtype all_dtypes[] = {
	DPT_FLOAT32, DPT_FLOAT64, DPT_BFLOAT16, DPT_FLOAT16,   DPT_INT32,
	DPT_INT64,   DPT_UINT8,	  DPT_BOOL,	DPT_INT8,      DPT_INT16,
	DPT_UINT16,  DPT_UINT32,  DPT_UINT64,	DPT_COMPLEX64, DPT_COMPLEX128};

/* Element I of source K: small integers (exact in every float type),
 * except the integers, which also cover wrap-around, and booleans: zero
 * mostly, else a nonzero byte that is not always 1. A complex element is
 * (v, -2v). */
static int64_t value(enum dpt_dtype dt, int k, size_t i)
{
	int64_t v = (int64_t)((i * 7 + (size_t)k * 13) % 19) - 9;

	if (dt == DPT_UINT8 || dt == DPT_INT8)
		return (int64_t)((i * 37 + (size_t)k * 101) & 0xff);
	if (dt == DPT_UINT16)
		return (int64_t)((i * 1237 + (size_t)k * 40503) & 0xffff);
	if (dt == DPT_BOOL)
		return (i + (size_t)k) % 4 ? 0 : i % 2 ? 2 : 0xff;
	if (dt == DPT_INT16 && i % 5 == 0)
		return INT16_MAX - k;
	if (dt == DPT_INT32 && i % 5 == 0)
		return INT32_MAX - k;
	if ((dt == DPT_INT64 || dt == DPT_UINT64) && i % 5 == 0)
		return INT64_MAX - k;
	if (dt == DPT_UINT32 && i % 5 == 0)
		return (int64_t)UINT32_MAX - k;
	return v;
}

static void put(enum dpt_dtype dt, void *p, size_t i, int64_t v)
{
	switch (dt) {
	case DPT_FLOAT32:
		((float *)p)[i] = (float)v;
		break;
	case DPT_FLOAT64:
		((double *)p)[i] = (double)v;
		break;
	case DPT_BFLOAT16:
		((uint16_t *)p)[i] = dpt__bf16_from_float((float)v);
		break;
	case DPT_FLOAT16:
		((uint16_t *)p)[i] = dpt__fp16_from_float((float)v);
		break;
	case DPT_INT32:
		((int32_t *)p)[i] = (int32_t)v;
		break;
	case DPT_INT64:
		((int64_t *)p)[i] = v;
		break;
	case DPT_UINT8:
	case DPT_BOOL:
	case DPT_INT8:
		((uint8_t *)p)[i] = (uint8_t)v;
		break;
	case DPT_INT16:
	case DPT_UINT16:
		((uint16_t *)p)[i] = (uint16_t)v;
		break;
	case DPT_UINT32:
		((uint32_t *)p)[i] = (uint32_t)v;
		break;
	case DPT_UINT64:
		((uint64_t *)p)[i] = (uint64_t)v;
		break;
	case DPT_COMPLEX64:
		((float *)p)[2 * i] = (float)v;
		((float *)p)[2 * i + 1] = (float)(-2 * v);
		break;
	case DPT_COMPLEX128:
		((double *)p)[2 * i] = (double)v;
		((double *)p)[2 * i + 1] = (double)(-2 * v);
		break;
	}
}

/* The reduction of element I over NSRC sources, by scalar code. */
static void expected(enum dpt_dtype dt, void *p, size_t i, int nsrc,
		     unsigned divisor)
{
	uint64_t wrapped = 0;
	double exact = 0, imag = 0;
	int any = 0;

	for (int k = 0; k < nsrc; k++) {
		wrapped += (uint64_t)value(dt, k, i);
		exact += (double)value(dt, k, i);
		imag += -2.0 * (double)value(dt, k, i);
		any |= value(dt, k, i) != 0;
	}
	switch (dt) {
	case DPT_FLOAT32:
		((float *)p)[i] = (float)exact / (float)divisor;
		break;
	case DPT_FLOAT64:
		((double *)p)[i] = exact / divisor;
		break;
	case DPT_BFLOAT16:
		((uint16_t *)p)[i] =
			dpt__bf16_from_float((float)exact / (float)divisor);
		break;
	case DPT_FLOAT16:
		((uint16_t *)p)[i] =
			dpt__fp16_from_float((float)exact / (float)divisor);
		break;
	case DPT_INT32:
		((int32_t *)p)[i] =
			(int32_t)(uint32_t)wrapped / (int32_t)divisor;
		break;
	case DPT_INT64:
		((int64_t *)p)[i] = (int64_t)wrapped / (int64_t)divisor;
		break;
	case DPT_UINT8:
		((uint8_t *)p)[i] = (uint8_t)((uint8_t)wrapped / divisor);
		break;
	case DPT_BOOL:
		((uint8_t *)p)[i] = (uint8_t)any;
		break;
	case DPT_INT8:
		((int8_t *)p)[i] =
			(int8_t)((int8_t)(uint8_t)wrapped / (int)divisor);
		break;
	case DPT_INT16:
		((int16_t *)p)[i] =
			(int16_t)((int16_t)(uint16_t)wrapped / (int)divisor);
		break;
	case DPT_UINT16:
		((uint16_t *)p)[i] = (uint16_t)((uint16_t)wrapped / divisor);
		break;
	case DPT_UINT32:
		((uint32_t *)p)[i] = (uint32_t)wrapped / divisor;
		break;
	case DPT_UINT64:
		((uint64_t *)p)[i] = wrapped / divisor;
		break;
	case DPT_COMPLEX64:
		((float *)p)[2 * i] = (float)exact / (float)divisor;
		((float *)p)[2 * i + 1] = (float)imag / (float)divisor;
		break;
	case DPT_COMPLEX128:
		((double *)p)[2 * i] = exact / divisor;
		((double *)p)[2 * i + 1] = imag / divisor;
		break;
	}
}

/* Lengths around the kernels' 1024-element blocks. */
static const size_t lengths[] = {0, 1, 3, 1023, 1024, 1025, 3 * 1024 + 5};

static void reduce_case(enum dpt_dtype dt, int nsrc, size_t n, unsigned divisor,
			int alias)
{
	size_t es = dpt_dtype_size(dt), bytes = n * es, guard = 32;
	unsigned char *src[6], *dst, *dst2, *want;
	const void *srcs[6];

	for (int k = 0; k < nsrc; k++) {
		src[k] = malloc(bytes + 1);
		assert_non_null(src[k]);
		for (size_t i = 0; i < n; i++)
			put(dt, src[k], i, value(dt, k, i));
		srcs[k] = src[k];
	}
	dst = malloc(bytes + guard);
	dst2 = malloc(bytes + guard);
	want = malloc(bytes + 1);
	assert_true(dst && dst2 && want);
	memset(dst, 0xee, bytes + guard);
	memset(dst2, 0xee, bytes + guard);
	for (size_t i = 0; i < n; i++)
		expected(dt, want, i, nsrc, divisor);
	/* In place: the destination is the first or the last source. */
	if (alias) {
		unsigned char *d = alias == 1 ? src[0] : src[nsrc - 1];
		dpt__reduce(dt, d, dst2, srcs, nsrc, n, divisor);
		memcpy(dst, d, bytes);
	} else {
		dpt__reduce(dt, dst, dst2, srcs, nsrc, n, divisor);
	}
	for (size_t i = 0; i < n; i++) {
		if (memcmp(dst + i * es, want + i * es, es))
			fail_msg("dtype %d nsrc %d n %zu divisor %u alias %d: "
				 "element %zu differs",
				 (int)dt, nsrc, n, divisor, alias, i);
	}
	assert_memory_equal(dst2, want, bytes);
	for (size_t i = bytes; i < bytes + guard; i++) {
		if (!alias)
			assert_int_equal(dst[i], 0xee);
		assert_int_equal(dst2[i], 0xee);
	}
	for (int k = 0; k < nsrc; k++)
		free(src[k]);
	free(dst);
	free(dst2);
	free(want);
}

static void reduces_every_dtype(void **state)
{
	(void)state;
	for (size_t d = 0; d < sizeof(all_dtypes) / sizeof(all_dtypes[0]); d++)
		for (int nsrc = 1; nsrc <= 5; nsrc++)
			for (size_t l = 0;
			     l < sizeof(lengths) / sizeof(lengths[0]); l++)
				for (unsigned div = 1; div <= 3; div += 2)
					for (int alias = 0;
					     alias < 3 &&
					     (div == 1 ||
					      all_dtypes[d] != DPT_BOOL);
					     alias++)
						reduce_case(all_dtypes[d], nsrc,
							    lengths[l], div,
							    alias);
}

/* Half-precision sums are accumulated in float32 and rounded once. */
static void bf16_sums_round_once(void **state)
{
	uint16_t a = dpt__bf16_from_float(1.0f);
	uint16_t b = dpt__bf16_from_float(3 * 0x1p-10f); /* exact */
	uint16_t out;
	const void *srcs[3] = {&a, &b, &b};

	(void)state;
	/* 1 + 1.5 * 2^-8 rounds up to 1 + 2^-7; rounding after each add
	 * would stay at 1 (each 0.75 * 2^-8 is under half a step). */
	dpt__reduce(DPT_BFLOAT16, &out, NULL, srcs, 3, 1, 1);
	assert_int_equal(out, 0x3f81);
	/* The halfway case goes to the even neighbour. */
	b = dpt__bf16_from_float(0x1p-8f);
	dpt__reduce(DPT_BFLOAT16, &out, NULL, srcs, 2, 1, 1);
	assert_int_equal(out, 0x3f80);
	a = 0x3f81; /* 1 + 2^-7 */
	dpt__reduce(DPT_BFLOAT16, &out, NULL, srcs, 2, 1, 1);
	assert_int_equal(out, 0x3f82);
}

static void fp16_average_rounds_after_division(void **state)
{
	uint16_t a = dpt__fp16_from_float(1.0f), b = dpt__fp16_from_float(2.0f);
	uint16_t out;
	const void *srcs[3] = {&a, &b, &b};

	(void)state;
	/* (1 + 2 + 2) / 3 = 5/3, rounded once to float16. */
	dpt__reduce(DPT_FLOAT16, &out, NULL, srcs, 3, 1, 3);
	assert_int_equal(out, dpt__fp16_from_float(5.0f / 3.0f));
	assert_int_equal(out, 0x3eab);
}

static void integers_wrap_and_truncate(void **state)
{
	int32_t i32[2] = {INT32_MAX, 1}, o32;
	uint8_t u8[2] = {200, 100}, o8;
	int64_t n64[2] = {-4, -3}, o64;
	const void *s32[2] = {&i32[0], &i32[1]}, *s8[2] = {&u8[0], &u8[1]};
	const void *s64[2] = {&n64[0], &n64[1]};

	(void)state;
	dpt__reduce(DPT_INT32, &o32, NULL, s32, 2, 1, 1);
	assert_int_equal(o32, INT32_MIN);
	dpt__reduce(DPT_UINT8, &o8, NULL, s8, 2, 1, 1);
	assert_int_equal(o8, 44);
	dpt__reduce(DPT_INT64, &o64, NULL, s64, 2, 1, 2);
	assert_int_equal(o64, -3); /* -7 / 2 truncates toward zero */
}

/* The narrow types wrap in their own width, the same whether all the
 * operands are added in one call or two at a time (a ring's hops). */
static void narrow_integers_wrap_in_their_width(void **state)
{
	int8_t i8[3] = {100, 100, -56}, o8, t8;
	int16_t i16[2] = {-32768, -1}, o16;
	uint16_t u16[2] = {65535, 2}, ou16;
	uint64_t u64[2] = {UINT64_MAX, 3}, o64;
	const void *s8[3] = {&i8[0], &i8[1], &i8[2]}, *p8[2] = {&t8, &i8[2]};
	const void *s16[2] = {&i16[0], &i16[1]}, *su16[2] = {&u16[0], &u16[1]};
	const void *s64[2] = {&u64[0], &u64[1]};

	(void)state;
	dpt__reduce(DPT_INT8, &o8, NULL, s8, 3, 1, 1);
	assert_int_equal(o8, (int8_t)(100 + 100 - 56)); /* 144 - 256 = -112 */
	dpt__reduce(DPT_INT8, &t8, NULL, s8, 2, 1, 1);	/* 200: -56 */
	assert_int_equal(t8, -56);
	dpt__reduce(DPT_INT8, &t8, NULL, p8, 2, 1, 3); /* -112 / 3 */
	assert_int_equal(t8, -37);
	dpt__reduce(DPT_INT16, &o16, NULL, s16, 2, 1, 1);
	assert_int_equal(o16, 32767);
	dpt__reduce(DPT_UINT16, &ou16, NULL, su16, 2, 1, 1);
	assert_int_equal(ou16, 1);
	dpt__reduce(DPT_UINT64, &o64, NULL, s64, 2, 1, 2);
	assert_int_equal(o64, 1); /* wrapped to 2, halved */
}

/* A boolean sum is a logical or, whatever nonzero byte says true. */
static void bool_sum_is_or(void **state)
{
	uint8_t a[4] = {0, 0, 2, 0xff}, b[4] = {0, 1, 0, 0xff}, o[4];
	const void *srcs[2] = {a, b};

	(void)state;
	dpt__reduce(DPT_BOOL, o, NULL, srcs, 2, 4, 1);
	assert_memory_equal(o, ((uint8_t[]){0, 1, 1, 1}), 4);
}

/* A complex average divides both parts; a float kernel would get the
 * element count wrong by half. */
static void complex_mean(void **state)
{
	double a[4] = {1, -2, 3.5, 8}, b[4] = {3, 4, -1.5, 0}, o[4];
	float fa[2] = {1, 2}, fb[2] = {4, -8}, fo[2];
	const void *srcs[2] = {a, b}, *fsrcs[2] = {fa, fb};

	(void)state;
	dpt__reduce(DPT_COMPLEX128, o, NULL, srcs, 2, 2, 2);
	assert_true(o[0] == 2 && o[1] == 1 && o[2] == 1 && o[3] == 4);
	dpt__reduce(DPT_COMPLEX64, fo, NULL, fsrcs, 2, 1, 1);
	assert_true(fo[0] == 5 && fo[1] == -6);
}

static void validates_dtype_and_op(void **state)
{
	(void)state;
	assert_true(dpt__reduce_valid(DPT_UINT8, DPT_AVG));
	assert_true(dpt__reduce_valid(DPT_BFLOAT16, DPT_SUM));
	assert_true(dpt__reduce_valid(DPT_INT16, DPT_AVG));
	assert_true(dpt__reduce_valid(DPT_COMPLEX128, DPT_AVG));
	assert_true(dpt__reduce_valid(DPT_BOOL, DPT_SUM));
	assert_null(dpt__reduce_refusal(DPT_BOOL, DPT_SUM));
	assert_null(dpt__reduce_refusal(DPT_UINT64, DPT_AVG));
	/* No boolean average, and the reason says what to do instead. */
	assert_false(dpt__reduce_valid(DPT_BOOL, DPT_AVG));
	assert_non_null(
		strstr(dpt__reduce_refusal(DPT_BOOL, DPT_AVG), "DPT_SUM"));
	assert_false(dpt__reduce_valid((enum dpt_dtype)15, DPT_SUM));
	assert_string_equal(dpt__reduce_refusal((enum dpt_dtype)15, DPT_SUM),
			    "unknown dtype");
	assert_false(dpt__reduce_valid(DPT_FLOAT32, (enum dpt_op)2));
	assert_non_null(dpt__reduce_refusal(DPT_FLOAT32, (enum dpt_op)2));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(bf16_round_trips),
		cmocka_unit_test(bf16_rounds_to_nearest_even),
		cmocka_unit_test(fp16_decodes_every_value),
		cmocka_unit_test(fp16_rounds_to_nearest_even),
		cmocka_unit_test(reduces_every_dtype),
		cmocka_unit_test(bf16_sums_round_once),
		cmocka_unit_test(fp16_average_rounds_after_division),
		cmocka_unit_test(integers_wrap_and_truncate),
		cmocka_unit_test(narrow_integers_wrap_in_their_width),
		cmocka_unit_test(bool_sum_is_or),
		cmocka_unit_test(complex_mean),
		cmocka_unit_test(validates_dtype_and_op),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

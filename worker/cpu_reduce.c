#include "config.h"

#include <string.h>

#include "cpu_reduce.h"

/*
 * The kernels work on blocks of BLOCK elements accumulated in a local
 * array. Two reasons: the accumulator cannot alias the caller's buffers,
 * so the compiler needs no run-time overlap checks, and a full block has
 * a trip count known at compile time, which is what GCC's default -O2
 * cost model ("very cheap") requires before it vectorises a loop. The
 * tail, shorter than a block, runs the same code with a variable count.
 * 1024 elements keep the largest accumulator (8 KiB of float64) in L1.
 */
#define BLOCK 1024

static inline uint32_t float_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static inline float bits_float(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Branch-free select: A where MASK is all ones, B where it is zero. */
static inline uint32_t pick(uint32_t mask, uint32_t a, uint32_t b)
{
	return (a & mask) | (b & ~mask);
}

static inline uint32_t all_ones_if(int cond)
{
	return -(uint32_t)(cond != 0);
}

static inline float bf16_to_float(uint16_t h)
{
	return bits_float((uint32_t)h << 16);
}

static inline uint16_t bf16_from_float(float f)
{
	uint32_t u = float_bits(f);
	/* Adding 0x7fff plus the lowest kept bit rounds half to even; a
	 * carry into the exponent is correct rounding up, and 0x7f7fffff
	 * and above carry into infinity as they should. */
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	uint32_t nan = (u >> 16) | 0x40u;
	return (uint16_t)pick(all_ones_if((u & 0x7fffffffu) > 0x7f800000u), nan,
			      r);
}

/*
 * float16 conversions after Fabian Giesen's branch-free versions
 * (half_to_float, float_to_half_fast3_rtne). The selects are spelled as
 * masks because GCC at -O2 does not if-convert the ternary form and would
 * leave these loops scalar.
 */
static inline float fp16_to_float(uint16_t h)
{
	uint32_t em = h & 0x7fffu;
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t shifted = em << 13;
	uint32_t normal = shifted + ((127u - 15u) << 23);
	uint32_t special = shifted | 0x7f800000u; /* infinity and NaN */
	/* Subnormals (and zero) are em * 2^-24, exact in float32. */
	uint32_t sub = float_bits((float)(int32_t)em * 0x1p-24f);
	uint32_t r = pick(all_ones_if(em >= 0x7c00u), special, normal);
	r = pick(all_ones_if(em < 0x0400u), sub, r);
	return bits_float(r | sign);
}

static inline uint16_t fp16_from_float(float f)
{
	/* The float whose ulp is 2^-24, the float16 subnormal step: adding
	 * it rounds to a float16 subnormal in the FPU's round to nearest
	 * even, which is C's default mode. */
	const uint32_t denorm_magic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
	uint32_t u = float_bits(f);
	uint32_t sign = (u >> 16) & 0x8000u;
	uint32_t a = u & 0x7fffffffu;
	uint32_t sub =
	    float_bits(bits_float(a) + bits_float(denorm_magic)) - denorm_magic;
	uint32_t normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
	uint32_t big = pick(all_ones_if(a > 0x7f800000u), 0x7e00u, 0x7c00u);
	uint32_t r = pick(all_ones_if(a < (113u << 23)), sub, normal);
	/* 2^16 and above is infinity; 65520 up to it gets there by the
	 * normal path's carry. */
	r = pick(all_ones_if(a >= (143u << 23)), big, r);
	return (uint16_t)(r | sign);
}

uint16_t dpt__bf16_from_float(float f)
{
	return bf16_from_float(f);
}

float dpt__bf16_to_float(uint16_t h)
{
	return bf16_to_float(h);
}

uint16_t dpt__fp16_from_float(float f)
{
	return fp16_from_float(f);
}

float dpt__fp16_to_float(uint16_t h)
{
	return fp16_to_float(h);
}

/*
 * One kernel per element type T with accumulator type A: LOAD widens an
 * element, STORE narrows the accumulator, DIV applies the average's
 * divisor. Integers accumulate in unsigned types so that overflow wraps
 * instead of being undefined.
 */
#define DEFINE_REDUCE(name, T, A, LOAD, STORE, DIV)                            \
	static inline __attribute__((always_inline)) void name##_block(        \
	    T *d, const void *const *srcs, int nsrc, size_t at, size_t m,      \
	    unsigned divisor)                                                  \
	{                                                                      \
		A acc[BLOCK];                                                  \
		const T *s = (const T *)srcs[0] + at;                          \
		for (size_t i = 0; i < m; i++)                                 \
			acc[i] = LOAD(s[i]);                                   \
		for (int k = 1; k < nsrc; k++) {                               \
			s = (const T *)srcs[k] + at;                           \
			for (size_t i = 0; i < m; i++)                         \
				acc[i] += LOAD(s[i]);                          \
		}                                                              \
		if (divisor > 1)                                               \
			for (size_t i = 0; i < m; i++)                         \
				acc[i] = DIV(acc[i], divisor);                 \
		for (size_t i = 0; i < m; i++)                                 \
			d[at + i] = STORE(acc[i]);                             \
	}                                                                      \
	static void name(void *dst, void *dst2, const void *const *srcs,       \
			 int nsrc, size_t n, unsigned divisor)                 \
	{                                                                      \
		T *d = dst;                                                    \
		size_t at = 0;                                                 \
		for (; n - at >= BLOCK; at += BLOCK) {                         \
			name##_block(d, srcs, nsrc, at, BLOCK, divisor);       \
			if (dst2)                                              \
				memcpy((T *)dst2 + at, d + at,                 \
				       BLOCK * sizeof(T));                     \
		}                                                              \
		if (at < n) {                                                  \
			name##_block(d, srcs, nsrc, at, n - at, divisor);      \
			if (dst2)                                              \
				memcpy((T *)dst2 + at, d + at,                 \
				       (n - at) * sizeof(T));                  \
		}                                                              \
	}

#define ID(x)	     (x)
#define FDIV(a, d)   ((a) / (d))
#define I32DIV(a, d) ((uint32_t)((int32_t)(a) / (int32_t)(d)))
#define I64DIV(a, d) ((uint64_t)((int64_t)(a) / (int64_t)(d)))
#define U8DIV(a, d)  ((uint8_t)((a) / (d)))
#define I32STORE(a)  ((int32_t)(a))
#define I64STORE(a)  ((int64_t)(a))

DEFINE_REDUCE(reduce_f32, float, float, ID, ID, FDIV)
DEFINE_REDUCE(reduce_f64, double, double, ID, ID, FDIV)
DEFINE_REDUCE(reduce_bf16, uint16_t, float, bf16_to_float, bf16_from_float,
	      FDIV)
DEFINE_REDUCE(reduce_fp16, uint16_t, float, fp16_to_float, fp16_from_float,
	      FDIV)
DEFINE_REDUCE(reduce_i32, int32_t, uint32_t, ID, I32STORE, I32DIV)
DEFINE_REDUCE(reduce_i64, int64_t, uint64_t, ID, I64STORE, I64DIV)
DEFINE_REDUCE(reduce_u8, uint8_t, uint8_t, ID, ID, U8DIV)

void dpt__reduce(enum dpt_dtype dtype, void *dst, void *dst2,
		 const void *const *srcs, int nsrc, size_t n, unsigned divisor)
{
	switch (dtype) {
	case DPT_FLOAT32:
		reduce_f32(dst, dst2, srcs, nsrc, n, divisor);
		break;
	case DPT_FLOAT64:
		reduce_f64(dst, dst2, srcs, nsrc, n, divisor);
		break;
	case DPT_BFLOAT16:
		reduce_bf16(dst, dst2, srcs, nsrc, n, divisor);
		break;
	case DPT_FLOAT16:
		reduce_fp16(dst, dst2, srcs, nsrc, n, divisor);
		break;
	case DPT_INT32:
		reduce_i32(dst, dst2, srcs, nsrc, n, divisor);
		break;
	case DPT_INT64:
		reduce_i64(dst, dst2, srcs, nsrc, n, divisor);
		break;
	case DPT_UINT8:
		reduce_u8(dst, dst2, srcs, nsrc, n, divisor);
		break;
	}
}

int dpt__reduce_valid(enum dpt_dtype dtype, enum dpt_op op)
{
	return dpt_dtype_size(dtype) != 0 && (op == DPT_SUM || op == DPT_AVG);
}

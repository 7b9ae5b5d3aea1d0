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
	uint32_t sub = float_bits(bits_float(a) + bits_float(denorm_magic)) -
		       denorm_magic;
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
		T *d, const void *const *srcs, int nsrc, size_t at, size_t m,  \
		unsigned divisor)                                              \
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
/* Narrow integers accumulate in their own unsigned width (the conversion
 * back to it after C's promotion to int wraps), so that a sum wraps the
 * same way whether one call adds every rank's operand (shared memory) or
 * a ring hop adds two. */
#define I8DIV(a, d)  ((uint8_t)((int8_t)(a) / (int)(d)))
#define I16DIV(a, d) ((uint16_t)((int16_t)(a) / (int)(d)))
#define U16DIV(a, d) ((uint16_t)((a) / (d)))
#define U32DIV(a, d) ((a) / (d))
#define U64DIV(a, d) ((a) / (d))
#define I8STORE(a)   ((int8_t)(a))
#define I16STORE(a)  ((int16_t)(a))
/* Booleans: a sum of truth values (LOAD gives 0 or 1, the accumulator
 * cannot wrap below 2^32 operands) stored as "any", a logical OR whose
 * result is 0 or 1 whatever nonzero byte the operands held. There is no
 * average (dpt__reduce_valid). */
#define BOOLLOAD(x)   ((uint32_t)((x) != 0))
#define BOOLSTORE(a)  ((uint8_t)((a) != 0))
#define BOOLDIV(a, d) (a)

DEFINE_REDUCE(reduce_f32, float, float, ID, ID, FDIV)
DEFINE_REDUCE(reduce_f64, double, double, ID, ID, FDIV)
DEFINE_REDUCE(reduce_bf16, uint16_t, float, bf16_to_float, bf16_from_float,
	      FDIV)
DEFINE_REDUCE(reduce_fp16, uint16_t, float, fp16_to_float, fp16_from_float,
	      FDIV)
DEFINE_REDUCE(reduce_i32, int32_t, uint32_t, ID, I32STORE, I32DIV)
DEFINE_REDUCE(reduce_i64, int64_t, uint64_t, ID, I64STORE, I64DIV)
DEFINE_REDUCE(reduce_u8, uint8_t, uint8_t, ID, ID, U8DIV)
DEFINE_REDUCE(reduce_bool, uint8_t, uint32_t, BOOLLOAD, BOOLSTORE, BOOLDIV)
DEFINE_REDUCE(reduce_i8, int8_t, uint8_t, ID, I8STORE, I8DIV)
DEFINE_REDUCE(reduce_i16, int16_t, uint16_t, ID, I16STORE, I16DIV)
DEFINE_REDUCE(reduce_u16, uint16_t, uint16_t, ID, ID, U16DIV)
DEFINE_REDUCE(reduce_u32, uint32_t, uint32_t, ID, ID, U32DIV)
DEFINE_REDUCE(reduce_u64, uint64_t, uint64_t, ID, ID, U64DIV)

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
	case DPT_BOOL:
		reduce_bool(dst, dst2, srcs, nsrc, n, divisor);
		break;
	case DPT_INT8:
		reduce_i8(dst, dst2, srcs, nsrc, n, divisor);
		break;
	case DPT_INT16:
		reduce_i16(dst, dst2, srcs, nsrc, n, divisor);
		break;
	case DPT_UINT16:
		reduce_u16(dst, dst2, srcs, nsrc, n, divisor);
		break;
	case DPT_UINT32:
		reduce_u32(dst, dst2, srcs, nsrc, n, divisor);
		break;
	case DPT_UINT64:
		reduce_u64(dst, dst2, srcs, nsrc, n, divisor);
		break;
	/* A complex sum or mean is that of the real parts and of the
	 * imaginary parts: the float kernels over twice the elements. */
	case DPT_COMPLEX64:
		reduce_f32(dst, dst2, srcs, nsrc, 2 * n, divisor);
		break;
	case DPT_COMPLEX128:
		reduce_f64(dst, dst2, srcs, nsrc, 2 * n, divisor);
		break;
	}
}

int dpt__reduce_valid(enum dpt_dtype dtype, enum dpt_op op)
{
	if (dpt_dtype_size(dtype) == 0)
		return 0;
	if (dtype == DPT_BOOL)
		return op == DPT_SUM;
	return op == DPT_SUM || op == DPT_AVG;
}

const char *dpt__reduce_refusal(enum dpt_dtype dtype, enum dpt_op op)
{
	if (dpt_dtype_size(dtype) == 0)
		return "unknown dtype";
	if (op != DPT_SUM && op != DPT_AVG)
		return "unknown reduction operation";
	if (dtype == DPT_BOOL && op == DPT_AVG)
		return "a boolean has no average: reduce it with DPT_SUM "
		       "(logical or), or average it as uint8 or float";
	return NULL;
}

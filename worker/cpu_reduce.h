/*
 * Element-wise reductions and the 16-bit float conversions of the CPU
 * collective backend.
 *
 * Half-precision types (bfloat16, float16) are reduced in float32 and
 * rounded back to nearest, ties to even, once per call: a call that adds
 * all ranks' contributions of a slice (the shared-memory path) rounds once,
 * a ring hop rounds once per hop (as NCCL's ring does). Integer sums wrap
 * around in the element type; the average of integers is that sum divided
 * by the divisor, truncated toward zero.
 */
#ifndef DPT_WORKER_CPU_REDUCE_H
#define DPT_WORKER_CPU_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include <dptrain/dptrain.h>

/* Conversions between float32 and the 16-bit formats (bit patterns).
 * From float32: round to nearest even; NaN stays NaN (quiet), overflow
 * gives infinity, float16 subnormals are produced and read exactly. */
uint16_t dpt__bf16_from_float(float f);
float dpt__bf16_to_float(uint16_t h);
uint16_t dpt__fp16_from_float(float f);
float dpt__fp16_to_float(uint16_t h);

/*
 * Reduce NSRC (>= 1) arrays of N elements of DTYPE: DST[i] = (SRCS[0][i]
 * + ... + SRCS[NSRC-1][i]) / DIVISOR, DIVISOR being 1 for a sum or the
 * world size for an average (applied before the final rounding); for
 * DPT_BOOL the "sum" is a logical OR giving 0 or 1 and DIVISOR must be
 * 1; a complex element is two floats reduced independently. When
 * DST2 is not NULL the result is written there too, which saves the
 * caller a pass over memory. DST may be exactly one of the sources (same
 * address, in place) but must not otherwise overlap them; DST2 overlaps
 * nothing. DTYPE must be valid (see dpt__reduce_valid).
 */
void dpt__reduce(enum dpt_dtype dtype, void *dst, void *dst2,
		 const void *const *srcs, int nsrc, size_t n, unsigned divisor);

/* Whether DTYPE and OP name a reduction this backend performs: every
 * dtype with DPT_SUM and DPT_AVG, except the average of DPT_BOOL. */
int dpt__reduce_valid(enum dpt_dtype dtype, enum dpt_op op);

/* Why DTYPE and OP name no reduction, for a log message (a static
 * string), or NULL when they name one. The same rules as
 * dpt__reduce_valid. */
const char *dpt__reduce_refusal(enum dpt_dtype dtype, enum dpt_op op);

#endif

/*
 * libdptrain: ranks, collectives and sharded checkpoints for data-parallel
 * training programs started with `srun --dp-train`.
 */
#ifndef DPTRAIN_DPTRAIN_H
#define DPTRAIN_DPTRAIN_H

#include <stddef.h>
#include <stdint.h>

#include <dptrain/error.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types of collectives and checkpointed tensors. The numbers are
 * part of the wire and file formats: never renumber. */
enum dpt_dtype {
	DPT_FLOAT32 = 0,
	DPT_FLOAT64 = 1,
	DPT_BFLOAT16 = 2,
	DPT_FLOAT16 = 3,
	DPT_INT32 = 4,
	DPT_INT64 = 5,
	DPT_UINT8 = 6,
};

/* Reduction operations. DPT_AVG is the sum divided by the world size. */
enum dpt_op {
	DPT_SUM = 0,
	DPT_AVG = 1,
};

/*
 * dpt_dtype_size - bytes per element of DTYPE.
 * Returns 0 for an unknown dtype.
 */
DPT_EXPORT size_t dpt_dtype_size(enum dpt_dtype dtype);

/*
 * dpt_version - the library's version string ("0.1.0").
 * Returns a static string.
 */
DPT_EXPORT const char *dpt_version(void);

#ifdef __cplusplus
}
#endif
#endif

/*
 * The sizes of the public structs (<dptrain/dptrain.h>, "the ABI"): the
 * checks of the exported *_sized functions.
 */
#ifndef DPTRAIN_WORKER_ABI_H
#define DPTRAIN_WORKER_ABI_H

#include <stddef.h>

/* The size of TYPE up to and including FIELD: the size of the version of
 * a public struct whose last field was FIELD. Each struct's oldest
 * accepted size is written this way, so that appending a field leaves it
 * as it was. */
#define DPT__SIZE_THROUGH(type, field)                                         \
	(offsetof(type, field) + sizeof(((type *)0)->field))

/*
 * dpt__struct_in - copy the SIZE bytes of a caller's struct NAME at SRC
 * over DST, the library's (CUR bytes, holding the defaults of the fields
 * that an older caller lacks). SRC may be NULL (nothing is copied).
 * Returns 0, or DPT_EINVAL (logged with NAME and the sizes) when SIZE is
 * below MIN, the struct's first version, or above CUR.
 */
int dpt__struct_in(void *dst, size_t cur, const void *src, size_t size,
		   size_t min, const char *name);

/*
 * dpt__struct_out - copy the first SIZE bytes of the library's struct SRC
 * (CUR bytes) to the caller's DST. Checks and returns as dpt__struct_in;
 * DST may be NULL.
 */
int dpt__struct_out(void *dst, size_t size, const void *src, size_t cur,
		    size_t min, const char *name);

#endif

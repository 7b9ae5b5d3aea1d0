/*
 * A growable byte buffer with a hard cap, for strings, URLs and messages
 * built piece by piece (the idea of curl's dynbuf). Appends past the cap
 * fail with DPT_ETOOBIG and leave the buffer as it was.
 */
#ifndef DPT_COMMON_BUF_H
#define DPT_COMMON_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct dpt__buf {
	char *data; /* always NUL-terminated when non-NULL */
	size_t len;
	size_t cap; /* allocated bytes */
	size_t max; /* hard cap on len */
};

/* Embedded lifecycle: init sets an empty buffer, release frees it. */
void dpt__buf_init(struct dpt__buf *b, size_t max);
void dpt__buf_release(struct dpt__buf *b);
/* Empties the buffer and keeps its memory for reuse. */
void dpt__buf_reset(struct dpt__buf *b);
int dpt__buf_append(struct dpt__buf *b, const void *p, size_t n);
int dpt__buf_puts(struct dpt__buf *b, const char *s);
int dpt__buf_printf(struct dpt__buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Hands the string over to the caller, who frees it; the buffer is left
 * empty. Returns an empty allocated string for an empty buffer, NULL only
 * when out of memory. */
char *dpt__buf_steal(struct dpt__buf *b);

/*
 * Makes room for one more element in the array *ARR of N used and *CAP
 * allocated elements of SIZE bytes, doubling it (from 16) when full.
 * Returns 0 or DPT_ENOMEM (the array is unchanged).
 */
int dpt__array_room(void *arr, size_t n, size_t *cap, size_t size);

#endif

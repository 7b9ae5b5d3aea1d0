#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "assertion.h"
#include "buf.h"

/* What every function keeps true, and reserve's arithmetic relies on:
 * the string and its NUL fit in the allocation (none before the first
 * append), and the string is within the cap (else max - len wraps). */
static void check(const struct dpt__buf *b)
{
	DPT_ASSERT(b->len <= b->max);
	DPT_ASSERT(b->cap ? b->data && b->len < b->cap : b->len == 0);
}

void dpt__buf_init(struct dpt__buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

void dpt__buf_release(struct dpt__buf *b)
{
	free(b->data);
	dpt__buf_init(b, b->max);
}

void dpt__buf_reset(struct dpt__buf *b)
{
	check(b);
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

static int reserve(struct dpt__buf *b, size_t n)
{
	size_t need, cap;
	char *p;

	check(b);
	if (n > b->max - b->len)
		return DPT_ETOOBIG;
	need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p)
		return DPT_ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int dpt__buf_append(struct dpt__buf *b, const void *p, size_t n)
{
	int rc = reserve(b, n);
	if (rc)
		return rc;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	check(b);
	return 0;
}

int dpt__buf_puts(struct dpt__buf *b, const char *s)
{
	return dpt__buf_append(b, s, strlen(s));
}

int dpt__buf_printf(struct dpt__buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return DPT_EINVAL;
	rc = reserve(b, (size_t)n);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

char *dpt__buf_steal(struct dpt__buf *b)
{
	char *s = b->data ? b->data : strdup("");
	dpt__buf_init(b, b->max);
	return s;
}

int dpt__array_room(void *arr_p, size_t n, size_t *cap, size_t size)
{
	void **arr = arr_p;
	size_t c;
	void *v;

	DPT_ASSERT(n <= *cap);
	if (n < *cap)
		return 0;
	c = *cap ? 2 * *cap : 16;
	v = realloc(*arr, c * size);
	if (!v)
		return DPT_ENOMEM;
	*arr = v;
	*cap = c;
	return 0;
}

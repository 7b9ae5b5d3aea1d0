/*
 * One JSON object per line: see jsonl.h.
 */
#include "config.h"

#include <math.h>
#include <string.h>

#include <dptrain/error.h>

#include "jsonl.h"

int dpt__jsonl_begin(struct dpt__buf *b)
{
	dpt__buf_reset(b);
	return dpt__buf_puts(b, "{");
}

static int put_escaped(struct dpt__buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	int rc = dpt__buf_puts(b, "\"");

	for (const unsigned char *p = (const void *)s; !rc && *p; p++) {
		if (*p == '"' || *p == '\\') {
			char e[2] = {'\\', (char)*p};
			rc = dpt__buf_append(b, e, 2);
		} else if (*p < 0x20 || *p > 0x7e) {
			char e[6] = {'\\', 'u',		 '0',
				     '0',  hex[*p >> 4], hex[*p & 15]};
			rc = dpt__buf_append(b, e, 6);
		} else {
			rc = dpt__buf_append(b, p, 1);
		}
	}
	return rc ? rc : dpt__buf_puts(b, "\"");
}

/* The separator and the key: ,"KEY": (no comma after the opening brace). */
static int put_key(struct dpt__buf *b, const char *key)
{
	int rc = 0;

	if (b->len == 0 || b->data[b->len - 1] != '{')
		rc = dpt__buf_puts(b, ",");
	if (!rc)
		rc = put_escaped(b, key);
	return rc ? rc : dpt__buf_puts(b, ":");
}

int dpt__jsonl_str(struct dpt__buf *b, const char *key, const char *value)
{
	int rc = put_key(b, key);

	if (rc)
		return rc;
	return value ? put_escaped(b, value) : dpt__buf_puts(b, "null");
}

int dpt__jsonl_u64(struct dpt__buf *b, const char *key, uint64_t value)
{
	int rc = put_key(b, key);

	return rc ? rc : dpt__buf_printf(b, "%llu", (unsigned long long)value);
}

int dpt__jsonl_i64(struct dpt__buf *b, const char *key, int64_t value)
{
	int rc = put_key(b, key);

	return rc ? rc : dpt__buf_printf(b, "%lld", (long long)value);
}

int dpt__jsonl_num(struct dpt__buf *b, const char *key, double value,
		   int decimals)
{
	int rc = put_key(b, key);

	if (rc)
		return rc;
	if (!isfinite(value))
		return dpt__buf_puts(b, "null");
	if (decimals < 0 || decimals > 9)
		decimals = 3;
	return dpt__buf_printf(b, "%.*f", decimals, value);
}

int dpt__jsonl_real(struct dpt__buf *b, const char *key, double value)
{
	int rc = put_key(b, key);

	if (rc)
		return rc;
	return isfinite(value) ? dpt__buf_printf(b, "%.9g", value)
			       : dpt__buf_puts(b, "null");
}

int dpt__jsonl_null(struct dpt__buf *b, const char *key)
{
	int rc = put_key(b, key);

	return rc ? rc : dpt__buf_puts(b, "null");
}

int dpt__jsonl_open(struct dpt__buf *b, const char *key)
{
	int rc = put_key(b, key);

	return rc ? rc : dpt__buf_puts(b, "{");
}

int dpt__jsonl_close(struct dpt__buf *b)
{
	return dpt__buf_puts(b, "}");
}

int dpt__jsonl_end(struct dpt__buf *b)
{
	return dpt__buf_puts(b, "}\n");
}

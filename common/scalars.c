/*
 * Logged scalars and progress: see scalars.h.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "scalars.h"
#include "wire.h"

int dpt__scalars_name_ok(const char *name)
{
	size_t n = 0;

	if (!name)
		return 0;
	for (const char *p = name; *p; p++, n++) {
		char c = *p;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-'))
			return 0;
	}
	return n >= 1 && n <= DPT_SCALARS_NAME_MAX;
}

int dpt__scalars_record(struct dpt__buf *b, uint64_t step, size_t n,
			const char *const names[], const double values[])
{
	size_t start = b->len;
	int rc;

	if (n == 0 || n > DPT_SCALARS_MAX || !names || !values)
		return DPT_EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!dpt__scalars_name_ok(names[i]))
			return DPT_EINVAL;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(names[i], names[j]))
				return DPT_EINVAL;
	}
	rc = dpt__buf_printf(b, "%" PRIu64, step);
	/* %.9g: a float32 round-trips, a double nearly; the events are a
	 * story, not the training's state. */
	for (size_t i = 0; !rc && i < n; i++)
		rc = isfinite(values[i])
			     ? dpt__buf_printf(b, " %s=%.9g", names[i],
					       values[i])
			     : dpt__buf_printf(b, " %s=nan", names[i]);
	if (!rc)
		rc = dpt__buf_puts(b, ";");
	if (!rc && b->len - start > DPT_KV_VALUE_MAX)
		rc = DPT_ETOOBIG;
	if (rc) {
		b->len = start;
		if (b->data)
			b->data[start] = '\0';
	}
	return rc;
}

size_t dpt__scalars_pack(const char *text, size_t len, size_t *off, char *out,
			 size_t size)
{
	size_t used = 0;

	if (size)
		out[0] = '\0';
	while (*off < len) {
		const char *nl = memchr(text + *off, ';', len - *off);
		size_t n = nl ? (size_t)(nl - (text + *off)) + 1 : len - *off;

		if (n + 1 > size) {
			/* Can never fit: skip it rather than stall. */
			*off += n;
			continue;
		}
		if (used + n + 1 > size)
			break;
		memcpy(out + used, text + *off, n);
		used += n;
		out[used] = '\0';
		*off += n;
	}
	return used;
}

int dpt__scalars_parse(const char *line, size_t len, struct dpt__scalars *out)
{
	char buf[DPT_KV_VALUE_MAX + 1], *p, *end;
	unsigned long long step;

	memset(out, 0, sizeof(*out));
	while (len && line[len - 1] == ';')
		len--;
	if (len == 0 || len >= sizeof(buf))
		return DPT_EPROTO;
	memcpy(buf, line, len);
	buf[len] = '\0';
	if (buf[0] < '0' || buf[0] > '9')
		return DPT_EPROTO;
	errno = 0;
	step = strtoull(buf, &end, 10);
	if (errno || (*end != ' ' && *end != '\0'))
		return DPT_EPROTO;
	out->step = step;
	/* " NAME=VALUE" pairs, one space before each. */
	for (p = end; *p;) {
		char *eq, *vend, *sp;
		double v;

		if (*p++ != ' ' || out->n == DPT_SCALARS_MAX)
			return DPT_EPROTO;
		sp = strchr(p, ' ');
		if (sp)
			*sp = '\0';
		eq = strchr(p, '=');
		if (!eq)
			return DPT_EPROTO;
		*eq = '\0';
		if (!dpt__scalars_name_ok(p))
			return DPT_EPROTO;
		if (!strcmp(eq + 1, "nan")) {
			v = NAN;
		} else {
			errno = 0;
			v = strtod(eq + 1, &vend);
			if (vend == eq + 1 || *vend || !isfinite(v))
				return DPT_EPROTO;
		}
		for (size_t j = 0; j < out->n; j++)
			if (!strcmp(out->names[j], p))
				return DPT_EPROTO;
		snprintf(out->names[out->n], sizeof(out->names[0]), "%s", p);
		out->values[out->n++] = v;
		/* The next pair starts at the space cut above. */
		if (sp) {
			*sp = ' ';
			p = sp;
		} else {
			p = eq + 1 + strlen(eq + 1);
		}
	}
	return out->n ? 0 : DPT_EPROTO;
}

void dpt__progress_bar(char *out, size_t size, uint64_t step, uint64_t total,
		       int width)
{
	double frac;
	int full, pct;
	size_t o = 0;

	if (!size)
		return;
	out[0] = '\0';
	if (!total || width <= 0 || (size_t)width + 8 > size)
		return;
	frac = step >= total ? 1.0 : (double)step / (double)total;
	full = (int)(frac * width);
	pct = (int)(frac * 100.0);
	out[o++] = '[';
	for (int i = 0; i < width; i++)
		out[o++] = i < full ? '#' : '.';
	snprintf(out + o, size - o, "] %3d%%", pct);
}

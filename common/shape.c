#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <dptrain/error.h>

#include "parse.h"
#include "shape.h"

long dpt__shape_world(const struct dpt__shape *s)
{
	return s->nodes * (s->gpus ? s->gpus : s->tasks);
}

static int refuse(char *err, size_t size, const char *shape, int len,
		  const char *why)
{
	snprintf(err, size, "'%.*s' %s: write %s", len, shape, why,
		 DPT_SHAPE_FORMS);
	return DPT_EINVAL;
}

/* A count of a shape, "N" or "LO-HI" in [LO_OK, HI_OK]; a missing or bad
 * one is refused by the caller, with the text it names. */
static int count(const char *s, size_t len, long lo_ok, long hi_ok, long *lo,
		 long *hi)
{
	char buf[48];

	if (len == 0 || len >= sizeof(buf))
		return DPT_EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	return dpt__parse_range(buf, lo_ok, hi_ok, lo, hi);
}

/* One shape of LEN bytes at S. */
static int parse_one(const char *s, int len, struct dpt__shape_range *r,
		     char *err, size_t size)
{
	const char *x = memchr(s, 'x', len);
	const char *colon = memchr(s, ':', len);
	const char *gpus_end = colon ? colon : s + len;

	if (!x || x > gpus_end)
		return refuse(err, size, s, len,
			      "has no 'x' between nodes and GPUs");
	if (count(s, x - s, 1, DPT_MAX_NODES, &r->nodes_lo, &r->nodes_hi))
		return refuse(err, size, s, len,
			      "has no node count from 1 to 1000000 (LO <= HI)");
	if (count(x + 1, gpus_end - x - 1, 0, DPT_SHAPE_MAX_GPUS, &r->gpus_lo,
		  &r->gpus_hi))
		return refuse(
			err, size, s, len,
			"has no GPU count from 0 to 64 a node (LO <= HI)");
	r->tasks = 0;
	if (r->gpus_hi == 0) {
		long hi;

		if (!colon ||
		    count(colon + 1, s + len - colon - 1, 1,
			  DPT_SHAPE_MAX_TASKS, &r->tasks, &hi) ||
		    hi != r->tasks)
			return refuse(err, size, s, len,
				      "is a CPU shape without its tasks a node "
				      "(:TASKS, 1 to 1024)");
	} else if (colon) {
		return refuse(err, size, s, len,
			      "gives tasks to a GPU shape (one task a GPU)");
	} else if (r->gpus_lo == 0) {
		return refuse(err, size, s, len, "mixes 0 GPUs with GPUs");
	}
	return 0;
}

int dpt__shapes_parse(const char *text, struct dpt__shapes *out, char *err,
		      size_t size)
{
	const char *p = text;

	out->n = 0;
	if (!text || !*text) {
		snprintf(err, size, "an empty list of shapes: write %s",
			 DPT_SHAPE_FORMS);
		return DPT_EINVAL;
	}
	for (;;) {
		const char *comma = strchr(p, ',');
		int len = comma ? (int)(comma - p) : (int)strlen(p);
		int rc;

		if (out->n == DPT_SHAPES_MAX) {
			snprintf(err, size,
				 "more than %d shapes: a range "
				 "(1-4x8) says several at once",
				 DPT_SHAPES_MAX);
			return DPT_EINVAL;
		}
		if (len == 0)
			return refuse(err, size, text, (int)strlen(text),
				      "has an empty shape");
		rc = parse_one(p, len, &out->r[out->n], err, size);
		if (rc)
			return rc;
		out->n++;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

static int has(const struct dpt__shape *out, int n, const struct dpt__shape *s)
{
	for (int i = 0; i < n; i++)
		if (out[i].nodes == s->nodes && out[i].gpus == s->gpus &&
		    out[i].tasks == s->tasks)
			return 1;
	return 0;
}

int dpt__shapes_expand(const struct dpt__shapes *list, long global_batch,
		       struct dpt__shape *out, int max)
{
	int n = 0;

	for (int i = 0; i < list->n; i++) {
		const struct dpt__shape_range *r = &list->r[i];

		for (long nodes = r->nodes_lo; nodes <= r->nodes_hi; nodes++)
			for (long g = r->gpus_lo; g <= r->gpus_hi; g++) {
				struct dpt__shape s = {nodes, g, r->tasks};
				long world = dpt__shape_world(&s);

				if (n == max)
					return n;
				/* Worlds only grow from here on. */
				if (global_batch > 0 && world > global_batch)
					break;
				if (global_batch > 0 && global_batch % world)
					continue;
				if (!has(out, n, &s))
					out[n++] = s;
			}
	}
	return n;
}

long dpt__shape_batch(long user, uint64_t program)
{
	uint64_t a = user > 0 ? (uint64_t)user : 0, b = program;

	while (b) {
		uint64_t r = a % b;

		a = b;
		b = r;
	}
	return a > LONG_MAX ? LONG_MAX : (long)a;
}

const char *dpt__shape_format(const struct dpt__shape *s, char *buf,
			      size_t size)
{
	long per = s->gpus ? s->gpus : s->tasks;
	const char *what = s->gpus ? "GPU" : "task";

	snprintf(buf, size, "%ld node%s x %ld %s%s", s->nodes,
		 s->nodes == 1 ? "" : "s", per, what, per == 1 ? "" : "s");
	return buf;
}

const char *dpt__shape_spec(const struct dpt__shape *s, char *buf, size_t size)
{
	if (s->gpus)
		snprintf(buf, size, "%ldx%ld", s->nodes, s->gpus);
	else
		snprintf(buf, size, "%ldx0:%ld", s->nodes, s->tasks);
	return buf;
}

bool dpt__shape_equal(const struct dpt__shape *a, const struct dpt__shape *b)
{
	return a->nodes == b->nodes && a->gpus == b->gpus &&
	       (a->gpus || a->tasks == b->tasks);
}

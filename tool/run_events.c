/*
 * A run's events as lines, from its storage (doc/checkpoint-format.md,
 * "Layout"): events.jsonl, then the objects of events/ in key order. Read
 * by `dptrain status` and by the coordinator that chooses a requeued job's
 * size from them (doc/shapes.md).
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "run_events.h"
#include "storage/storage.h"

/* The largest events object read whole. Events are not a manifest
 * (DPT__CKPT_MANIFEST_MAX): file://'s events.jsonl of a run that logs
 * every step grows by 4 MB an hour (doc/checkpoint-format.md, "Fields"),
 * so this holds some 60 hours of it; S3's objects end at 4 MiB. */
#define EVENTS_OBJECT_MAX (256u << 20)

struct read_ctx {
	struct dpt__storage *st;
	dpt__events_line_fn *fn;
	void *arg;
	size_t lines;
	int rc;
};

static void each_line(struct read_ctx *c, const char *text, size_t len)
{
	size_t off = 0;

	while (off < len) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;

		if (n) {
			c->fn(c->arg, text + off, n);
			c->lines++;
		}
		off += n + 1;
	}
}

static int read_object(struct read_ctx *c, const char *key, uint64_t size)
{
	char *buf;
	int rc;

	if (size > EVENTS_OBJECT_MAX)
		return DPT_ETOOBIG;
	buf = malloc(size ? size : 1);
	if (!buf)
		return DPT_ENOMEM;
	rc = dpt__storage_read(c->st, key, 0, size, buf);
	if (!rc)
		each_line(c, buf, size);
	free(buf);
	return rc;
}

static int read_one(void *arg, const char *key, uint64_t size)
{
	struct read_ctx *c = arg;
	size_t n = strlen(key);

	if (n < 6 || strcmp(key + n - 6, ".jsonl"))
		return 0;
	c->rc = read_object(c, key, size);
	return 0;
}

int dpt__run_events_each(const char *uri, dpt__events_line_fn *fn, void *arg)
{
	struct dpt__storage_opts so;
	struct read_ctx c = {.fn = fn, .arg = arg};
	uint64_t size;
	int rc;

	dpt__storage_opts_init(&so);
	so.no_create = true;
	rc = dpt__storage_open(uri, &so, &c.st);
	if (rc)
		return rc;
	rc = dpt__storage_stat(c.st, "events.jsonl", &size);
	if (!rc)
		rc = read_object(&c, "events.jsonl", size);
	else if (rc == DPT_ENOENT)
		rc = 0;
	if (!rc)
		rc = dpt__storage_list(c.st, "events/", read_one, &c);
	dpt__storage_destroy(&c.st);
	if (!rc && !c.lines)
		rc = DPT_ENOENT;
	return rc;
}

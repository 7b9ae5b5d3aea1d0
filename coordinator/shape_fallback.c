#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>

#include "log.h"
#include "parse.h"
#include "shape_fallback.h"
#include "shape_slurm.h"

/* The Comment's words that the coordinator writes and reads back: the
 * grow's, naming its fallback job, and the fallback job's. */
#define NAMED "; fallback job "
#define FELL  "dptrain: fell back to "

/* "14:21" of T into BUF. */
static const char *clock_of(time_t t, char *buf, size_t size)
{
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, size, "%H:%M", &tm);
	return buf;
}

uint32_t dpt__shape_fallback_submit(uint32_t job_id, uint32_t restarts,
				    struct dpt__shape_plan *p)
{
	struct dpt__shape_job job;
	char exe[PATH_MAX], script[PATH_MAX + 256], comment[160], from[32],
		to[32], c[64], by[16], why[256];
	time_t begin = time(NULL) + DPT_SHAPE_FALLBACK_S;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	uint32_t id = 0;
	size_t len = strlen(p->msg);

	if (n <= 0 || memchr(exe, '\'', (size_t)n)) {
		dpt__warn("no fallback job: cannot name this program for it");
		return 0;
	}
	exe[n] = '\0';
	if (dpt__shape_job_read(job_id, &job, why, sizeof(why))) {
		dpt__warn("no fallback job: %s", why);
		return 0;
	}
	snprintf(script, sizeof(script),
		 "#!/bin/sh\n"
		 "# dptrain: job %u's fallback (doc/shapes.md)\n"
		 "exec '%s' fallback %u %u %s %s\n",
		 job_id, exe, job_id, restarts,
		 dpt__shape_spec(&job.shape, from, sizeof(from)),
		 dpt__shape_spec(&p->shape, to, sizeof(to)));
	dpt__shape_format(&job.shape, c, sizeof(c));
	snprintf(comment, sizeof(comment),
		 "dptrain: sets job %u back to %s if it has not started",
		 job_id, c);
	if (dpt__shape_submit(job_id, "dptrain-fallback", script, comment,
			      begin, &id, why, sizeof(why))) {
		dpt__warn("no fallback job: %s", why);
		return 0;
	}
	snprintf(p->msg + len, sizeof(p->msg) - len,
		 NAMED "%u sets it back to %s if it has not started by %s", id,
		 c, clock_of(begin, by, sizeof(by)));
	return id;
}

void dpt__shape_fallback_seen(uint32_t job_id, struct dpt__shape_plan *p)
{
	struct dpt__shape_job job;
	const char *named;
	char text[sizeof(job.comment) + 64], at[16], why[256], *end;
	unsigned long id;

	*p = (struct dpt__shape_plan){0};
	if (dpt__shape_job_read(job_id, &job, why, sizeof(why))) {
		dpt__warn("%s", why);
		return;
	}
	named = strstr(job.comment, NAMED);
	if (named) {
		named += strlen(NAMED);
		id = strtoul(named, &end, 10);
		if (end != named && id > 0 && id <= UINT32_MAX)
			dpt__shape_cancel((uint32_t)id);
	}
	if (strncmp(job.comment, FELL, strlen(FELL)) != 0)
		return;
	p->chosen = p->changed = true;
	p->shape = job.shape;
	snprintf(p->msg, sizeof(p->msg), "%s",
		 job.comment + strlen("dptrain: "));
	snprintf(text, sizeof(text),
		 "dptrain: started at %s after the fallback: %s",
		 clock_of(time(NULL), at, sizeof(at)), p->msg);
	if (dpt__job_comment(job_id, text, why, sizeof(why)))
		dpt__warn("%s", why);
}

/* A shape of the command line, as the `shape` event writes it. */
static int shape_arg(const char *text, struct dpt__shape *s)
{
	struct dpt__shapes list;
	char err[128];

	return dpt__shapes_parse(text, &list, err, sizeof(err)) ||
	       dpt__shapes_expand(&list, 0, s, 1) != 1;
}

int dpt__shape_fallback_main(int argc, char **argv)
{
	struct dpt__shape from, to;
	struct dpt__shape_job job;
	char comment[sizeof(job.comment)], f[64], t[64], by[16], why[256];
	long id, restarts;

	if (argc != 5 || dpt__parse_long(argv[1], 1, UINT32_MAX, &id) ||
	    dpt__parse_long(argv[2], 0, UINT16_MAX, &restarts) ||
	    shape_arg(argv[3], &from) || shape_arg(argv[4], &to)) {
		fprintf(stderr, "usage: dptrain-coordinator fallback JOB "
				"RESTARTS FROM TO (run by a grow's fallback "
				"job, dptrain-coordinator(1))\n");
		return 2;
	}
	slurm_init(NULL);
	if (dpt__shape_job_read((uint32_t)id, &job, why, sizeof(why))) {
		dpt__error("%s", why);
		return 1;
	}
	if (!job.pending || job.restarts != (uint32_t)restarts ||
	    !dpt__shape_equal(&job.shape, &to)) {
		printf("job %ld started or changed since the grow: nothing to "
		       "do\n",
		       id);
		return 0;
	}
	dpt__shape_format(&from, f, sizeof(f));
	snprintf(comment, sizeof(comment),
		 FELL "%s: %s had not started by %s, though Slurm had said at "
		      "the grow that it could start at once",
		 f, dpt__shape_format(&to, t, sizeof(t)),
		 clock_of(time(NULL), by, sizeof(by)));
	if (dpt__shape_update((uint32_t)id, &from, comment, why, sizeof(why))) {
		dpt__error("job %ld waits at %s: %s", id, t, why);
		snprintf(comment, sizeof(comment),
			 "dptrain: cannot fall back to %s: %s", f, why);
		(void)dpt__job_comment((uint32_t)id, comment, why, sizeof(why));
		return 1;
	}
	printf("job %ld %s\n", id, comment + strlen("dptrain: "));
	return 0;
}

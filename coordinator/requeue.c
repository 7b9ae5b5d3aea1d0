#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"
#include "requeue.h"

/* VALUE as a step number, or -1 (absent, "none", not a number). The
 * step of a report: "STEP", or "STEP BYTES MS" (dptrain.committed
 * since the run's events, doc/checkpoint-format.md). */
static long step_of(const char *value)
{
	char first[24];
	size_t n;
	long step;

	if (!value)
		return -1;
	n = strcspn(value, " ");
	if (n >= sizeof(first))
		return -1;
	memcpy(first, value, n);
	first[n] = '\0';
	if (dpt__parse_long(first, 0, LONG_MAX, &step))
		return -1;
	return step;
}

enum dpt__requeue_verdict
dpt__requeue_decide(const struct dpt__requeue_facts *f, char *msg, size_t size)
{
	long resumed = step_of(f->resumed);
	long committed = step_of(f->committed);
	long last = committed > resumed ? committed : resumed;
	char good[48], onto[64] = "", after[64] = "";

	if (last >= 0)
		snprintf(good, sizeof(good), "step %ld", last);
	else
		snprintf(good, sizeof(good), "unknown here (dptrain ckpt ls)");

	if (f->max_requeues >= 0 && f->restart_count >= f->max_requeues) {
		snprintf(msg, size,
			 "not requeueing job %u: it was requeued %ld times, "
			 "--dp-max-requeues=%ld; the last committed step is "
			 "%s: submit the job again to go on",
			 f->job_id, f->restart_count, f->max_requeues, good);
		return DPT_RQ_CAPPED;
	}
	/* The library said what it loaded and committed nothing newer: the
	 * next run would start from the same step and stop the same way. A
	 * program that does not report (no dptrain checkpoints) is bounded
	 * by the cap alone. */
	if (f->resumed && committed <= resumed) {
		char from[96] =
			"started without a checkpoint and committed none";
		char last_good[48] = "";

		if (resumed >= 0) {
			snprintf(from, sizeof(from),
				 "resumed from step %ld and committed no newer "
				 "step",
				 resumed);
			snprintf(last_good, sizeof(last_good),
				 "; the last good step is %ld", resumed);
		}
		snprintf(msg, size,
			 "holding job %u: this run %s, so a requeue would "
			 "loop%s: fix the cause, then scontrol release %u",
			 f->job_id, from, last_good, f->job_id);
		return DPT_RQ_HOLD;
	}
	if (f->nodes_min > 0 && f->nodes_min < f->nodes_max)
		snprintf(onto, sizeof(onto), " onto %ld-%ld nodes",
			 f->nodes_min, f->nodes_max);
	else if (f->nodes_min > 0)
		snprintf(onto, sizeof(onto), " onto %ld node%s", f->nodes_min,
			 f->nodes_min == 1 ? "" : "s");
	if (committed >= 0)
		snprintf(after, sizeof(after), " after step %ld (committed)",
			 committed);
	snprintf(msg, size,
		 "requeueing job %u%s%s: it resumes from %s; the line "
		 "\"slurmstepd: error: *** JOB %u ... CANCELLED ... DUE TO JOB "
		 "REQUEUE ***\" that follows is expected",
		 f->job_id, after, onto,
		 committed >= 0 ? "there" : "its last checkpoint", f->job_id);
	return DPT_RQ_REQUEUE;
}

#include "config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <dptrain/error.h>

#include "log.h"
#include "run_events.h"
#include "run_rates.h"
#include "shape_choice.h"
#include "shape_requeue.h"
#include "shape_slurm.h"

static void fold(void *arg, const char *line, size_t len)
{
	struct dpt__event_line l;

	if (dpt__event_line_parse(&l, line, len))
		return;
	dpt__run_rates_add(arg, &l);
	dpt__event_line_release(&l);
}

/* The index of CUR among SHAPES, or -1. */
static int find(const struct dpt__shape *shapes, int n,
		const struct dpt__shape *cur)
{
	for (int i = 0; i < n; i++)
		if (shapes[i].nodes == cur->nodes &&
		    shapes[i].gpus == cur->gpus &&
		    (cur->gpus || shapes[i].tasks == cur->tasks))
			return i;
	return -1;
}

int dpt__shape_plan(const struct dpt__shape_requeue_in *in,
		    struct dpt__shape_plan *p)
{
	struct dpt__shape shapes[DPT_SHAPES_CONCRETE_MAX], cur;
	struct dpt__shape_estimate est[DPT_SHAPES_CONCRETE_MAX];
	double start_in[DPT_SHAPES_CONCRETE_MAX];
	struct dpt__rate rates[DPT_RUN_RATES_MAX];
	struct dpt__run_rates rr;
	struct dpt__shape_facts f = {.shapes = shapes,
				     .start_in = start_in,
				     .rates = rates,
				     .work = -1};
	char why[256], name[64];
	time_t now = time(NULL);
	long limit = 0;
	int chosen, rc;

	f.n = dpt__shapes_expand(in->shapes, 0, shapes,
				 DPT_SHAPES_CONCRETE_MAX);
	p->chosen = false;
	if (dpt__shape_of_job(in->job_id, &cur, &limit, why, sizeof(why))) {
		snprintf(p->msg, sizeof(p->msg), "keeps its request: %s", why);
		return -1;
	}
	f.current = find(shapes, f.n, &cur);
	dpt__run_rates_init(&rr);
	if (in->run_uri && (rc = dpt__run_events_each(in->run_uri, fold, &rr)))
		dpt__info("no speed measured: the run's events: %s",
			  dpt_strerror(rc));
	f.nrates = dpt__run_rates_get(&rr, rates, DPT_RUN_RATES_MAX);
	f.efficiency = in->efficiency;
	f.restart_s = rr.restart_s;
	f.limit_s = limit > in->grace ? (double)(limit - in->grace) : 0;
	if (rr.total_steps && in->committed >= 0 &&
	    (uint64_t)in->committed < rr.total_steps)
		f.work = (double)(rr.total_steps - (uint64_t)in->committed);
	for (int i = 0; i < f.n; i++)
		if (dpt__shape_will_run(in->job_id, &shapes[i], now,
					&start_in[i], why, sizeof(why))) {
			start_in[i] = -1;
			dpt__info("%s left out: %s",
				  dpt__shape_format(&shapes[i], name,
						    sizeof(name)),
				  why);
		}
	chosen = dpt__shape_choose(&f, est);
	dpt__shape_verdict(&f, est, chosen, now, p->msg, sizeof(p->msg));
	if (chosen < 0)
		return -1;
	p->chosen = true;
	p->shape = shapes[chosen];
	return 0;
}

int dpt__shape_apply(uint32_t job_id, struct dpt__shape_plan *p)
{
	char comment[sizeof(p->msg) + 16], why[256];

	if (!p->chosen)
		return -1;
	snprintf(comment, sizeof(comment), "dptrain: %s", p->msg);
	if (dpt__shape_update(job_id, &p->shape, comment, why, sizeof(why))) {
		snprintf(p->msg, sizeof(p->msg), "keeps its request: %s", why);
		return -1;
	}
	return 0;
}

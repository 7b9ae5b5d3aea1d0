#include "config.h"

#include <math.h>
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

/* What a decision reads: the shapes, the job's, the run's events, and
 * Slurm's estimates (filled by the caller). */
struct facts {
	struct dpt__shape shapes[DPT_SHAPES_CONCRETE_MAX], cur;
	double start_in[DPT_SHAPES_CONCRETE_MAX];
	struct dpt__shape_estimate est[DPT_SHAPES_CONCRETE_MAX];
	struct dpt__rate rates[DPT_RUN_RATES_MAX];
	struct dpt__run_rates rr;
	struct dpt__shape_facts f;
};

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
		if (dpt__shape_equal(&shapes[i], cur))
			return i;
	return -1;
}

/* Gather IN's facts into X, the steps left counted from the step IN's
 * job resumed from, or, while it RUNS, from the newest step its events
 * reached. Returns 0, or -1 with why the job keeps its request in MSG. */
static int gather(const struct dpt__shape_requeue_in *in, bool runs,
		  struct facts *x, char *msg, size_t size)
{
	int64_t step;
	struct dpt__shape_facts *f = &x->f;
	struct dpt__shape_job job;
	char why[256];
	int rc;

	*f = (struct dpt__shape_facts){.shapes = x->shapes,
				       .start_in = x->start_in,
				       .rates = x->rates,
				       .efficiency = in->efficiency,
				       .work = -1};
	if (dpt__shape_job_read(in->job_id, &job, why, sizeof(why))) {
		snprintf(msg, size, "keeps its request: %s", why);
		return -1;
	}
	x->cur = job.shape;
	dpt__run_rates_init(&x->rr);
	if (in->run_uri &&
	    (rc = dpt__run_events_each(in->run_uri, fold, &x->rr)))
		dpt__info("no speed measured: the run's events: %s",
			  dpt_strerror(rc));
	/* Worlds that divide the user's global batch and the program's. */
	f->n = dpt__shapes_expand(
		in->shapes,
		dpt__shape_batch(in->global_batch, x->rr.global_batch),
		x->shapes, DPT_SHAPES_CONCRETE_MAX);
	f->current = find(x->shapes, f->n, &x->cur);
	f->nrates = dpt__run_rates_get(&x->rr, x->rates, DPT_RUN_RATES_MAX);
	/* A restart measured, else this run's start and Slurm's part. */
	f->restart_s = x->rr.restart_s > 0 ? x->rr.restart_s
		       : x->rr.startup_s > 0
			       ? x->rr.startup_s + DPT_SHAPE_REQUEUE_S
			       : 0;
	f->limit_s =
		job.limit_s > in->grace ? (double)(job.limit_s - in->grace) : 0;
	f->running = runs;
	step = runs ? x->rr.step : in->committed;
	if (x->rr.total_steps && step >= 0 &&
	    (uint64_t)step < x->rr.total_steps)
		f->work = (double)(x->rr.total_steps - (uint64_t)step);
	for (int i = 0; i < f->n; i++)
		x->start_in[i] = -1;
	return 0;
}

/* Slurm's estimate for shape I placed WHERE (S its request), into X;
 * left out, and said, when there is none. */
static void estimate(const struct dpt__shape_requeue_in *in, struct facts *x,
		     int i, const struct dpt__shape *s,
		     enum dpt__shape_where where, time_t now)
{
	char why[256], name[64];

	if (dpt__shape_will_run(in->job_id, s, where, now, &x->start_in[i], why,
				sizeof(why))) {
		x->start_in[i] = -1;
		dpt__info("%s left out: %s",
			  dpt__shape_format(&x->shapes[i], name, sizeof(name)),
			  why);
	}
}

/* Seconds since the run's last size change at NOW: min_shape_interval
 * bounds the next. The first change has no interval to wait: a start, a
 * walltime's requeue are no changes. */
static double since_change(const struct dpt__run_rates *rr, time_t now)
{
	return rr->t_shape_change > 0 ? (double)now - rr->t_shape_change
				      : HUGE_VAL;
}

int dpt__shape_plan(const struct dpt__shape_requeue_in *in,
		    struct dpt__shape_plan *p)
{
	struct facts x;
	time_t now = time(NULL);
	struct dpt__shape_bounds b = {
		.min_interval_s = in->min_interval_s,
		.max_changes = in->max_changes,
	};
	char why[sizeof(p->msg) - 32];
	int chosen;

	p->chosen = p->changed = false;
	if (gather(in, false, &x, p->msg, sizeof(p->msg)))
		return -1;
	b.changes = x.rr.shape_changes;
	b.since_change_s = since_change(&x.rr, now);
	if (dpt__shape_bounded(&b, why, sizeof(why))) {
		snprintf(p->msg, sizeof(p->msg), "keeps its request: %s", why);
		return -1;
	}
	for (int i = 0; i < x.f.n; i++)
		estimate(in, &x, i, &x.shapes[i], DPT_SHAPE_ANYWHERE, now);
	chosen = dpt__shape_choose(&x.f, x.est);
	dpt__shape_verdict(&x.f, x.est, chosen, now, p->msg, sizeof(p->msg));
	if (chosen < 0)
		return -1;
	p->chosen = true;
	p->changed = chosen != x.f.current;
	p->shape = x.shapes[chosen];
	return 0;
}

/* The extra that turns the running job's shape C into the larger L, and
 * where it must fit: more nodes of the same size on other nodes, or more
 * GPUs (tasks) on its one node. -1: L is not such a grow, which a query
 * cannot answer while the job holds its resources. */
static int extra(const struct dpt__shape *c, const struct dpt__shape *l,
		 struct dpt__shape *x, enum dpt__shape_where *where)
{
	*x = *l;
	if (l->nodes > c->nodes && l->gpus == c->gpus &&
	    (c->gpus || l->tasks == c->tasks)) {
		x->nodes = l->nodes - c->nodes;
		*where = DPT_SHAPE_OTHER_NODES;
		return 0;
	}
	if (l->nodes == 1 && c->nodes == 1 && c->gpus && l->gpus > c->gpus) {
		x->gpus = l->gpus - c->gpus;
		*where = DPT_SHAPE_ITS_NODES;
		return 0;
	}
	if (l->nodes == 1 && c->nodes == 1 && !c->gpus && !l->gpus &&
	    l->tasks > c->tasks) {
		x->tasks = l->tasks - c->tasks;
		*where = DPT_SHAPE_ITS_NODES;
		return 0;
	}
	return -1;
}

int dpt__shape_grow_check(const struct dpt__shape_grow_in *in,
			  struct dpt__shape_plan *p)
{
	struct facts x;
	struct dpt__shape_bounds b = {
		.margin = in->margin,
		.min_interval_s = in->rq.min_interval_s,
		.max_changes = in->rq.max_changes,
	};
	time_t now = time(NULL);
	enum dpt__shape_where where;
	struct dpt__shape more;
	int to;

	p->chosen = p->changed = false;
	if (gather(&in->rq, true, &x, p->msg, sizeof(p->msg)))
		return -1;
	if (x.f.current < 0) {
		snprintf(p->msg, sizeof(p->msg),
			 "its shape is none of --shapes");
		return -1;
	}
	b.changes = x.rr.shape_changes;
	b.since_change_s = since_change(&x.rr, now);
	for (int i = 0; i < x.f.n; i++)
		if (dpt__shape_world(&x.shapes[i]) > dpt__shape_world(&x.cur) &&
		    !extra(&x.cur, &x.shapes[i], &more, &where))
			estimate(&in->rq, &x, i, &more, where, now);
	to = dpt__shape_grow(&x.f, &b, x.est, p->msg, sizeof(p->msg));
	if (to < 0)
		return -1;
	dpt__shape_grow_verdict(&x.f, x.est, to, now, p->msg, sizeof(p->msg));
	p->chosen = p->changed = true;
	p->shape = x.shapes[to];
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
		p->chosen = p->changed = false;
		return -1;
	}
	return 0;
}

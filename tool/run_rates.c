#include "config.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "run_rates.h"

void dpt__run_rates_init(struct dpt__run_rates *r)
{
	memset(r, 0, sizeof(*r));
	r->step = -1;
}

/* Add the segment's steps and seconds to its world's, into R's table. */
static void account(struct dpt__run_rates *r, long world, double steps,
		    double seconds)
{
	int i;

	for (i = 0; i < r->n && r->w[i].world != world; i++)
		;
	if (i == r->n) {
		if (r->n == DPT_RUN_RATES_MAX)
			return;
		r->w[r->n++].world = world;
	}
	r->w[i].steps += steps;
	r->w[i].seconds += seconds;
}

static bool segment_counts(const struct dpt__run_rates *r)
{
	return r->world > 0 && r->has_point && r->s_last > r->s_first &&
	       r->t_last - r->t_first >= DPT_RUN_RATES_MIN_S;
}

static void close_segment(struct dpt__run_rates *r)
{
	if (segment_counts(r))
		account(r, r->world, (double)(r->s_last - r->s_first),
			r->t_last - r->t_first);
	r->world = 0;
	r->has_point = false;
}

static void progress(struct dpt__run_rates *r, int64_t step, double t)
{
	if (r->t_start > 0) { /* the first step after a restart */
		r->restart_s = (r->t_down - r->t_stop) + (t - r->t_start);
		r->t_stop = r->t_start = 0;
	}
	if (r->t_begin > 0) {
		r->startup_s = t - r->t_begin;
		r->t_begin = 0;
	}
	if (step > r->step)
		r->step = step;
	if (r->world <= 0 || step < 0)
		return;
	if (!r->has_point) {
		r->s_first = r->s_last = step;
		r->t_first = r->t_last = t;
		r->has_point = true;
	} else if (step > r->s_last) {
		/* A commit line may come after the logs of later steps. */
		r->s_last = step;
		r->t_last = t;
	}
}

/* A `shape` line: a change of size counts when the request changed. */
static void shape_line(struct dpt__run_rates *r,
		       const struct dpt__event_line *l, double t)
{
	const char *reason = dpt__event_str(l, DPT_EVF_REASON);
	const char *why = dpt__event_str(l, DPT_EVF_WHY);

	if (reason && (!strcmp(reason, "changed") || !strcmp(reason, "grow") ||
		       !strcmp(reason, "fallback"))) {
		r->shape_changes++;
		r->t_shape_change = t;
	}
	if (why)
		snprintf(r->shape_why, sizeof(r->shape_why), "%s", why);
}

void dpt__run_rates_add(struct dpt__run_rates *r,
			const struct dpt__event_line *l)
{
	double t = dpt__event_num(l, DPT_EVF_TIME, r->t_line);

	switch (l->event) {
	case DPT_EV_START:
		close_segment(r);
		r->t_begin = t;
		if (r->t_stop > 0) {
			r->t_down = r->t_line;
			r->t_start = t;
		}
		break;
	case DPT_EV_GENERATION:
		close_segment(r);
		r->world = (long)dpt__event_num(l, DPT_EVF_WORLD, 0);
		break;
	case DPT_EV_LOG:
	case DPT_EV_COMMIT:
		progress(r, (int64_t)dpt__event_num(l, DPT_EVF_STEP, -1), t);
		break;
	case DPT_EV_STOP:
		close_segment(r);
		r->t_stop = t;
		r->t_start = 0;
		break;
	case DPT_EV_TOTAL_STEPS:
		r->total_steps = (uint64_t)dpt__event_num(
			l, DPT_EVF_TOTAL_STEPS, (double)r->total_steps);
		break;
	case DPT_EV_GLOBAL_BATCH:
		r->global_batch = (uint64_t)dpt__event_num(
			l, DPT_EVF_GLOBAL_BATCH, (double)r->global_batch);
		break;
	case DPT_EV_RESUME: /* what was reached after it is done again */
		r->step = (int64_t)dpt__event_num(l, DPT_EVF_STEP, -1);
		break;
	case DPT_EV_SHAPE:
		shape_line(r, l, t);
		break;
	case DPT_EV_GENERATION_END:
	case DPT_EV_FAILURE:
	case DPT_EV_END:
		close_segment(r);
		break;
	default: /* the others do not move the step */
		break;
	}
	r->t_line = t;
}

int dpt__run_rates_get(const struct dpt__run_rates *r, struct dpt__rate *out,
		       int max)
{
	struct dpt__run_rates all = *r;
	int n = 0;

	close_segment(&all);
	for (int i = 0; i < all.n && n < max; i++)
		if (all.w[i].seconds > 0)
			out[n++] = (struct dpt__rate){
				all.w[i].world,
				all.w[i].steps / all.w[i].seconds,
			};
	return n;
}

void dpt__run_rates_show(FILE *f, json_t *o, const struct dpt__run_rates *r)
{
	struct dpt__rate rates[DPT_RUN_RATES_MAX];
	int n = dpt__run_rates_get(r, rates, DPT_RUN_RATES_MAX);

	if (o) {
		json_t *a = json_array();

		for (int i = 0; i < n; i++)
			json_array_append_new(
				a,
				json_pack("{s:I, s:f}", "world",
					  (json_int_t)rates[i].world,
					  "steps_per_s", rates[i].steps_per_s));
		json_object_set_new(o, "rates", a);
		json_object_set_new(o, "restart_s",
				    r->restart_s > 0 ? json_real(r->restart_s)
						     : json_null());
		json_object_set_new(o, "shape",
				    r->shape_why[0] ? json_string(r->shape_why)
						    : json_null());
		return;
	}
	for (int i = 0; i < n; i++)
		fprintf(f, "  %-10s %ld ranks: %.2f steps/s\n",
			i ? "" : "speed", rates[i].world, rates[i].steps_per_s);
	if (r->restart_s > 0)
		fprintf(f, "  restart    %.0f s (the last one measured)\n",
			r->restart_s);
	if (r->shape_why[0])
		fprintf(f, "  shape      %s\n", r->shape_why);
}

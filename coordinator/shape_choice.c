#include "config.h"

#include <math.h>
#include <stdio.h>

#include "parse.h"
#include "shape_choice.h"

/* A start within this is "now": Slurm's estimate has this much slack. */
#define NOW_S 60.0

double dpt__shape_rate(const struct dpt__rate *rates, int nrates, long world,
		       double efficiency, bool *measured)
{
	int best = -1;
	double best_d = 0, ratio;

	*measured = false;
	for (int i = 0; i < nrates; i++) {
		double d;

		if (rates[i].world <= 0 || rates[i].steps_per_s <= 0)
			continue;
		if (rates[i].world == world) {
			*measured = true;
			return rates[i].steps_per_s;
		}
		d = fabs(log2((double)world / (double)rates[i].world));
		if (best < 0 || d < best_d ||
		    (d == best_d && rates[i].world > rates[best].world)) {
			best = i;
			best_d = d;
		}
	}
	if (best < 0 || world <= 0)
		return 0;
	ratio = (double)world / (double)rates[best].world;
	if (ratio < 1)
		return rates[best].steps_per_s * ratio;
	return rates[best].steps_per_s * ratio * pow(efficiency, log2(ratio));
}

static double restart_s(const struct dpt__shape_facts *f)
{
	return f->restart_s > 0 ? f->restart_s : DPT_SHAPE_RESTART_S;
}

/* The estimate of shape I; its finish stays < 0 without an estimate. */
static void estimate(const struct dpt__shape_facts *f, int i,
		     struct dpt__shape_estimate *e)
{
	bool here = f->running && i == f->current;
	double r = restart_s(f), start, train;

	e->rate = dpt__shape_rate(f->rates, f->nrates,
				  dpt__shape_world(&f->shapes[i]),
				  f->efficiency, &e->measured);
	e->stops = 0;
	e->starts = here ? 0 : f->start_in[i];
	e->finish = -1;
	if (e->starts < 0 || e->rate <= 0 || f->work < 0)
		return;
	start = here ? 0 : e->starts + r;
	train = f->work / e->rate;
	if (f->limit_s > 0 && train > f->limit_s)
		e->stops = (long)ceil(train / f->limit_s) - 1;
	e->finish = start + train + (double)e->stops * r;
}

static bool usable(const struct dpt__shape_facts *f,
		   const struct dpt__shape_estimate *e)
{
	return e->starts >= 0 && e->rate > 0 && (f->work < 0 || e->finish >= 0);
}

/* Whether I beats J (both usable). */
static bool better(const struct dpt__shape_facts *f,
		   const struct dpt__shape_estimate *est, int i, int j)
{
	double ki = f->work < 0 ? est[i].starts : est[i].finish;
	double kj = f->work < 0 ? est[j].starts : est[j].finish;

	if (fabs(ki - kj) > 1)
		return ki < kj;
	if (f->work < 0 && est[i].rate != est[j].rate)
		return est[i].rate > est[j].rate;
	if (i == f->current || j == f->current)
		return i == f->current;
	return dpt__shape_world(&f->shapes[i]) >
	       dpt__shape_world(&f->shapes[j]);
}

int dpt__shape_choose(const struct dpt__shape_facts *f,
		      struct dpt__shape_estimate *est)
{
	int best = -1;

	for (int i = 0; i < f->n; i++) {
		estimate(f, i, &est[i]);
		if (usable(f, &est[i]) && (best < 0 || better(f, est, i, best)))
			best = i;
	}
	return best;
}

/* "about HH:MM", IN_S from NOW in local time, with the day's name ("about
 * Sun 00:01") on another day than NOW's: when a shape would end. */
static const char *about(time_t now, double in_s, char *buf, size_t size)
{
	time_t t = now + (time_t)in_s;
	struct tm tm, today;

	localtime_r(&now, &today);
	localtime_r(&t, &tm);
	strftime(buf, size,
		 tm.tm_yday == today.tm_yday && tm.tm_year == today.tm_year
			 ? "about %H:%M"
			 : "about %a %H:%M",
		 &tm);
	return buf;
}

/* When a shape would start: "now" if IN_S is within NOW_S, else as
 * about(). */
static const char *when(time_t now, double in_s, char *buf, size_t size)
{
	return in_s <= NOW_S ? "now" : about(now, in_s, buf, size);
}

/* Whether shape I is a grow from the current one: larger, starts now (a
 * later start is a prediction that may not hold, and a job requeued for
 * it would wait: doc/shapes.md, "Growing back"), and ends sooner by more
 * than the margin (without work: trains faster). */
static bool grows(const struct dpt__shape_facts *f,
		  const struct dpt__shape_bounds *b,
		  const struct dpt__shape_estimate *est, int i)
{
	const struct dpt__shape_estimate *c = &est[f->current];

	if (dpt__shape_world(&f->shapes[i]) <=
		    dpt__shape_world(&f->shapes[f->current]) ||
	    !usable(f, &est[i]) || est[i].starts > NOW_S)
		return false;
	if (f->work < 0)
		return est[i].rate > c->rate;
	return c->finish >= 0 &&
	       est[i].finish + b->margin * restart_s(f) < c->finish;
}

/* Why no shape grows: said of the largest shape larger than the
 * current one. */
static void no_grow(const struct dpt__shape_facts *f,
		    const struct dpt__shape_estimate *est, char *why,
		    size_t size)
{
	long world = dpt__shape_world(&f->shapes[f->current]);
	char name[64], t[32];
	int l = -1;

	for (int i = 0; i < f->n; i++)
		if (dpt__shape_world(&f->shapes[i]) > world &&
		    (l < 0 || dpt__shape_world(&f->shapes[i]) >
				      dpt__shape_world(&f->shapes[l])))
			l = i;
	if (l < 0) {
		snprintf(why, size, "it runs at its largest shape");
		return;
	}
	dpt__shape_format(&f->shapes[l], name, sizeof(name));
	if (!usable(f, &est[l]))
		snprintf(why, size, "%s has no start estimate or rate", name);
	else if (est[l].starts > NOW_S)
		snprintf(why, size, "%s would start %s", name,
			 when(time(NULL), est[l].starts, t, sizeof(t)));
	else if (f->work < 0)
		snprintf(why, size, "%s starts now but trains no faster", name);
	else
		snprintf(why, size,
			 "%s starts now but ends sooner by less than the "
			 "margin",
			 name);
}

bool dpt__shape_bounded(const struct dpt__shape_bounds *b, char *why,
			size_t size)
{
	char t1[32], t2[32];

	if (b->max_changes >= 0 && b->changes >= b->max_changes) {
		snprintf(why, size,
			 "the run changed size %ld times "
			 "(max_shape_changes)",
			 b->changes);
		return true;
	}
	if (b->since_change_s < b->min_interval_s) {
		snprintf(why, size,
			 "the last size change was %s ago "
			 "(min_shape_interval %s)",
			 dpt__format_duration((long)b->since_change_s, t1,
					      sizeof(t1)),
			 dpt__format_duration((long)b->min_interval_s, t2,
					      sizeof(t2)));
		return true;
	}
	return false;
}

int dpt__shape_grow(const struct dpt__shape_facts *f,
		    const struct dpt__shape_bounds *b,
		    struct dpt__shape_estimate *est, char *why, size_t size)
{
	int best = -1;

	dpt__shape_choose(f, est);
	if (dpt__shape_bounded(b, why, size))
		return -1;
	for (int i = 0; i < f->n; i++)
		if (grows(f, b, est, i) &&
		    (best < 0 || better(f, est, i, best)))
			best = i;
	if (best < 0)
		no_grow(f, est, why, size);
	return best;
}

void dpt__shape_verdict(const struct dpt__shape_facts *f,
			const struct dpt__shape_estimate *est, int chosen,
			time_t now, char *msg, size_t size)
{
	char shape[64], other[64], t1[32], t2[32], t3[32];
	int alt = -1, len;

	if (chosen < 0) {
		snprintf(msg, size,
			 "keeps its request: no accepted shape has "
			 "a start estimate and a rate");
		return;
	}
	dpt__shape_format(&f->shapes[chosen], shape, sizeof(shape));
	if (f->work < 0)
		len = snprintf(msg, size,
			       "requeued as %s: starts %s (no "
			       "total_steps: the earliest start)",
			       shape,
			       when(now, est[chosen].starts, t1, sizeof(t1)));
	else
		len = snprintf(msg, size, "requeued as %s: starts %s, ends %s",
			       shape,
			       when(now, est[chosen].starts, t1, sizeof(t1)),
			       about(now, est[chosen].finish, t2, sizeof(t2)));
	for (int i = 0; i < f->n; i++)
		if (i != chosen && usable(f, &est[i]) &&
		    (alt < 0 || dpt__shape_world(&f->shapes[i]) >
					dpt__shape_world(&f->shapes[alt])))
			alt = i;
	if (alt < 0 || len < 0 || (size_t)len >= size)
		return;
	snprintf(msg + len, size - (size_t)len, "; %s would start %s",
		 dpt__shape_format(&f->shapes[alt], other, sizeof(other)),
		 when(now, est[alt].starts, t3, sizeof(t3)));
}

void dpt__shape_grow_verdict(const struct dpt__shape_facts *f,
			     const struct dpt__shape_estimate *est, int to,
			     time_t now, char *msg, size_t size)
{
	const struct dpt__shape_estimate *c = &est[f->current];
	char shape[64], here[64], t1[32], t2[32];

	dpt__shape_format(&f->shapes[to], shape, sizeof(shape));
	dpt__shape_format(&f->shapes[f->current], here, sizeof(here));
	if (f->work < 0)
		snprintf(msg, size,
			 "growing to %s: it can start now and trains at %.3g "
			 "steps/s (%s: %.3g)",
			 shape, est[to].rate, here, c->rate);
	else
		snprintf(msg, size,
			 "growing to %s: it can start now and ends %s; %s "
			 "would end %s",
			 shape, about(now, est[to].finish, t1, sizeof(t1)),
			 here, about(now, c->finish, t2, sizeof(t2)));
}

/*
 * Job shapes (doc/shapes.md): the grammar of --dp-shapes (common/shape.c)
 * and the decision from start estimates and measured rates
 * (coordinator/shape_choice.c), with numbers worked out by hand.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "shape.h"
#include "shape_choice.h"

static char err[256];

static int expand(const char *text, long batch, struct dpt__shape *out)
{
	struct dpt__shapes list;

	assert_int_equal(dpt__shapes_parse(text, &list, err, sizeof(err)), 0);
	return dpt__shapes_expand(&list, batch, out, DPT_SHAPES_CONCRETE_MAX);
}

static void shape_is(const struct dpt__shape *s, const char *want)
{
	char buf[64];

	assert_string_equal(dpt__shape_format(s, buf, sizeof(buf)), want);
}

/* One shape: tasks a node count without GPUs only (one task a GPU). */
static void shapes_compare(void **state)
{
	struct dpt__shape a = {.nodes = 2, .gpus = 4, .tasks = 4},
			  b = {.nodes = 2, .gpus = 4, .tasks = 0},
			  c = {.nodes = 2, .gpus = 0, .tasks = 4},
			  d = {.nodes = 2, .gpus = 0, .tasks = 2};

	(void)state;
	assert_true(dpt__shape_equal(&a, &b));
	assert_false(dpt__shape_equal(&a, &c));
	assert_false(dpt__shape_equal(&c, &d));
	d.tasks = 4;
	assert_true(dpt__shape_equal(&c, &d));
	d.nodes = 1;
	assert_false(dpt__shape_equal(&c, &d));
}

static void lists_expand(void **state)
{
	struct dpt__shape s[DPT_SHAPES_CONCRETE_MAX];

	(void)state;
	assert_int_equal(expand("1x3-8,2x8", 0, s), 7);
	shape_is(&s[0], "1 node x 3 GPUs");
	shape_is(&s[5], "1 node x 8 GPUs");
	shape_is(&s[6], "2 nodes x 8 GPUs");
	assert_int_equal(dpt__shape_world(&s[6]), 16);
	/* A global batch of 24: worlds 3, 4, 6 and 8 only. */
	assert_int_equal(expand("1x3-8,2x8", 24, s), 4);
	assert_int_equal(dpt__shape_world(&s[2]), 6);
	assert_int_equal(dpt__shape_world(&s[3]), 8);
	assert_int_equal(expand("1-2x0:4", 0, s), 2);
	shape_is(&s[1], "2 nodes x 4 tasks");
	assert_int_equal(dpt__shape_world(&s[1]), 8);
	assert_int_equal(expand("1x8,1x1,1x8", 0, s), 2);
	shape_is(&s[1], "1 node x 1 GPU");
	/* A batch no world divides, and a huge range: none, at once. */
	assert_int_equal(expand("1-1000000x7", 5, s), 0);
	/* Without a batch, a huge range stops at the caller's room. */
	assert_int_equal(expand("1-1000000x8", 0, s), DPT_SHAPES_CONCRETE_MAX);
}

/* The user's batch and the program's: a world divides both exactly when
 * it divides their greatest common divisor; either alone is itself. */
static void batches_combine(void **state)
{
	struct dpt__shape s[DPT_SHAPES_CONCRETE_MAX];

	(void)state;
	assert_int_equal(dpt__shape_batch(0, 0), 0);
	assert_int_equal(dpt__shape_batch(24, 0), 24);
	assert_int_equal(dpt__shape_batch(0, 48), 48);
	assert_int_equal(dpt__shape_batch(24, 36), 12);
	assert_int_equal(dpt__shape_batch(-1, 36), 36);
	/* 24 from srun, 36 from the program: worlds 3, 4 and 6 of 3 to 8. */
	assert_int_equal(expand("1x3-8", dpt__shape_batch(24, 36), s), 3);
	assert_int_equal(dpt__shape_world(&s[2]), 6);
}

static void refused(const char *text, const char *why)
{
	struct dpt__shapes list;

	err[0] = '\0';
	assert_int_equal(dpt__shapes_parse(text, &list, err, sizeof(err)),
			 DPT_EINVAL);
	if (!strstr(err, why))
		fail_msg("'%s': '%s' does not say '%s'", text, err, why);
}

static void bad_lists_are_refused(void **state)
{
	char many[128] = "";

	(void)state;
	refused("", "an empty list of shapes: write NODESxGPUS");
	refused(NULL, "an empty list");
	refused("8", "'8' has no 'x' between nodes and GPUs: write NODESxGPUS");
	refused("1y8", "has no 'x'");
	refused("x8", "'x8' has no node count from 1 to 1000000");
	refused("0x8", "no node count");
	refused("2-1x8", "'2-1x8' has no node count");
	refused("1x", "'1x' has no GPU count from 0 to 64");
	refused("1x65", "no GPU count");
	refused("1x8-3", "no GPU count");
	refused("1x8:2", "'1x8:2' gives tasks to a GPU shape");
	refused("1x0", "'1x0' is a CPU shape without its tasks a node");
	refused("1x0:0", "without its tasks");
	refused("1x0:2-3", "without its tasks");
	refused("1x0:", "without its tasks");
	refused("1x0-8", "'1x0-8' mixes 0 GPUs with GPUs");
	refused("1x8,", "has an empty shape");
	refused(",1x8", "has an empty shape");
	refused("1x8,,2x8", "has an empty shape");
	refused("1x8,2x", "'2x' has no GPU count");
	for (int i = 0, len = 0; i <= DPT_SHAPES_MAX; i++)
		len += snprintf(many + len, sizeof(many) - len, "%s1x%d",
				i ? "," : "", i + 1);
	refused(many, "more than 16 shapes");
}

static const struct dpt__rate at8[] = {{8, 800}};

static void rates_are_measured_or_scaled(void **state)
{
	const struct dpt__rate two[] = {{2, 200}, {8, 720}};
	bool m;

	(void)state;
	assert_float_equal(dpt__shape_rate(at8, 1, 8, 0.9, &m), 800, 1e-9);
	assert_true(m);
	/* Down: linear. */
	assert_float_equal(dpt__shape_rate(at8, 1, 3, 0.9, &m), 300, 1e-9);
	assert_false(m);
	/* Up: 0.9 a doubling; 16 is one doubling of 8. */
	assert_float_equal(dpt__shape_rate(at8, 1, 16, 0.9, &m), 1440, 1e-9);
	/* 4 is as far from 2 as from 8: the larger; 5 is nearer 8. */
	assert_float_equal(dpt__shape_rate(two, 2, 4, 0.9, &m), 360, 1e-9);
	assert_float_equal(dpt__shape_rate(two, 2, 5, 0.9, &m), 450, 1e-9);
	/* 3 is nearer 2: one doubling up is 1.5 of it, 0.9^log2(1.5). */
	assert_float_equal(dpt__shape_rate(two, 2, 3, 0.9, &m),
			   200 * 1.5 * 0.9402289, 1e-4);
	assert_float_equal(dpt__shape_rate(NULL, 0, 3, 0.9, &m), 0, 0);
}

/* One node of 3 GPUs free now, or of 8 after BLOCKED_S; 10 hours of
 * work at 8 GPUs (800 steps/s measured), a restart of 100 s. */
static const struct dpt__shape three_or_eight[] = {{1, 3, 0}, {1, 8, 0}};

static struct dpt__shape_facts facts(double *start_in, double blocked_s)
{
	struct dpt__shape_facts f = {
		.shapes = three_or_eight,
		.n = 2,
		.start_in = start_in,
		.rates = at8,
		.nrates = 1,
		.efficiency = 0.9,
		.restart_s = 100,
		.work = 800.0 * 36000,
		.limit_s = 86400,
		.current = 1,
	};

	start_in[0] = 0;
	start_in[1] = blocked_s;
	return f;
}

static void the_first_to_finish_wins(void **state)
{
	struct dpt__shape_estimate est[2];
	double start_in[2];
	struct dpt__shape_facts f = facts(start_in, 4 * 3600);

	(void)state;
	/* 8 blocked 4 hours: 14400 + 100 + 36000 beats 100 + 96000. */
	assert_int_equal(dpt__shape_choose(&f, est), 1);
	assert_float_equal(est[1].finish, 50500, 1e-6);
	assert_float_equal(est[0].finish, 96100 + 100, 1e-6);
	assert_int_equal(est[0].stops, 1); /* 96000 s of work, 86400 a job */
	assert_true(est[1].measured);
	assert_false(est[0].measured);
	/* Blocked 20 hours: 72000 + 100 + 36000 > 96200. */
	f = facts(start_in, 20 * 3600);
	assert_int_equal(dpt__shape_choose(&f, est), 0);
	/* No time limit: no stops to pay. */
	f.limit_s = 0;
	assert_int_equal(dpt__shape_choose(&f, est), 0);
	assert_float_equal(est[0].finish, 96100, 1e-6);
	/* A failed estimate leaves its shape out; none left: -1. */
	f = facts(start_in, 4 * 3600);
	start_in[1] = -1;
	assert_int_equal(dpt__shape_choose(&f, est), 0);
	start_in[0] = -1;
	assert_int_equal(dpt__shape_choose(&f, est), -1);
	/* Nothing measured: no rate, no choice. */
	f = facts(start_in, 0);
	f.nrates = 0;
	assert_int_equal(dpt__shape_choose(&f, est), -1);
}

static void ties_and_unknown_work(void **state)
{
	const struct dpt__shape same[] = {{2, 4, 0}, {1, 8, 0}};
	struct dpt__shape_estimate est[2];
	double start_in[2];
	struct dpt__shape_facts f = facts(start_in, 0);

	(void)state;
	/* Same world, same start: the current shape, whichever it is. */
	f.shapes = same;
	assert_int_equal(dpt__shape_choose(&f, est), 1);
	f.current = 0;
	assert_int_equal(dpt__shape_choose(&f, est), 0);
	/* Equal finish, neither current: the larger world. */
	f = facts(start_in, 0);
	f.current = -1;
	f.work = 0;
	assert_int_equal(dpt__shape_choose(&f, est), 1);
	/* Without work: the earliest start, then the fastest. */
	f = facts(start_in, 600);
	f.work = -1;
	assert_int_equal(dpt__shape_choose(&f, est), 0);
	assert_float_equal(est[0].finish, -1, 0);
	start_in[1] = 0.5;
	assert_int_equal(dpt__shape_choose(&f, est), 1);
}

static bool starts_with(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* The bounds of any size change, a grow or the choice at a stop. */
static void changes_are_bounded(void **state)
{
	struct dpt__shape_bounds b = {
		.since_change_s = HUGE_VAL,
		.min_interval_s = 90,
		.max_changes = 2,
	};
	char why[128];

	(void)state;
	/* No change yet: no interval to wait. */
	assert_false(dpt__shape_bounded(&b, why, sizeof(why)));
	b.changes = 1;
	b.since_change_s = 26;
	assert_true(dpt__shape_bounded(&b, why, sizeof(why)));
	assert_string_equal(why, "the last size change was 26s ago "
				 "(min_shape_interval 1m30s)");
	b.since_change_s = 90;
	assert_false(dpt__shape_bounded(&b, why, sizeof(why)));
	b.changes = 2;
	assert_true(dpt__shape_bounded(&b, why, sizeof(why)));
	assert_string_equal(why, "the run changed size 2 times "
				 "(max_shape_changes)");
}

static void grow_back(void **state)
{
	struct dpt__shape_bounds b = {
		.margin = 2,
		.since_change_s = 3600,
		.min_interval_s = 1800,
		.max_changes = 20,
	};
	struct dpt__shape_estimate est[2];
	double start_in[2];
	struct dpt__shape_facts f = facts(start_in, 0);
	char why[128];

	(void)state;
	/* Running at 3: 96000 s left; 8 now: 100 + 36000 + 2 x 100. */
	f.current = 0;
	f.running = true;
	f.limit_s = 0;
	assert_int_equal(dpt__shape_grow(&f, &b, est, why, sizeof(why)), 1);
	assert_float_equal(est[0].finish, 96000, 1e-6);
	/* A margin the gain does not beat: (96000 - 36100) / 100 = 599. */
	b.margin = 599;
	assert_int_equal(dpt__shape_grow(&f, &b, est, why, sizeof(why)), -1);
	assert_string_equal(why, "1 node x 8 GPUs starts now but ends sooner "
				 "by less than the margin");
	b.margin = 598;
	assert_int_equal(dpt__shape_grow(&f, &b, est, why, sizeof(why)), 1);
	/* Sooner even from 20 minutes on, but only a start now is taken. */
	start_in[1] = 1200;
	assert_int_equal(dpt__shape_grow(&f, &b, est, why, sizeof(why)), -1);
	assert_true(starts_with(why, "1 node x 8 GPUs would start about "));
	start_in[1] = -1;
	assert_int_equal(dpt__shape_grow(&f, &b, est, why, sizeof(why)), -1);
	assert_string_equal(why, "1 node x 8 GPUs has no start estimate or "
				 "rate");
	start_in[1] = 0;
	b.since_change_s = 600;
	assert_int_equal(dpt__shape_grow(&f, &b, est, why, sizeof(why)), -1);
	assert_string_equal(why, "the last size change was 10m ago "
				 "(min_shape_interval 30m)");
	b.since_change_s = 3600;
	b.changes = 20;
	assert_int_equal(dpt__shape_grow(&f, &b, est, why, sizeof(why)), -1);
	assert_string_equal(why, "the run changed size 20 times "
				 "(max_shape_changes)");
	b.max_changes = -1;
	assert_int_equal(dpt__shape_grow(&f, &b, est, why, sizeof(why)), 1);
	/* At the largest shape already. */
	f.current = 1;
	assert_int_equal(dpt__shape_grow(&f, &b, est, why, sizeof(why)), -1);
	assert_string_equal(why, "it runs at its largest shape");
	/* Without work: a larger shape that starts now and is faster. */
	f.current = 0;
	f.work = -1;
	assert_int_equal(dpt__shape_grow(&f, &b, est, why, sizeof(why)), 1);
	start_in[1] = 3600;
	assert_int_equal(dpt__shape_grow(&f, &b, est, why, sizeof(why)), -1);
	assert_true(starts_with(why, "1 node x 8 GPUs would start about "));
	start_in[1] = 0;
	f.nrates = 0; /* no rate: nothing trains faster */
	assert_int_equal(dpt__shape_grow(&f, &b, est, why, sizeof(why)), -1);
	assert_string_equal(why, "1 node x 8 GPUs has no start estimate or "
				 "rate");
}

/* The sentence of F's grow to its shape 1, at NOW, is WANT. */
static void grow_says(struct dpt__shape_facts *f, time_t now, const char *want)
{
	struct dpt__shape_estimate est[2];
	char msg[256];

	dpt__shape_choose(f, est);
	dpt__shape_grow_verdict(f, est, 1, now, msg, sizeof(msg));
	assert_string_equal(msg, want);
}

static void the_verdict_says_when(void **state)
{
	const time_t now = 1795860000; /* Sat 2026-11-28 10:00 UTC */
	struct dpt__shape_estimate est[2];
	double start_in[2];
	struct dpt__shape_facts f = facts(start_in, 4 * 3600);
	char msg[256];
	int i;

	(void)state;
	setenv("TZ", "UTC", 1);
	i = dpt__shape_choose(&f, est);
	dpt__shape_verdict(&f, est, i, now, msg, sizeof(msg));
	assert_string_equal(msg, "requeued as 1 node x 8 GPUs: starts about "
				 "14:00, ends about Sun 00:01; 1 node x 3 "
				 "GPUs would start now");
	f = facts(start_in, 20 * 3600);
	i = dpt__shape_choose(&f, est);
	dpt__shape_verdict(&f, est, i, now, msg, sizeof(msg));
	assert_string_equal(msg, "requeued as 1 node x 3 GPUs: starts now, "
				 "ends about Sun 12:43; 1 node x 8 GPUs would "
				 "start about Sun 06:00");
	f.work = -1;
	i = dpt__shape_choose(&f, est);
	dpt__shape_verdict(&f, est, i, now, msg, sizeof(msg));
	assert_string_equal(msg, "requeued as 1 node x 3 GPUs: starts now "
				 "(no total_steps: the earliest start); 1 node "
				 "x 8 GPUs would start about Sun 06:00");
	dpt__shape_verdict(&f, est, -1, now, msg, sizeof(msg));
	assert_string_equal(msg, "keeps its request: no accepted shape has a "
				 "start estimate and a rate");
	/* A grow from 3 GPUs to 8 (grow_back's numbers). */
	f = facts(start_in, 0);
	f.current = 0;
	f.running = true;
	f.limit_s = 0;
	grow_says(&f, now,
		  "growing to 1 node x 8 GPUs: it can start now and ends about "
		  "20:01; 1 node x 3 GPUs would end about Sun 12:40");
	f.work = -1;
	grow_says(&f, now,
		  "growing to 1 node x 8 GPUs: it can start now and trains at "
		  "800 steps/s (1 node x 3 GPUs: 300)");
	/* An end within the minute is a time too: "now" is for starts. */
	f.work = 800.0 * 30;
	f.restart_s = 10;
	grow_says(&f, now,
		  "growing to 1 node x 8 GPUs: it can start now and ends about "
		  "10:00; 1 node x 3 GPUs would end about 10:01");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(lists_expand),
		cmocka_unit_test(shapes_compare),
		cmocka_unit_test(batches_combine),
		cmocka_unit_test(bad_lists_are_refused),
		cmocka_unit_test(rates_are_measured_or_scaled),
		cmocka_unit_test(the_first_to_finish_wins),
		cmocka_unit_test(ties_and_unknown_work),
		cmocka_unit_test(changes_are_bounded),
		cmocka_unit_test(grow_back),
		cmocka_unit_test(the_verdict_says_when),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

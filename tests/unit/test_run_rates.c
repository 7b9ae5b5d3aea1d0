/*
 * A run's speed at each world size and the cost of its restarts, from its
 * events (tool/run_rates.c; doc/shapes.md, "The decision"): lines as the
 * coordinator writes them, with times and steps worked out by hand.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "run_rates.h"

static void feed(struct dpt__run_rates *r, const char *fmt, ...)
{
	struct dpt__event_line l;
	char line[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	assert_int_equal(dpt__event_line_parse(&l, line, strlen(line)), 0);
	dpt__run_rates_add(r, &l);
	dpt__event_line_release(&l);
}

static void gen(struct dpt__run_rates *r, double t, int world)
{
	feed(r,
	     "{\"time\":%.3f,\"event\":\"generation\",\"generation\":1,"
	     "\"world\":%d,\"nodes\":1}",
	     t, world);
}

static void at(struct dpt__run_rates *r, double t, const char *event, long step)
{
	feed(r, "{\"time\":%.3f,\"event\":\"%s\",\"step\":%ld}", t, event,
	     step);
}

static void mark(struct dpt__run_rates *r, double t, const char *event)
{
	feed(r, "{\"time\":%.3f,\"event\":\"%s\"}", t, event);
}

static void shape(struct dpt__run_rates *r, double t, const char *reason,
		  const char *why)
{
	feed(r,
	     "{\"time\":%.3f,\"event\":\"shape\",\"reason\":\"%s\","
	     "\"shape\":\"1x8\",\"world\":8,\"why\":\"%s\"}",
	     t, reason, why);
}

static int rates(const struct dpt__run_rates *r, struct dpt__rate *out)
{
	return dpt__run_rates_get(r, out, DPT_RUN_RATES_MAX);
}

/* Two worlds; each segment from its first progress point to its last. */
static void worlds_are_measured(void **state)
{
	struct dpt__run_rates r;
	struct dpt__rate out[DPT_RUN_RATES_MAX];

	(void)state;
	dpt__run_rates_init(&r);
	mark(&r, 1000, "start");
	gen(&r, 1001, 8);
	at(&r, 1002, "resume", 0);
	at(&r, 1010, "log", 10); /* the first point: warm-up left out */
	at(&r, 1020, "log", 110);
	at(&r, 1030, "log", 210);
	at(&r, 1025, "commit", 150); /* late: a smaller step changes none */
	/* The open segment counts: 200 steps in 20 s. */
	assert_int_equal(rates(&r, out), 1);
	assert_int_equal(out[0].world, 8);
	assert_float_equal(out[0].steps_per_s, 10, 1e-9);
	/* A rank lost: 3 ranks from here, 30 steps in 10 s... */
	mark(&r, 1031, "generation_end");
	gen(&r, 1032, 3);
	at(&r, 1040, "log", 220);
	at(&r, 1050, "log", 250);
	/* ... and 8 again: 100 more steps in 10 s at 8. */
	gen(&r, 1051, 8);
	at(&r, 1060, "commit", 260);
	at(&r, 1070, "log", 360);
	mark(&r, 1071, "end");
	feed(&r, "{\"time\":1072,\"event\":\"total_steps\",\"total_steps\":"
		 "5000}");
	assert_int_equal(r.total_steps, 5000);
	/* The program's global batch: the newest declaration counts. */
	assert_int_equal(r.global_batch, 0);
	feed(&r, "{\"time\":1072,\"event\":\"global_batch\",\"global_batch\":"
		 "48}");
	feed(&r, "{\"time\":1073,\"event\":\"global_batch\",\"global_batch\":"
		 "96}");
	assert_int_equal(r.global_batch, 96);
	assert_int_equal(rates(&r, out), 2);
	assert_int_equal(out[0].world, 8);
	assert_float_equal(out[0].steps_per_s, 300.0 / 30.0, 1e-9);
	assert_int_equal(out[1].world, 3);
	assert_float_equal(out[1].steps_per_s, 3, 1e-9);
	assert_float_equal(r.restart_s, 0, 0); /* no restart yet */
}

/* Segments too short or without progress say nothing. */
static void short_segments_say_nothing(void **state)
{
	struct dpt__run_rates r;
	struct dpt__rate out[DPT_RUN_RATES_MAX];

	(void)state;
	dpt__run_rates_init(&r);
	gen(&r, 0, 4);
	at(&r, 1, "log", 0);
	at(&r, 9, "log", 80); /* 8 s: under DPT_RUN_RATES_MIN_S */
	mark(&r, 9.5, "failure");
	gen(&r, 10, 2);
	at(&r, 11, "log", 80);
	at(&r, 40, "log", 80); /* no step moved */
	at(&r, 41, "log", 120);
	mark(&r, 42, "generation_end");
	at(&r, 50, "log", 200); /* outside any generation: none */
	assert_int_equal(rates(&r, out), 1);
	assert_int_equal(out[0].world, 2);
	assert_float_equal(out[0].steps_per_s, 40.0 / 30.0, 1e-9);
}

/* A walltime stop, the requeue, the next start: the restart is the time
 * down (stop to the coordinator's last line) plus the time up (start to
 * the first step). The time in the queue between is not. */
static void restarts_are_measured(void **state)
{
	struct dpt__run_rates r;
	struct dpt__rate out[DPT_RUN_RATES_MAX];

	(void)state;
	dpt__run_rates_init(&r);
	mark(&r, 0, "start");
	gen(&r, 1, 4);
	at(&r, 10, "log", 10);
	at(&r, 110, "log", 210);
	feed(&r, "{\"time\":120,\"event\":\"stop\",\"reason\":\"walltime\"}");
	at(&r, 125, "commit", 215);
	feed(&r, "{\"time\":130,\"event\":\"requeue\",\"verdict\":"
		 "\"requeue\"}");
	mark(&r, 131, "end");
	/* Three hours in the queue. */
	mark(&r, 10931, "start");
	gen(&r, 10940, 2);
	at(&r, 10942, "resume", 215);
	assert_float_equal(r.restart_s, 0, 0);
	at(&r, 10990, "log", 216);
	assert_float_equal(r.restart_s, (131 - 120) + (10990 - 10931), 1e-9);
	at(&r, 11090, "log", 316);
	assert_int_equal(rates(&r, out), 2);
	assert_float_equal(out[0].steps_per_s, 2, 1e-9);
	assert_float_equal(out[1].steps_per_s, 1, 1e-9);
	/* A start without a stop before it (a crash) measures nothing. */
	mark(&r, 20000, "start");
	gen(&r, 20001, 2);
	at(&r, 20100, "log", 400);
	assert_float_equal(r.restart_s, 70, 1e-9);
}

/* The facts of a grow check: the size changes, the last one's time, the
 * newest step reached (a resume goes back to its step). */
static void changes_are_counted(void **state)
{
	struct dpt__run_rates r;

	(void)state;
	dpt__run_rates_init(&r);
	assert_int_equal(r.step, -1);
	mark(&r, 100, "start");
	gen(&r, 101, 2);
	at(&r, 110, "log", 40);
	assert_float_equal(r.startup_s, 10, 1e-9);
	at(&r, 111, "commit", 40);
	at(&r, 112, "log", 45);
	shape(&r, 120, "kept", "requeued as 1 node x 2 GPUs");
	assert_int_equal(r.shape_changes, 0);
	shape(&r, 130, "changed", "requeued as 2 nodes x 2 GPUs");
	at(&r, 140, "resume", 40);
	assert_int_equal(r.step, 40);
	shape(&r, 150, "grow", "growing to 2 nodes x 4 GPUs");
	shape(&r, 160, "refused", "keeps its request: no");
	assert_int_equal(r.shape_changes, 2);
	assert_float_equal(r.t_shape_change, 150, 0);
	assert_string_equal(r.shape_why, "keeps its request: no");
	/* A grow's fallback job set the job back: a change too. */
	shape(&r, 170, "fallback", "fell back to 2 nodes x 2 GPUs: ...");
	assert_int_equal(r.shape_changes, 3);
	assert_float_equal(r.t_shape_change, 170, 0);
}

/* What dptrain status shows of them. */
static void shown(void **state)
{
	struct dpt__run_rates r;
	char *text = NULL, *js;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	json_t *o = json_object();

	(void)state;
	dpt__run_rates_init(&r);
	dpt__run_rates_show(f, NULL, &r);
	fflush(f);
	assert_int_equal(len, 0); /* nothing measured, nothing shown */
	gen(&r, 0, 8);
	at(&r, 10, "log", 0);
	at(&r, 20, "log", 125);
	r.restart_s = 95.25;
	shape(&r, 30, "kept", "requeued as 1 node x 8 GPUs: starts now");
	dpt__run_rates_show(f, NULL, &r);
	fclose(f);
	assert_string_equal(text,
			    "  speed      8 ranks: 12.50 steps/s\n"
			    "  restart    95 s (the last one measured)\n"
			    "  shape      requeued as 1 node x 8 GPUs: starts "
			    "now\n");
	free(text);
	dpt__run_rates_show(NULL, o, &r);
	js = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(js, "{\"rates\":[{\"steps_per_s\":12.5,\"world\":"
				"8}],\"restart_s\":95.25,\"shape\":\"requeued "
				"as 1 node x 8 GPUs: starts now\"}");
	free(js);
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(worlds_are_measured),
		cmocka_unit_test(short_segments_say_nothing),
		cmocka_unit_test(restarts_are_measured),
		cmocka_unit_test(changes_are_counted),
		cmocka_unit_test(shown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

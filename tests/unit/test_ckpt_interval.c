/*
 * --dp-ckpt-every=auto (ckpt/interval.c): Young/Daly's interval
 * sqrt(2 C M), its cap (30 minutes, or M when shorter), the site's floor
 * (which wins over the cap), the interval before any save is measured,
 * and the average of the measured costs.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ckpt/ckpt_int.h"
#include "parse.h"

#define DAY 86400.0

/* dpt__ckpt_auto_interval(COST, MTBF, FLOOR) is WANT, within TOL. */
struct interval_case {
	double cost, mtbf, floor, want, tol;
};

static void check_intervals(const struct interval_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		assert_float_equal(dpt__ckpt_auto_interval(c[i].cost, c[i].mtbf,
							   c[i].floor),
				   c[i].want, c[i].tol);
}

#define CHECK_INTERVALS(cases)                                                 \
	check_intervals(cases, sizeof(cases) / sizeof(cases[0]))

static void young_daly_between_the_bounds(void **state)
{
	static const struct interval_case cases[] = {
		/* 64 nodes of the default 30-day MTBF, a 2 s save: 402.5 s,
		 * sqrt(2 x 2 x 40500). */
		{2, 30 * DAY / 64, 0, 402.49223594996215, 1e-9},
		{2, 30 * DAY / 64, 0, 402.49, 0.01},
		/* Four times the cost, twice the interval. */
		{0.5, 3600, 0, 60.0, 1e-9},
		{2, 3600, 0, 120.0, 1e-9},
		/* A tiny MTBF makes the interval seconds (what the integration
		 * test uses): 20 ms of cost, 25 s of MTBF, 1 s. */
		{0.02, 25, 0, 1.0, 1e-9},
	};
	(void)state;
	CHECK_INTERVALS(cases);
}

static void capped_at_30_minutes_and_at_the_mtbf(void **state)
{
	static const struct interval_case cases[] = {
		/* One node, 30 days, a 10 s save: sqrt(2 x 10 x 2592000) =
		 * 7200 s, capped at 30 minutes. */
		{10, 30 * DAY, 0, DPT_CKPT_EVERY_AUTO_S, 1e-9},
		/* A save that costs more than half the MTBF: the MTBF (Daly).
		 */
		{400, 600, 0, 600.0, 1e-9},
		/* No failure expected (no MTBF): the 30-minute cap. */
		{1, 0, 0, DPT_CKPT_EVERY_AUTO_S, 1e-9},
	};
	(void)state;
	CHECK_INTERVALS(cases);
}

static void the_site_floor_wins(void **state)
{
	static const struct interval_case cases[] = {
		/* 60 s by the formula, 600 s by the site. */
		{0.5, 3600, 600, 600.0, 1e-9},
		/* Even over the cap. */
		{10, 30 * DAY, 3600, 3600.0, 1e-9},
		/* A floor below the formula changes nothing. */
		{2, 3600, 60, 120.0, 1e-9},
	};
	(void)state;
	CHECK_INTERVALS(cases);
}

static void before_the_first_save_the_cap(void **state)
{
	static const struct interval_case cases[] = {
		{0, 30 * DAY, 0, DPT_CKPT_EVERY_AUTO_S, 1e-9},
		{0, 300, 0, 300.0, 1e-9},
		{0, 300, 900, 900.0, 1e-9},
	};
	(void)state;
	CHECK_INTERVALS(cases);
}

static void the_cost_average_halves_older_saves(void **state)
{
	double c = 0;

	(void)state;
	c = dpt__ckpt_cost_update(c, 4.0); /* the first save: its own */
	assert_float_equal(c, 4.0, 1e-12);
	c = dpt__ckpt_cost_update(c, 1.0);
	assert_float_equal(c, 2.5, 1e-12);
	c = dpt__ckpt_cost_update(c, 1.0);
	assert_float_equal(c, 1.75, 1e-12);
	/* A negative sample (none) leaves it alone. */
	assert_float_equal(dpt__ckpt_cost_update(c, -1), 1.75, 1e-12);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(young_daly_between_the_bounds),
		cmocka_unit_test(capped_at_30_minutes_and_at_the_mtbf),
		cmocka_unit_test(the_site_floor_wins),
		cmocka_unit_test(before_the_first_save_the_cap),
		cmocka_unit_test(the_cost_average_halves_older_saves),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

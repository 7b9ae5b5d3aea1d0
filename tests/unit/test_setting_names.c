/*
 * The step's settings (common/settings.def), walked: each name once, well
 * formed; every srun option of the rows is parsed by the plugin's
 * settings (spank/settings.c) and merged with the site's defaults and
 * bounds, every coordinator flag is parsed by the coordinator
 * (coordinator/options.c), under the names the rows give, and what srun
 * passes it (spank/srun.c) with every option given; and the Python
 * package's table of variables is the rows'. A setting added without a
 * sample below fails here, so that its names are tried end to end before
 * they ship.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <getopt.h>

#include <dptrain/error.h>

#include "coordinator/options.h"
#include "setting_names.h"
#include "spank/plugin.h"
#include "spank/settings.h"

/* spank/srun.c's Slurm, which the argv it builds does not call. */
struct dpt__plugin dpt__plugin;
void slurm_error(const char *fmt, ...)
{
	(void)fmt;
}
void slurm_info(const char *fmt, ...)
{
	(void)fmt;
}
spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	(void)sp;
	(void)item;
	return ESPANK_ERROR;
}

/* A value each name accepts (NULL: a flag without one). */
static const struct sample {
	enum dpt__setting id;
	const char *option, *flag;
} samples[] = {
	{DPT_SET_RUN, "run-1", NULL},
	{DPT_SET_CKPT_URI, "file:///ckpt/%u", NULL},
	{DPT_SET_CKPT_EVERY, "10m", "10m"},
	{DPT_SET_KEEP, "4", NULL},
	{DPT_SET_GRACE, "90s", "90s"},
	{DPT_SET_REQUEUE, "off", "auto"},
	{DPT_SET_MAX_REQUEUES, "7", "7"},
	{DPT_SET_NODES, "1-2", "1-2"},
	{DPT_SET_SHAPES, "1x2-4,2x4", "1x2-4,2x4"},
	{DPT_SET_GLOBAL_BATCH, "96", "96"},
	{DPT_SET_SCALING_EFFICIENCY, NULL, "80"},
	{DPT_SET_GROW_CHECK, NULL, "5m"},
	{DPT_SET_GROW_MARGIN, NULL, "3"},
	{DPT_SET_MIN_SHAPE_INTERVAL, NULL, "1h"},
	{DPT_SET_MAX_SHAPE_CHANGES, NULL, "4"},
	{DPT_SET_MIN_WORKERS, "2", "2"},
	{DPT_SET_BACKEND, "cpu", NULL},
	{DPT_SET_LOG_LEVEL, NULL, "info"},
	{DPT_SET_GPU_BIND, "rank", NULL},
	{DPT_SET_TORCHELASTIC, NULL, NULL},
	{DPT_SET_METRICS, "0", "0"},
	{DPT_SET_PRIVATE, "yes", NULL},
	{DPT_SET_MTBF, NULL, NULL},
	{DPT_SET_MIN_CKPT_INTERVAL, NULL, NULL},
	{DPT_SET_RESTART_COUNT, NULL, "3"},
	{DPT_SET_HEARTBEAT_MS, NULL, "250"},
	{DPT_SET_TIMEOUT_MS, NULL, "3000"},
	{DPT_SET_BIND, NULL, "tcp://127.0.0.1:*"},
	{DPT_SET_WORLD_SIZE, NULL, "4"},
	{DPT_SET_ADVERTISE, NULL, "127.0.0.1"},
	{DPT_SET_SECRET_FILE, NULL, "/run/secret"},
	{DPT_SET_ENDPOINT_FILE, NULL, "/run/endpoint"},
	{DPT_SET_PARENT_PID, NULL, "1"},
	{DPT_SET_JOIN_TIMEOUT_MS, NULL, "1000"},
	{DPT_SET_IO_THREADS, NULL, "2"},
	{DPT_SET_JOB_ID, NULL, "42"},
	{DPT_SET_STEP_ID, NULL, "0"},
	{DPT_SET_END_TIME, NULL, "2000000000"},
};

static const struct sample *sample_of(enum dpt__setting id)
{
	for (size_t i = 0; i < sizeof(samples) / sizeof(*samples); i++)
		if (samples[i].id == id)
			return &samples[i];
	return NULL;
}

static void report(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int well_formed(const char *name, const char *chars)
{
	return name[0] && strspn(name, chars) == strlen(name);
}

static void names_once_and_well_formed(void **state)
{
	(void)state;
	for (int i = 0; i < DPT_SET_COUNT; i++) {
		const struct dpt__setting_names *a = &dpt__setting_names[i];

		assert_true(a->option || a->env || a->flag);
		if (!sample_of(i))
			fail_msg("setting %d (%s) has no sample in this test",
				 i,
				 a->option ? a->option
				 : a->flag ? a->flag
					   : a->env);
		if (a->option)
			assert_true(well_formed(a->option, "abcdefghijklmnopqrs"
							   "tuvwxyz-"));
		if (a->flag)
			assert_true(well_formed(a->flag, "abcdefghijklmnopqrstu"
							 "vwxyz-"));
		if (a->env)
			assert_true(strncmp(a->env, "DPTRAIN_", 8) == 0 &&
				    well_formed(a->env, "ABCDEFGHIJKLMNOPQRSTU"
							"VWXYZ_"));
		for (int j = 0; j < i; j++) {
			const struct dpt__setting_names *b =
				&dpt__setting_names[j];

			assert_false(a->option && b->option &&
				     !strcmp(a->option, b->option));
			assert_false(a->env && b->env &&
				     !strcmp(a->env, b->env));
			assert_false(a->flag && b->flag &&
				     !strcmp(a->flag, b->flag));
		}
	}
}

/* Each option of srun under its name, then merged with the site's
 * built-in defaults and bounds, as the plugin does for a step. */
static void options_parsed(void **state)
{
	(void)state;
	for (int i = 0; i < DPT_SET_COUNT; i++) {
		const char *name = dpt__setting_names[i].option;
		struct dpt__user u = {0};
		struct dpt__admin a;
		struct dpt__settings s;

		if (!name)
			continue;
		if (dpt__user_set(&u, name, sample_of(i)->option, report))
			fail_msg("--dp-%s=%s is refused", name,
				 sample_of(i)->option);
		/* --dp-global-batch filters --dp-shapes: given with it. */
		if (i == DPT_SET_GLOBAL_BATCH)
			dpt__user_set(&u, "shapes",
				      sample_of(DPT_SET_SHAPES)->option,
				      report);
		dpt__admin_defaults(&a);
		if (dpt__settings_resolve(&s, &a, &u, "alice", "42", "job",
					  report))
			fail_msg("--dp-%s=%s is refused by the site's defaults",
				 name, sample_of(i)->option);
	}
}

/* Each flag of the coordinator under its name, with --world-size and
 * --job-id (which --requeue auto needs; --end-time excludes it). */
static void flags_parsed(void **state)
{
	(void)state;
	for (int i = 0; i < DPT_SET_COUNT; i++) {
		const char *name = dpt__setting_names[i].flag;
		char flag[64], world[] = "--world-size", four[] = "4",
			       job[] = "--job-id", id[] = "42";

		if (i == DPT_SET_END_TIME) /* instead of a job's */
			snprintf(job, sizeof(job), "--grace");
		char *argv[] = {
			"dptrain-coordinator",	    world, four, job, id, flag,
			(char *)sample_of(i)->flag, NULL};
		struct options o;

		if (!name)
			continue;
		snprintf(flag, sizeof(flag), "--%s", name);
		optind = 0; /* GNU getopt starts afresh */
		if (dpt__coord_parse_options(7, argv, &o))
			fail_msg("%s %s is refused", flag, sample_of(i)->flag);
	}
}

/* Each row's fields: the merged value's in struct dpt__settings (its user
 * column) and the coordinator's in struct options (its COORD column),
 * with their sizes; 0 where it has none. */
static const struct row_fields {
	size_t settings, settings_size, coord, coord_size;
} fields[DPT_SET_COUNT] = {
#define VALUE(field)                                                           \
	offsetof(struct dpt__settings, field),                                 \
		sizeof(((struct dpt__settings *)0)->field)
#define USER(kind, field, ...)		 VALUE(field)
#define USER_ELSE_SITE(kind, field, ...) VALUE(field)
#define SITE(kind, field)		 VALUE(field)
#define NO_USER				 0, 0
#define COORD(arg, kind, field, ...)                                           \
	offsetof(struct options, field), sizeof(((struct options *)0)->field)
#define NO_COORD 0, 0
#define X(id, option, env, flag, srun, user, keys, coord)                      \
	[DPT_SET_##id] = {user, coord},
	DPT_SETTINGS(X)
#include "settings_end.h"
#undef VALUE
};

/* What the coordinator parsed from srun's command line is what the plugin
 * merged, field by field where both are numbers (their rows' fields),
 * and the step's own values. */
static void coordinator_has_the_settings(const struct dpt__settings *s,
					 const struct options *o)
{
	long want, have;

	for (int i = 0; i < DPT_SET_COUNT; i++) {
		const struct row_fields *f = &fields[i];

		if (!f->coord_size || f->settings_size != sizeof(long) ||
		    (i == DPT_SET_NODES && !s->nodes_min))
			continue;
		assert_int_equal(f->coord_size, sizeof(long));
		memcpy(&want, (const char *)s + f->settings, sizeof(long));
		memcpy(&have, (const char *)o + f->coord, sizeof(long));
		if (want != have)
			fail_msg(
				"--%s: the plugin has %ld, the coordinator %ld",
				dpt__setting_names[i].flag, want, have);
	}
	assert_int_equal(o->requeue, s->requeue == DPT_REQUEUE_AUTO);
	assert_int_equal(o->ckpt_every, s->every.kind == DPT_EVERY_SECONDS
						? s->every.value
						: 0);
	assert_int_equal(o->shapes.n, s->shapes[0] ? 2 : 0); /* its sample */
	assert_int_equal(o->world_size, 4);
	assert_int_equal(o->job_id, 42);
	assert_int_equal(o->step_id, 0);
	assert_string_equal(o->endpoint_file, "/run/endpoint");
}

/* Every site key's built-in default is a value its parser takes. */
static void site_defaults_parsed(void **state)
{
	struct dpt__admin a;

	(void)state;
	assert_int_equal(dpt__admin_set_defaults(&a, report), 0);
}

/* srun's command line for the coordinator, with every option of srun but
 * LEFT_OUT given its sample: the coordinator takes it, and it passes each
 * setting that has both an option of srun and a flag of the coordinator.
 * --dp-nodes and --dp-shapes exclude each other: each is left out once
 * (--dp-global-batch with --dp-shapes, whose sizes it filters). */
static void srun_argv_without(enum dpt__setting left_out)
{
	struct dpt__coord_argv cmd;
	struct dpt__settings s;
	struct options o;

	memset(&dpt__plugin, 0, sizeof(dpt__plugin));
	dpt__admin_defaults(&dpt__plugin.admin);
	for (int i = 0; i < DPT_SET_COUNT; i++)
		if (dpt__setting_names[i].option && i != (int)left_out &&
		    !(left_out == DPT_SET_SHAPES &&
		      i == DPT_SET_GLOBAL_BATCH) &&
		    dpt__user_set(&dpt__plugin.user,
				  dpt__setting_names[i].option,
				  sample_of(i)->option, report))
			fail_msg("--dp-%s=%s is refused",
				 dpt__setting_names[i].option,
				 sample_of(i)->option);
	assert_int_equal(dpt__settings_resolve(&s, &dpt__plugin.admin,
					       &dpt__plugin.user, "alice", "42",
					       "job", report),
			 0);
	dpt__srun_coord_argv(&cmd, &s, 4, 42, 0, "/run/endpoint");
	optind = 0; /* GNU getopt starts afresh */
	if (dpt__coord_parse_options(cmd.n, cmd.v, &o))
		fail_msg("the coordinator refuses srun's command line");
	coordinator_has_the_settings(&s, &o);
	for (int i = 0; i < DPT_SET_COUNT; i++) {
		const struct dpt__setting_names *n = &dpt__setting_names[i];
		bool passed = false;

		for (int j = 0; j < cmd.nflags; j++)
			passed |= strcmp(cmd.flags[j] + 2,
					 n->flag ? n->flag : "") == 0;
		if (n->option && n->flag && !passed && i != (int)left_out)
			fail_msg(
				"srun does not pass --dp-%s to the coordinator "
				"(--%s)",
				n->option, n->flag);
	}
}

static void srun_argv_parsed(void **state)
{
	(void)state;
	srun_argv_without(DPT_SET_SHAPES);
	srun_argv_without(DPT_SET_NODES);
}

/* Each setting's id, as Python names it. */
static const char *const ids[DPT_SET_COUNT] = {
#define X(id, option, env, flag, srun, user, keys, coord) [DPT_SET_##id] = #id,
	DPT_SETTINGS(X)
#undef X
};

/* worker/python/dptrain/_settings.py as the rows write it. */
static void python_table(char *out, size_t size)
{
	size_t n = (size_t)snprintf(
		out, size,
		"# The variables srun --dp-train exports to every task, by "
		"setting: the\n"
		"# rows of common/settings.def, as "
		"tests/unit/test_setting_names "
		"writes\n"
		"# them (it prints this file anew when a row changes).\n"
		"ENV = {\n");

	for (int i = 0; i < DPT_SET_COUNT && n < size; i++) {
		if (dpt__setting_names[i].env)
			n += (size_t)snprintf(out + n, size - n,
					      "    \"%s\": \"%s\",\n", ids[i],
					      dpt__setting_names[i].env);
	}
	if (n < size)
		snprintf(out + n, size - n, "}\n");
}

/* The Python package reads the variables by setting from _settings.py,
 * which must be the rows' table: a renamed variable fails here. */
static void python_names(void **state)
{
	static char want[8192], have[8192];
	const char *path = DPT_TOP_SRCDIR "/worker/python/dptrain/_settings.py";
	FILE *f = fopen(path, "r");
	size_t n;

	(void)state;
	python_table(want, sizeof(want));
	assert_true(strlen(want) < sizeof(want) - 1);
	if (!f)
		fail_msg("cannot read %s", path);
	n = fread(have, 1, sizeof(have) - 1, f);
	have[n] = '\0';
	fclose(f);
	if (strcmp(want, have) != 0) {
		fprintf(stderr, "%s should read:\n%s", path, want);
		fail_msg("%s is not the rows' table: write it as above", path);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names_once_and_well_formed),
		cmocka_unit_test(options_parsed),
		cmocka_unit_test(flags_parsed),
		cmocka_unit_test(srun_argv_parsed),
		cmocka_unit_test(python_names),
		cmocka_unit_test(site_defaults_parsed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

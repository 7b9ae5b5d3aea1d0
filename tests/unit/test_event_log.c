/*
 * The run's event log, written once (common/event_log.h): every event
 * through the coordinator's formatter (coordinator/events.c) and back
 * through the tool's parser (tool/event_line.c). The lines below are the
 * format on disk, byte for byte, as runs before this definition wrote it:
 * a renamed event or field, a field moved, or a value taken from the
 * wrong member fails here, and so does an event added without its line.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "event_line.h"
#include "event_log.h"
#include "events.h"
#include "scalars.h"
#include "wire.h"

#define JOB	 4242
#define RESTARTS 3
#define TIME_MS	 1700000000123ull

/* Every member set (FULL), or every one that may be none set to none. */
static void sample(struct dpt__coord_note *n, struct dpt__scalars *sc,
		   enum dpt__event e, bool nulls)
{
	memset(sc, 0, sizeof(*sc));
	sc->step = 1207;
	sc->n = 3;
	snprintf(sc->names[0], sizeof(sc->names[0]), "loss");
	sc->values[0] = 0.25;
	snprintf(sc->names[1], sizeof(sc->names[1]), "samples_per_s");
	sc->values[1] = 1536.5;
	snprintf(sc->names[2], sizeof(sc->names[2]), "grad_norm");
	sc->values[2] = NAN;
	*n = (struct dpt__coord_note){
		.event = e,
		.generation = 7,
		.rank = 2,
		.task = 5,
		.host = "node-b\"1",
		.node = 1,
		.world = 8,
		.nodes = 2,
		.backend = "nccl",
		.reason = "peer_lost",
		.why = "rank 2 (task 5 on node-b) stopped heartbeating",
		.step = 1200,
		.bytes = 3000000000ull,
		.seconds = 12.3456,
		.end_time = 1700003600,
		.status = 3,
		.scalars = sc,
		.shape = "2x8",
	};
	if (nulls) {
		n->rank = DPT_WIRE_NO_RANK;
		n->task = DPT_WIRE_NO_TASK;
		n->host = n->backend = n->reason = n->why = n->shape = NULL;
		n->step = DPT_STATUS_NO_STEP;
		n->seconds = 0;
		n->end_time = 0;
		n->status = -1;
		sc->values[0] = INFINITY;
	}
}

/* clang-format off */
static const char *const full_lines[DPT_EV_COUNT] = {
	[DPT_EV_START] =
		"{\"time\":1700000000.123,\"event\":\"start\","
		"\"job\":4242,\"restarts\":3,\"expected\":8,"
		"\"end_time\":1700003600}\n",
	[DPT_EV_JOIN] =
		"{\"time\":1700000000.123,\"event\":\"join\","
		"\"job\":4242,\"restarts\":3,\"generation\":7,"
		"\"task\":5,\"host\":\"node-b\\\"1\",\"node\":1}\n",
	[DPT_EV_EVICT] =
		"{\"time\":1700000000.123,\"event\":\"evict\","
		"\"job\":4242,\"restarts\":3,\"generation\":7,"
		"\"rank\":2,\"task\":5,\"host\":\"node-b\\\"1\","
		"\"node\":1,\"reason\":\"peer_lost\","
		"\"why\":\"rank 2 (task 5 on node-b) stopped heartbeating\"}\n",
	[DPT_EV_GENERATION] =
		"{\"time\":1700000000.123,\"event\":\"generation\","
		"\"job\":4242,\"restarts\":3,\"generation\":7,"
		"\"world\":8,\"nodes\":2,\"backend\":\"nccl\"}\n",
	[DPT_EV_GENERATION_END] =
		"{\"time\":1700000000.123,\"event\":\"generation_end\","
		"\"job\":4242,\"restarts\":3,\"generation\":7,"
		"\"rank\":2,\"reason\":\"peer_lost\","
		"\"why\":\"rank 2 (task 5 on node-b) stopped heartbeating\"}\n",
	[DPT_EV_RESUME] =
		"{\"time\":1700000000.123,\"event\":\"resume\","
		"\"job\":4242,\"restarts\":3,\"step\":1200}\n",
	[DPT_EV_SAVE] =
		"{\"time\":1700000000.123,\"event\":\"save\","
		"\"job\":4242,\"restarts\":3,\"step\":1200,"
		"\"bytes\":3000000000,\"seconds\":12.346,"
		"\"bandwidth\":243001555}\n",
	[DPT_EV_COMMIT] =
		"{\"time\":1700000000.123,\"event\":\"commit\","
		"\"job\":4242,\"restarts\":3,\"step\":1200}\n",
	[DPT_EV_STOP] =
		"{\"time\":1700000000.123,\"event\":\"stop\","
		"\"job\":4242,\"restarts\":3,\"reason\":\"peer_lost\"}\n",
	[DPT_EV_FAILURE] =
		"{\"time\":1700000000.123,\"event\":\"failure\","
		"\"job\":4242,\"restarts\":3,\"reason\":\"peer_lost\"}\n",
	[DPT_EV_REQUEUE] =
		"{\"time\":1700000000.123,\"event\":\"requeue\","
		"\"job\":4242,\"restarts\":3,\"verdict\":\"peer_lost\","
		"\"reason\":\"rank 2 (task 5 on node-b) stopped heartbeating\","
		"\"committed\":1200}\n",
	[DPT_EV_END] =
		"{\"time\":1700000000.123,\"event\":\"end\","
		"\"job\":4242,\"restarts\":3,\"status\":3}\n",
	[DPT_EV_LOG] =
		"{\"time\":1700000000.123,\"event\":\"log\","
		"\"job\":4242,\"restarts\":3,\"step\":1207,"
		"\"scalars\":{\"loss\":0.25,\"samples_per_s\":1536.5,"
		"\"grad_norm\":null}}\n",
	[DPT_EV_TOTAL_STEPS] =
		"{\"time\":1700000000.123,\"event\":\"total_steps\","
		"\"job\":4242,\"restarts\":3,\"total_steps\":1200}\n",
	[DPT_EV_SHAPE] =
		"{\"time\":1700000000.123,\"event\":\"shape\","
		"\"job\":4242,\"restarts\":3,\"reason\":\"peer_lost\","
		"\"shape\":\"2x8\",\"world\":8,"
		"\"why\":\"rank 2 (task 5 on node-b) stopped heartbeating\"}\n",
	[DPT_EV_GLOBAL_BATCH] =
		"{\"time\":1700000000.123,\"event\":\"global_batch\","
		"\"job\":4242,\"restarts\":3,\"global_batch\":1200}\n",
};
static const char *const nulls_lines[DPT_EV_COUNT] = {
	[DPT_EV_START] =
		"{\"time\":1700000000.123,\"event\":\"start\","
		"\"job\":4242,\"restarts\":3,\"expected\":8,"
		"\"end_time\":null}\n",
	[DPT_EV_JOIN] =
		"{\"time\":1700000000.123,\"event\":\"join\","
		"\"job\":4242,\"restarts\":3,\"generation\":7,"
		"\"task\":null,\"host\":null,\"node\":1}\n",
	[DPT_EV_EVICT] =
		"{\"time\":1700000000.123,\"event\":\"evict\","
		"\"job\":4242,\"restarts\":3,\"generation\":7,"
		"\"rank\":null,\"task\":null,\"host\":null,\"node\":1,"
		"\"reason\":null,\"why\":null}\n",
	[DPT_EV_GENERATION] =
		"{\"time\":1700000000.123,\"event\":\"generation\","
		"\"job\":4242,\"restarts\":3,\"generation\":7,"
		"\"world\":8,\"nodes\":2,\"backend\":null}\n",
	[DPT_EV_GENERATION_END] =
		"{\"time\":1700000000.123,\"event\":\"generation_end\","
		"\"job\":4242,\"restarts\":3,\"generation\":7,"
		"\"rank\":null,\"reason\":null,\"why\":null}\n",
	[DPT_EV_RESUME] =
		"{\"time\":1700000000.123,\"event\":\"resume\","
		"\"job\":4242,\"restarts\":3,\"step\":null}\n",
	[DPT_EV_SAVE] =
		"{\"time\":1700000000.123,\"event\":\"save\","
		"\"job\":4242,\"restarts\":3,\"step\":null,"
		"\"bytes\":3000000000,\"seconds\":0.000,"
		"\"bandwidth\":null}\n",
	[DPT_EV_COMMIT] =
		"{\"time\":1700000000.123,\"event\":\"commit\","
		"\"job\":4242,\"restarts\":3,\"step\":null}\n",
	[DPT_EV_STOP] =
		"{\"time\":1700000000.123,\"event\":\"stop\","
		"\"job\":4242,\"restarts\":3,\"reason\":null}\n",
	[DPT_EV_FAILURE] =
		"{\"time\":1700000000.123,\"event\":\"failure\","
		"\"job\":4242,\"restarts\":3,\"reason\":null}\n",
	[DPT_EV_REQUEUE] =
		"{\"time\":1700000000.123,\"event\":\"requeue\","
		"\"job\":4242,\"restarts\":3,\"verdict\":null,"
		"\"reason\":null,\"committed\":null}\n",
	[DPT_EV_END] =
		"{\"time\":1700000000.123,\"event\":\"end\","
		"\"job\":4242,\"restarts\":3,\"status\":-1}\n",
	[DPT_EV_LOG] =
		"{\"time\":1700000000.123,\"event\":\"log\","
		"\"job\":4242,\"restarts\":3,\"step\":1207,"
		"\"scalars\":{\"loss\":null,\"samples_per_s\":1536.5,"
		"\"grad_norm\":null}}\n",
	[DPT_EV_TOTAL_STEPS] =
		"{\"time\":1700000000.123,\"event\":\"total_steps\","
		"\"job\":4242,\"restarts\":3,\"total_steps\":null}\n",
	[DPT_EV_SHAPE] =
		"{\"time\":1700000000.123,\"event\":\"shape\","
		"\"job\":4242,\"restarts\":3,\"reason\":null,"
		"\"shape\":null,\"world\":8,\"why\":null}\n",
	[DPT_EV_GLOBAL_BATCH] =
		"{\"time\":1700000000.123,\"event\":\"global_batch\","
		"\"job\":4242,\"restarts\":3,\"global_batch\":null}\n",
};
/* clang-format on */

static void check_lines(const char *const want[], bool nulls)
{
	for (unsigned e = 0; e < DPT_EV_COUNT; e++) {
		struct dpt__coord_note n;
		struct dpt__scalars sc;
		struct dpt__buf b;

		assert_non_null(want[e]); /* a new event needs its line */
		sample(&n, &sc, (enum dpt__event)e, nulls);
		dpt__buf_init(&b, 4096);
		assert_int_equal(
			dpt__events_format(&n, JOB, RESTARTS, TIME_MS, &b), 0);
		assert_string_equal(b.data, want[e]);
		dpt__buf_release(&b);
	}
}

/* The writer: every event's line, byte for byte. */
static void writes_the_format_on_disk(void **state)
{
	(void)state;
	check_lines(full_lines, false);
	check_lines(nulls_lines, true);
}

/* What no line is: the run's URI, a log without its record. */
static void notes_that_are_no_line(void **state)
{
	struct dpt__coord_note n;
	struct dpt__scalars sc;
	struct dpt__buf b;

	(void)state;
	dpt__buf_init(&b, 4096);
	sample(&n, &sc, DPT_COORD_NOTE_RUN, false);
	assert_int_equal(dpt__events_format(&n, JOB, RESTARTS, TIME_MS, &b), 1);
	sample(&n, &sc, DPT_EV_LOG, false);
	n.scalars = NULL;
	assert_int_equal(dpt__events_format(&n, JOB, RESTARTS, TIME_MS, &b), 1);
	assert_int_equal(dpt__event_format(&b, (enum dpt__event)DPT_EV_COUNT,
					   NULL, NULL),
			 DPT_EINVAL);
	dpt__buf_release(&b);
}

/* Field F of line L read by its kind: it is in the line, with the JSON
 * type its kind writes (null where the kind allows none). */
static void check_field(const struct dpt__event_line *l,
			enum dpt__event_field f)
{
	json_t *v = json_object_get(l->obj, dpt__event_key(f));

	assert_non_null(v);
	switch (dpt__event_kind(f)) {
	case DPT_EVK_U64:
	case DPT_EVK_I64:
		assert_true(json_is_integer(v));
		assert_true(dpt__event_num(l, f, -12345) ==
			    (double)json_integer_value(v));
		break;
	case DPT_EVK_STEP:
	case DPT_EVK_RANK:
	case DPT_EVK_EPOCH:
		assert_true(json_is_integer(v) || json_is_null(v));
		assert_true(dpt__event_num(l, f, -12345) ==
			    (json_is_null(v) ? -12345
					     : (double)json_integer_value(v)));
		break;
	case DPT_EVK_SECONDS:
	case DPT_EVK_RATE:
		assert_true(json_is_number(v) || json_is_null(v));
		assert_true(dpt__event_num(l, f, -12345) ==
			    (json_is_null(v) ? -12345 : json_number_value(v)));
		break;
	case DPT_EVK_STR:
		assert_true(json_is_string(v) || json_is_null(v));
		if (json_is_null(v))
			assert_null(dpt__event_str(l, f));
		else
			assert_string_equal(dpt__event_str(l, f),
					    json_string_value(v));
		break;
	case DPT_EVK_SCALARS:
		assert_true(json_is_object(v));
		assert_ptr_equal(dpt__event_object(l, f), v);
		break;
	}
}

/* The reader: each line recognised as its event, its keys exactly the
 * common fields and the event's, in the table's order, each read back by
 * its kind. */
static void check_parse(const char *line, enum dpt__event e)
{
	const enum dpt__event_field *common, *own;
	size_t ncommon = dpt__event_common(&common),
	       nown = dpt__event_fields(e, &own), i = 0;
	struct dpt__event_line l;
	const char *key;
	json_t *v;

	assert_int_equal(dpt__event_line_parse(&l, line, strlen(line)), 0);
	assert_int_equal(l.event, e);
	assert_string_equal(l.name, dpt__event_name(e));
	assert_int_equal(json_object_size(l.obj), ncommon + nown);
	json_object_foreach(l.obj, key, v)
	{
		enum dpt__event_field f =
			i < ncommon ? common[i] : own[i - ncommon];

		assert_string_equal(key, dpt__event_key(f));
		check_field(&l, f);
		i++;
	}
	assert_true(dpt__event_num(&l, DPT_EVF_TIME, 0) == 1700000000.123);
	assert_true(dpt__event_num(&l, DPT_EVF_JOB, 0) == JOB);
	assert_true(dpt__event_num(&l, DPT_EVF_RESTARTS, 0) == RESTARTS);
	dpt__event_line_release(&l);
}

static void reads_every_event_back(void **state)
{
	(void)state;
	for (unsigned e = 0; e < DPT_EV_COUNT; e++) {
		check_parse(full_lines[e], (enum dpt__event)e);
		check_parse(nulls_lines[e], (enum dpt__event)e);
	}
}

/* Values read back where a mix-up would show: the requeue's verdict and
 * reason come from two members, the log's step from its record. */
static void reads_the_values_written(void **state)
{
	struct dpt__event_line l;
	const char *line = full_lines[DPT_EV_REQUEUE];
	json_t *sc;

	(void)state;
	assert_int_equal(dpt__event_line_parse(&l, line, strlen(line)), 0);
	assert_string_equal(dpt__event_str(&l, DPT_EVF_VERDICT), "peer_lost");
	assert_string_equal(dpt__event_str(&l, DPT_EVF_REASON),
			    "rank 2 (task 5 on node-b) stopped heartbeating");
	assert_true(dpt__event_num(&l, DPT_EVF_COMMITTED, -1) == 1200);
	dpt__event_line_release(&l);
	line = full_lines[DPT_EV_LOG];
	assert_int_equal(dpt__event_line_parse(&l, line, strlen(line)), 0);
	assert_true(dpt__event_num(&l, DPT_EVF_STEP, -1) == 1207);
	sc = dpt__event_object(&l, DPT_EVF_SCALARS);
	assert_true(json_number_value(json_object_get(sc, "loss")) == 0.25);
	assert_true(json_is_null(json_object_get(sc, "grad_norm")));
	dpt__event_line_release(&l);
}

/* Lines of a newer writer, and lines that are no event. */
static void unknown_and_bad_lines(void **state)
{
	static const char newer[] = "{\"event\":\"rebalance\",\"step\":3}";
	static const char *const bad[] = {
		"{\"time\":1700000000.123,\"event\":\"comm", /* cut short */
		"[1,2]",
		"{\"event\":7}",
		"{\"step\":3}",
	};
	struct dpt__event_line l;

	(void)state;
	assert_int_equal(dpt__event_line_parse(&l, newer, strlen(newer)), 0);
	assert_int_equal(l.event, DPT_EV_COUNT);
	assert_string_equal(l.name, "rebalance");
	dpt__event_line_release(&l);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(
			dpt__event_line_parse(&l, bad[i], strlen(bad[i])), -1);
		assert_null(l.obj);
	}
	assert_int_equal(dpt__event_by_name(NULL), DPT_EV_COUNT);
}

/* The table itself: names and keys unique, a key of one kind. */
static void names_and_keys_are_unique(void **state)
{
	(void)state;
	for (unsigned a = 0; a < DPT_EV_COUNT; a++) {
		assert_int_equal(dpt__event_by_name(dpt__event_name(a)), a);
		for (unsigned b = a + 1; b < DPT_EV_COUNT; b++)
			assert_string_not_equal(dpt__event_name(a),
						dpt__event_name(b));
	}
	for (unsigned a = 0; a < DPT_EVF_COUNT; a++)
		for (unsigned b = a + 1; b < DPT_EVF_COUNT; b++)
			assert_string_not_equal(dpt__event_key(a),
						dpt__event_key(b));
	assert_null(dpt__event_name((enum dpt__event)DPT_EV_COUNT));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(writes_the_format_on_disk),
		cmocka_unit_test(notes_that_are_no_line),
		cmocka_unit_test(reads_every_event_back),
		cmocka_unit_test(reads_the_values_written),
		cmocka_unit_test(unknown_and_bad_lines),
		cmocka_unit_test(names_and_keys_are_unique),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The requeue guard's decision (coordinator/requeue.c; doc/walltime.md,
 * "Requeue guard"): every verdict, and the last good step in its message.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "requeue.h"

static char msg[512];

static enum dpt__requeue_verdict
decide(long restarts, long max, const char *resumed, const char *committed)
{
	struct dpt__requeue_facts f = {
		.job_id = 42,
		.restart_count = restarts,
		.max_requeues = max,
		.resumed = resumed,
		.committed = committed,
	};

	msg[0] = '\0';
	return dpt__requeue_decide(&f, msg, sizeof(msg));
}

static void progress_is_requeued(void **state)
{
	(void)state;
	assert_int_equal(decide(0, 100, "none", "40"), DPT_RQ_REQUEUE);
	assert_non_null(strstr(msg, "requeueing job 42 after step 40"));
	assert_non_null(strstr(msg, "DUE TO JOB REQUEUE ***\" that follows "
				    "is expected"));
	assert_int_equal(decide(3, 100, "40", "80"), DPT_RQ_REQUEUE);
	assert_non_null(strstr(msg, "after step 80"));
	/* A program without dptrain checkpoints: the cap alone bounds it. */
	assert_int_equal(decide(5, -1, NULL, NULL), DPT_RQ_REQUEUE);
	assert_non_null(strstr(msg, "resumes from its last checkpoint"));
}

/* --dp-nodes: the message names the range the requeued job gets back. */
static void the_range_is_named(void **state)
{
	struct dpt__requeue_facts f = {
		.job_id = 42,
		.max_requeues = 100,
		.resumed = "none",
		.committed = "40",
		.nodes_min = 1,
		.nodes_max = 2,
	};
	(void)state;
	assert_int_equal(dpt__requeue_decide(&f, msg, sizeof(msg)),
			 DPT_RQ_REQUEUE);
	assert_non_null(strstr(msg, "requeueing job 42 after step 40 "
				    "(committed) onto 1-2 nodes: it resumes"));
	f.nodes_min = f.nodes_max = 1;
	f.committed = NULL;
	f.resumed = NULL;
	dpt__requeue_decide(&f, msg, sizeof(msg));
	assert_non_null(strstr(msg, "requeueing job 42 onto 1 node: it "
				    "resumes from its last checkpoint"));
	f.nodes_min = f.nodes_max = 3;
	dpt__requeue_decide(&f, msg, sizeof(msg));
	assert_non_null(strstr(msg, "requeueing job 42 onto 3 nodes: "));
	/* Without the option, no range. */
	assert_int_equal(decide(0, 100, "none", "40"), DPT_RQ_REQUEUE);
	assert_null(strstr(msg, "onto"));
}

static void the_cap_ends_the_job(void **state)
{
	(void)state;
	assert_int_equal(decide(3, 3, "40", "80"), DPT_RQ_CAPPED);
	assert_string_equal(msg, "not requeueing job 42: it was requeued 3 "
				 "times, --dp-max-requeues=3; the last "
				 "committed step is step 80: submit the job "
				 "again to go on");
	assert_int_equal(decide(0, 0, NULL, NULL), DPT_RQ_CAPPED);
	assert_non_null(strstr(msg, "unknown here (dptrain ckpt ls)"));
	assert_int_equal(decide(2, 3, "40", "80"), DPT_RQ_REQUEUE);
	/* The report with the save's size and time reads as its step. */
	assert_int_equal(decide(2, 3, "40", "80 1048576 250"), DPT_RQ_REQUEUE);
	assert_int_equal(decide(2, 3, "80", "80 1048576 250"), DPT_RQ_HOLD);
}

static void no_progress_is_held(void **state)
{
	(void)state;
	assert_int_equal(decide(1, 100, "80", NULL), DPT_RQ_HOLD);
	assert_string_equal(msg, "holding job 42: this run resumed from step "
				 "80 and committed no newer step, so a requeue "
				 "would loop; the last good step is 80: fix "
				 "the cause, then scontrol release 42");
	/* A step number the program reset is no progress either. */
	assert_int_equal(decide(1, 100, "80", "50"), DPT_RQ_HOLD);
	assert_int_equal(decide(1, 100, "80", "80"), DPT_RQ_HOLD);
	assert_int_equal(decide(0, 100, "none", NULL), DPT_RQ_HOLD);
	assert_non_null(strstr(msg, "started without a checkpoint"));
	/* The cap is checked first. */
	assert_int_equal(decide(100, 100, "80", NULL), DPT_RQ_CAPPED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(progress_is_requeued),
		cmocka_unit_test(the_range_is_named),
		cmocka_unit_test(the_cap_ends_the_job),
		cmocka_unit_test(no_progress_is_held),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

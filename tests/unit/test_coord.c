/*
 * The coordinator's state machine (coordinator/coord.c), driven without a
 * socket and without a clock: messages are encoded and handed to
 * dpt__coord_on_message as coordinator/main.c would hand them over, the
 * replies are recorded by an injected sender and decoded, and the time is
 * a number the test moves.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <zmq.h>

#include <dptrain/error.h>

#include "coord.h"
#include "log.h"
#include "wire.h"

/* ------------------------------------------------------------ harness */

#define SENT_MAX 8192
#define NAMES_MAX 256

/* What the coordinator sent, decoded, to whom (a routing id is a short
 * name here: "w0", "stepd"). */
static struct sent {
	char to[32];
	struct dpt__msg m;
} sent[SENT_MAX];
static size_t nsent;
static int64_t now = 1000000;
static char names[NAMES_MAX][32]; /* the peers seen: index + 10 is the fd */
static size_t nnames;

static int record(void *arg, const uint8_t *id, size_t id_len, zmq_msg_t *msg)
{
	struct sent *s = &sent[nsent];

	(void)arg;
	assert_true(nsent < SENT_MAX);
	assert_true(id_len < sizeof(s->to));
	memcpy(s->to, id, id_len);
	s->to[id_len] = '\0';
	assert_int_equal(dpt__wire_decode(zmq_msg_data(msg), zmq_msg_size(msg),
					  DPT_WIRE_MSG_MAX, &s->m),
			 0);
	nsent++;
	return 0;
}

static const struct dpt__coord_sender recorder = {.send = record};

static void clear_sent(void)
{
	for (size_t i = 0; i < nsent; i++)
		dpt__msg_release(&sent[i].m);
	nsent = 0;
}

/* How many messages of TYPE went to TO since clear_sent. */
static int count(const char *to, enum dpt__msg_type type)
{
	int n = 0;

	for (size_t i = 0; i < nsent; i++)
		n += !strcmp(sent[i].to, to) && sent[i].m.type == type;
	return n;
}

/* The last message of TYPE sent to TO; fails the test if there is none. */
static const struct dpt__msg *last(const char *to, enum dpt__msg_type type)
{
	for (size_t i = nsent; i-- > 0;)
		if (!strcmp(sent[i].to, to) && sent[i].m.type == type)
			return &sent[i].m;
	fail_msg("no %s was sent to %s", dpt__msg_type_name(type), to);
	return NULL;
}

/* The connection descriptor of peer ID: one per name. */
static int fd_of(const char *id)
{
	size_t i;

	for (i = 0; i < nnames; i++)
		if (!strcmp(names[i], id))
			return (int)i + 10;
	assert_true(nnames < NAMES_MAX);
	snprintf(names[nnames], sizeof(names[0]), "%s", id);
	return (int)nnames++ + 10;
}

static void deliver(struct dpt__coord *c, const char *from,
		    const struct dpt__msg *m)
{
	uint8_t buf[DPT_WIRE_IN_MAX];
	long len = dpt__wire_encode(m, buf, sizeof(buf));

	assert_true(len > 0);
	dpt__coord_on_message(c, from, strlen(from), buf, (size_t)len,
			      fd_of(from), now);
}

/* The coordinator's log lines since clear_log, one per line. */
static char logged[65536];

static void capture(enum dpt__log_level level, const char *msg)
{
	size_t len = strlen(logged);

	(void)level;
	snprintf(logged + len, sizeof(logged) - len, "%s\n", msg);
}

static void clear_log(void)
{
	logged[0] = '\0';
}

static struct dpt__coord *coord_new(uint32_t world, uint32_t min_workers,
				    uint32_t join_timeout_ms)
{
	struct dpt__coord_config cfg = {
		.world_size = world,
		.min_workers = min_workers,
		.heartbeat_ms = 500,
		.timeout_ms = 2000,
		.join_timeout_ms = join_timeout_ms,
	};
	struct dpt__coord *c;

	clear_sent();
	clear_log();
	nnames = 0;
	assert_int_equal(dpt__coord_new(&c, &cfg, &recorder, now), 0);
	return c;
}

static void join(struct dpt__coord *c, const char *id, uint32_t task,
		 uint32_t generation)
{
	struct dpt__msg m;

	dpt__msg_init(&m, DPT_MSG_JOIN, generation);
	m.u.join = (struct dpt__msg_join){.node = 0,
					  .local_rank = task,
					  .task_id = task,
					  .pid = 100 + task,
					  .caps = DPT_CAP_CPU,
					  .addr = {.host = "127.0.0.1",
						   .port = (uint16_t)(40000 + task)}};
	deliver(c, id, &m);
}

static void vote(struct dpt__coord *c, const char *id, uint32_t generation,
		 uint32_t seq, int32_t code, uint32_t flags)
{
	struct dpt__msg m;

	dpt__msg_init(&m, DPT_MSG_VOTE, generation);
	m.seq = seq;
	m.u.vote.code = code;
	m.u.vote.flags = flags;
	deliver(c, id, &m);
}

static void simple(struct dpt__coord *c, const char *id,
		   enum dpt__msg_type type, uint32_t generation)
{
	struct dpt__msg m;

	dpt__msg_init(&m, type, generation);
	deliver(c, id, &m);
}

static void task_exit(struct dpt__coord *c, const char *from, uint32_t task,
		      int32_t status, uint32_t seq)
{
	struct dpt__msg m;

	dpt__msg_init(&m, DPT_MSG_TASK_EXIT, 0);
	m.seq = seq;
	m.u.task_exit.task_id = task;
	m.u.task_exit.status = status;
	deliver(c, from, &m);
}

static bool done(struct dpt__coord *c, int *code)
{
	return dpt__coord_done(c, code) != 0;
}

/* ------------------------------------------------------------ tests */

/*
 * The walltime linger (doc/walltime.md, "Requeue"): once every member of
 * a stopped step has left, the coordinator is finished but waits for the
 * step's tasks to exit before it requeues the job. slurmstepd reports
 * each exit (TASK_EXIT) and waits for the ACK: a finished coordinator
 * must still count the exits and acknowledge them, or the requeue waits
 * for srun's SIGTERM and each report for its timeout.
 */
static void linger_counts_and_acks_task_exits(void **state)
{
	struct dpt__coord *c = coord_new(2, 1, 0);
	int code = -1;

	(void)state;
	join(c, "w0", 0, 0);
	join(c, "w1", 1, 0);
	assert_int_equal(count("w0", DPT_MSG_WELCOME), 1);
	assert_int_equal(count("w1", DPT_MSG_WELCOME), 1);
	dpt__coord_stop(c, "the step ends", now);
	vote(c, "w0", 1, 1, 0, 0);
	vote(c, "w1", 1, 1, 0, 0);
	assert_int_equal(last("w1", DPT_MSG_VOTE_DONE)->u.vote.flags,
			 DPT_VOTE_STOP);
	assert_true(dpt__coord_stop_sent(c));
	simple(c, "w0", DPT_MSG_LEAVE, 1);
	simple(c, "w1", DPT_MSG_LEAVE, 1);
	assert_true(done(c, &code));
	assert_int_equal(code, 0);
	assert_int_equal(dpt__coord_tasks_running(c), 2);

	clear_sent();
	task_exit(c, "stepd0", 0, 0, 7);
	assert_int_equal(count("stepd0", DPT_MSG_ACK), 1);
	assert_int_equal(last("stepd0", DPT_MSG_ACK)->seq, 7);
	assert_int_equal(dpt__coord_tasks_running(c), 1);
	task_exit(c, "stepd1", 1, 0, 8);
	assert_int_equal(last("stepd1", DPT_MSG_ACK)->seq, 8);
	assert_int_equal(dpt__coord_tasks_running(c), 0);
	/* Nothing else is taken once finished: a late heartbeat or join
	 * gets no answer, and the exit code stays. */
	clear_sent();
	simple(c, "w0", DPT_MSG_HEARTBEAT, 1);
	join(c, "w9", 0, 0);
	assert_int_equal((int)nsent, 0);
	assert_true(done(c, &code));
	assert_int_equal(code, 0);
	dpt__coord_destroy(&c);
	assert_null(c);
}

/* Two members forming generation 1 with the CPU backend. */
static struct dpt__coord *running_pair(void)
{
	struct dpt__coord *c = coord_new(2, 1, 0);

	join(c, "w0", 0, 0);
	join(c, "w1", 1, 0);
	assert_int_equal(last("w0", DPT_MSG_WELCOME)->u.welcome.rank, 0);
	assert_int_equal(last("w1", DPT_MSG_WELCOME)->u.welcome.rank, 1);
	assert_int_equal(count("w1", DPT_MSG_ROSTER), 1);
	clear_sent();
	return c;
}

/*
 * A stop asked by a rank (dpt_request_stop: VOTE flag STOP) stops the
 * step from the VOTE_DONE of that same vote on, for every member, and
 * the coordinator says which rank asked; afterwards it behaves as after
 * a walltime stop (stop_sent, which leads to the requeue).
 */
static void member_stop_request_stops_everyone(void **state)
{
	struct dpt__coord *c = running_pair();

	(void)state;
	vote(c, "w0", 1, 1, 0, 0);
	vote(c, "w1", 1, 1, 0, 0);
	assert_int_equal(last("w0", DPT_MSG_VOTE_DONE)->u.vote.flags, 0);
	assert_false(dpt__coord_stop_sent(c));
	clear_log();
	vote(c, "w0", 1, 2, 0, DPT_VOTE_BUSY);
	vote(c, "w1", 1, 2, 0, DPT_VOTE_STOP);
	assert_int_equal(last("w0", DPT_MSG_VOTE_DONE)->u.vote.flags,
			 DPT_VOTE_STOP | DPT_VOTE_BUSY);
	assert_int_equal(last("w1", DPT_MSG_VOTE_DONE)->u.vote.flags,
			 DPT_VOTE_STOP | DPT_VOTE_BUSY);
	assert_true(dpt__coord_stop_sent(c));
	assert_non_null(strstr(logged, "stop requested by rank 1 (task 1, "));
	/* Once stopped, always: the next vote says so without asking, and
	 * a second request logs nothing new. */
	clear_log();
	vote(c, "w0", 1, 3, 0, DPT_VOTE_STOP);
	vote(c, "w1", 1, 3, 0, 0);
	assert_int_equal(last("w0", DPT_MSG_VOTE_DONE)->u.vote.flags,
			 DPT_VOTE_STOP);
	assert_null(strstr(logged, "stop requested"));
	dpt__coord_destroy(&c);
}

/* Protocol 3 gave VOTE a new meaning: a worker of another version is
 * refused at its JOIN, with both versions named. */
static void other_version_join_is_refused(void **state)
{
	struct dpt__coord *c = coord_new(1, 1, 0);
	struct dpt__msg m;
	uint8_t buf[DPT_WIRE_IN_MAX];
	long len;

	(void)state;
	dpt__msg_init(&m, DPT_MSG_JOIN, 0);
	m.u.join = (struct dpt__msg_join){.task_id = 0,
					  .caps = DPT_CAP_CPU,
					  .addr = {.host = "127.0.0.1",
						   .port = 40000}};
	len = dpt__wire_encode(&m, buf, sizeof(buf));
	assert_true(len > 0);
	buf[2] = DPT_WIRE_VERSION - 1;
	dpt__coord_on_message(c, "old", 3, buf, (size_t)len, 10, now);
	assert_int_equal(last("old", DPT_MSG_ERROR)->u.text.code,
			 DPT_EVERSION);
	assert_non_null(strstr(last("old", DPT_MSG_ERROR)->u.text.text,
			       "protocol version 2 is not supported: this "
			       "coordinator speaks version 3"));
	assert_int_equal(count("old", DPT_MSG_WELCOME), 0);
	dpt__coord_destroy(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(linger_counts_and_acks_task_exits),
		cmocka_unit_test(member_stop_request_stops_everyone),
		cmocka_unit_test(other_version_join_is_refused),
	};

	/* The coordinator's logs are part of what is tested where a test
	 * says so, and kept out of the TAP output. */
	dpt__log_set_level(DPT_LOG_INFO);
	dpt__log_set_sink(capture);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

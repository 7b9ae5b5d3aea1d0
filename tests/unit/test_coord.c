/*
 * The coordinator's state machine (coordinator/coord.c), driven without a
 * socket and without a clock: messages are encoded and handed to
 * dpt__coord_on_message as coordinator/main.c would hand them over, the
 * replies are recorded by an injected sender and decoded (recorder,
 * tests/testlib.h), and the time is a number the test moves.
 *
 * Over 900 lines on purpose: one test per row group of doc/protocol.md's
 * transition table, each a short scenario, and the check that the table
 * and the code agree; split, the scenarios would share their helpers
 * through a header for no reader's benefit.
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
#include "tests/testlib.h"
#include "wire.h"

/* ------------------------------------------------------------ harness */

#define NAMES_MAX 256

static int64_t now = 1000000;
static char names[NAMES_MAX][32]; /* the peers seen: index + 10 is the fd */
static size_t nnames;

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

/* ------------------------------------------------------------ the table */

/*
 * doc/protocol.md's "Transitions" table, parsed: each row names states,
 * events, a handler and the states that may follow. The code's table
 * (dpt__coord_table) must have the same cells with the same handlers, and
 * every state a handler returns in these tests must be one its row lists.
 */
#define DOC_ROWS_MAX 64
#define LIST_MAX     16
#define NAME_LEN     24

static struct doc_row {
	char states[LIST_MAX][NAME_LEN];
	int nstates;
	char events[LIST_MAX][NAME_LEN];
	int nevents;
	char handler[NAME_LEN];
	char next[LIST_MAX][NAME_LEN];
	int nnext;
	int hits;
	int line;
} doc_rows[DOC_ROWS_MAX];
static int ndoc_rows;

#define CELLS_MAX 256
static struct dpt__coord_cell cells[CELLS_MAX];
static int cell_hits[CELLS_MAX];
static size_t ncells;
static char state_now[NAME_LEN]; /* the state the last event led to */

/* Splits "A, B, `c`" into LIST; returns the count or -1. */
static int split_list(char *field, char list[LIST_MAX][NAME_LEN])
{
	int n = 0;

	for (char *tok = field, *end; tok; tok = end) {
		char *a, *b;

		end = strchr(tok, ',');
		if (end)
			*end++ = '\0';
		for (a = tok; *a == ' ' || *a == '`'; a++)
			;
		for (b = a + strlen(a); b > a && (b[-1] == ' ' || b[-1] == '`');
		     b--)
			;
		if (b == a || b - a >= NAME_LEN || n == LIST_MAX)
			return -1;
		memcpy(list[n], a, (size_t)(b - a));
		list[n++][b - a] = '\0';
	}
	return n;
}

/* Parses the table; returns the number of rows, or -1 with a message. */
static int parse_doc(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int lineno = 0, in_table = 0;

	if (!f) {
		fprintf(stderr, "cannot open '%s'\n", path);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *field[8], handler[LIST_MAX][NAME_LEN];
		int nf = 0, nh;
		struct doc_row *r;

		lineno++;
		if (!in_table) {
			in_table = !strcmp(line, "| state | event | handler | "
						 "action | next |\n");
			if (in_table && !fgets(line, sizeof(line), f))
				break; /* the |---| line */
			lineno += in_table;
			continue;
		}
		if (line[0] != '|')
			break;
		for (char *q = line + 1, *bar; (bar = strchr(q, '|'));
		     q = bar + 1) {
			*bar = '\0';
			if (nf == 8)
				break;
			field[nf++] = q;
		}
		if (nf != 5 || ndoc_rows == DOC_ROWS_MAX) {
			fprintf(stderr, "%s:%d: not a row of 5 cells\n", path,
				lineno);
			fclose(f);
			return -1;
		}
		r = &doc_rows[ndoc_rows++];
		r->line = lineno;
		r->nstates = split_list(field[0], r->states);
		r->nevents = split_list(field[1], r->events);
		r->nnext = split_list(field[4], r->next);
		nh = split_list(field[2], handler);
		if (nh == 1)
			snprintf(r->handler, sizeof(r->handler), "%s",
				 handler[0]);
		if (r->nstates < 1 || r->nevents < 1 || r->nnext < 1 ||
		    nh != 1) {
			fprintf(stderr, "%s:%d: unreadable row\n", path,
				lineno);
			fclose(f);
			return -1;
		}
	}
	fclose(f);
	return ndoc_rows;
}

static bool in_list(char list[LIST_MAX][NAME_LEN], int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(list[i], name))
			return true;
	return false;
}

/* The document's default row ("any", "any other": the cells no other row
 * names), or NULL. */
static bool is_default_row(const struct doc_row *r)
{
	return r->nstates == 1 && !strcmp(r->states[0], "any") &&
	       r->nevents == 1 && !strcmp(r->events[0], "any other");
}

/* The document's row for a cell: the one that names it, else the default
 * row, else NULL. */
static struct doc_row *doc_row_of(const char *state, const char *event)
{
	struct doc_row *fallback = NULL;

	for (int i = 0; i < ndoc_rows; i++) {
		if (in_list(doc_rows[i].states, doc_rows[i].nstates, state) &&
		    in_list(doc_rows[i].events, doc_rows[i].nevents, event))
			return &doc_rows[i];
		if (is_default_row(&doc_rows[i]))
			fallback = &doc_rows[i];
	}
	return fallback;
}

static void observe(void *arg, const struct dpt__coord_cell *cell,
		    const char *next)
{
	struct doc_row *r = doc_row_of(cell->state, cell->event);

	(void)arg;
	if (!r)
		fail_msg("%s in %s: no row in doc/protocol.md", cell->event,
			 cell->state);
	if (!in_list(r->next, r->nnext, next) &&
	    !(in_list(r->next, r->nnext, "same") && !strcmp(next, cell->state)))
		fail_msg("%s in %s led to %s: doc/protocol.md:%d does not "
			 "list it",
			 cell->event, cell->state, next, r->line);
	r->hits++;
	for (size_t i = 0; i < ncells; i++)
		if (!strcmp(cells[i].state, cell->state) &&
		    !strcmp(cells[i].event, cell->event))
			cell_hits[i]++;
	snprintf(state_now, sizeof(state_now), "%s", next);
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

	sent_clear();
	clear_log();
	nnames = 0;
	assert_int_equal(dpt__coord_new(&c, &cfg, &recorder, now), 0);
	dpt__coord_observe(c, observe, NULL);
	snprintf(state_now, sizeof(state_now), "GATHERING");
	return c;
}

static void join_as(struct dpt__coord *c, const char *id, uint32_t task,
		    uint32_t generation, uint32_t caps)
{
	struct dpt__msg m;

	dpt__msg_init(&m, DPT_MSG_JOIN, generation);
	m.u.join = (struct dpt__msg_join){
		.node = 0,
		.local_rank = task,
		.task_id = task,
		.pid = 100 + task,
		.caps = caps,
		.addr = {.host = "127.0.0.1",
			 .port = (uint16_t)(40000 + task)}};
	deliver(c, id, &m);
}

/* A CPU worker of node 0 whose local rank is its task id. */
static void join(struct dpt__coord *c, const char *id, uint32_t task,
		 uint32_t generation)
{
	join_as(c, id, task, generation, DPT_CAP_CPU);
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

static void barrier(struct dpt__coord *c, const char *id, uint32_t generation,
		    uint32_t seq)
{
	struct dpt__msg m;

	dpt__msg_init(&m, DPT_MSG_BARRIER, generation);
	m.seq = seq;
	deliver(c, id, &m);
}

static void fault(struct dpt__coord *c, const char *id, uint32_t generation)
{
	struct dpt__msg m;

	dpt__msg_init(&m, DPT_MSG_FAULT, generation);
	m.u.fault_code = DPT_EPEERLOST;
	deliver(c, id, &m);
}

/* The time moves on by MS; the timers run. */
static void tick(struct dpt__coord *c, int64_t ms)
{
	now += ms;
	dpt__coord_on_tick(c, now, 0);
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
	assert_int_equal(sent_count("w0", DPT_MSG_WELCOME), 1);
	assert_int_equal(sent_count("w1", DPT_MSG_WELCOME), 1);
	dpt__coord_stop(c, "the step ends", now);
	vote(c, "w0", 1, 1, 0, 0);
	vote(c, "w1", 1, 1, 0, 0);
	assert_int_equal(sent_last("w1", DPT_MSG_VOTE_DONE)->u.vote.flags,
			 DPT_VOTE_STOP);
	assert_true(dpt__coord_stop_sent(c));
	simple(c, "w0", DPT_MSG_LEAVE, 1);
	simple(c, "w1", DPT_MSG_LEAVE, 1);
	assert_true(done(c, &code));
	assert_int_equal(code, 0);
	assert_int_equal(dpt__coord_tasks_running(c), 2);

	sent_clear();
	task_exit(c, "stepd0", 0, 0, 7);
	assert_int_equal(sent_count("stepd0", DPT_MSG_ACK), 1);
	assert_int_equal(sent_last("stepd0", DPT_MSG_ACK)->seq, 7);
	assert_int_equal(dpt__coord_tasks_running(c), 1);
	task_exit(c, "stepd1", 1, 0, 8);
	assert_int_equal(sent_last("stepd1", DPT_MSG_ACK)->seq, 8);
	assert_int_equal(dpt__coord_tasks_running(c), 0);
	/* Nothing else is taken once finished: a late heartbeat or join
	 * gets no answer, and the exit code stays. */
	sent_clear();
	simple(c, "w0", DPT_MSG_HEARTBEAT, 1);
	join(c, "w9", 0, 0);
	assert_int_equal((int)sent_total(), 0);
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
	assert_int_equal(sent_last("w0", DPT_MSG_WELCOME)->u.welcome.rank, 0);
	assert_int_equal(sent_last("w1", DPT_MSG_WELCOME)->u.welcome.rank, 1);
	assert_int_equal(sent_count("w1", DPT_MSG_ROSTER), 1);
	sent_clear();
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
	assert_int_equal(sent_last("w0", DPT_MSG_VOTE_DONE)->u.vote.flags, 0);
	assert_false(dpt__coord_stop_sent(c));
	clear_log();
	vote(c, "w0", 1, 2, 0, DPT_VOTE_BUSY);
	vote(c, "w1", 1, 2, 0, DPT_VOTE_STOP);
	assert_int_equal(sent_last("w0", DPT_MSG_VOTE_DONE)->u.vote.flags,
			 DPT_VOTE_STOP | DPT_VOTE_BUSY);
	assert_int_equal(sent_last("w1", DPT_MSG_VOTE_DONE)->u.vote.flags,
			 DPT_VOTE_STOP | DPT_VOTE_BUSY);
	assert_true(dpt__coord_stop_sent(c));
	assert_non_null(strstr(logged, "stop requested by rank 1 (task 1, "));
	/* Once stopped, always: the next vote says so without asking, and
	 * a second request logs nothing new. */
	clear_log();
	vote(c, "w0", 1, 3, 0, DPT_VOTE_STOP);
	vote(c, "w1", 1, 3, 0, 0);
	assert_int_equal(sent_last("w0", DPT_MSG_VOTE_DONE)->u.vote.flags,
			 DPT_VOTE_STOP);
	assert_null(strstr(logged, "stop requested"));
	dpt__coord_destroy(&c);
}

/*
 * A member's SAVE (rank 0 under --dp-ckpt-every=auto) is in the VOTE_DONE
 * of that same vote for every member, and only in that one.
 */
static void member_save_request_reaches_everyone(void **state)
{
	struct dpt__coord *c = running_pair();

	(void)state;
	vote(c, "w0", 1, 1, 0, DPT_VOTE_SAVE);
	vote(c, "w1", 1, 1, 0, 0);
	assert_int_equal(sent_last("w0", DPT_MSG_VOTE_DONE)->u.vote.flags,
			 DPT_VOTE_SAVE);
	assert_int_equal(sent_last("w1", DPT_MSG_VOTE_DONE)->u.vote.flags,
			 DPT_VOTE_SAVE);
	vote(c, "w0", 1, 2, 0, 0);
	vote(c, "w1", 1, 2, 0, DPT_VOTE_BUSY);
	assert_int_equal(sent_last("w0", DPT_MSG_VOTE_DONE)->u.vote.flags,
			 DPT_VOTE_BUSY);
	dpt__coord_destroy(&c);
}

/* Protocol 4 gave VOTE a new meaning (SAVE): a worker of another version is
 * refused at its JOIN, with both versions named. */
static void other_version_join_is_refused(void **state)
{
	struct dpt__coord *c = coord_new(1, 1, 0);
	struct dpt__msg m;
	uint8_t buf[DPT_WIRE_IN_MAX];
	long len;

	(void)state;
	dpt__msg_init(&m, DPT_MSG_JOIN, 0);
	m.u.join = (struct dpt__msg_join){
		.task_id = 0,
		.caps = DPT_CAP_CPU,
		.addr = {.host = "127.0.0.1", .port = 40000}};
	len = dpt__wire_encode(&m, buf, sizeof(buf));
	assert_true(len > 0);
	buf[2] = DPT_WIRE_VERSION - 1;
	dpt__coord_on_message(c, "old", 3, buf, (size_t)len, 10, now);
	assert_int_equal(sent_last("old", DPT_MSG_ERROR)->u.text.code,
			 DPT_EVERSION);
	assert_non_null(strstr(sent_last("old", DPT_MSG_ERROR)->u.text.text,
			       "protocol version 3 is not supported: this "
			       "coordinator speaks version 4"));
	assert_int_equal(sent_count("old", DPT_MSG_WELCOME), 0);
	dpt__coord_destroy(&c);
}

/* The document's table and the code's have the same cells, each with the
 * same handler, and the code's has no hole. */
static void doc_table_matches_code(void **state)
{
	(void)state;
	assert_true(ndoc_rows > 0);
	assert_int_equal(ncells, 4 * 12);
	for (size_t i = 0; i < ncells; i++) {
		struct doc_row *r = doc_row_of(cells[i].state, cells[i].event);

		if (!cells[i].handler)
			fail_msg("%s in %s has no handler in "
				 "coordinator/coord.c",
				 cells[i].event, cells[i].state);
		if (!r)
			fail_msg("%s in %s (handler %s) has no row in "
				 "doc/protocol.md",
				 cells[i].event, cells[i].state,
				 cells[i].handler);
		if (strcmp(r->handler, cells[i].handler))
			fail_msg("%s in %s: doc/protocol.md:%d says %s, the "
				 "code "
				 "%s",
				 cells[i].event, cells[i].state, r->line,
				 r->handler, cells[i].handler);
	}
	/* No cell twice, and nothing the code does not have. */
	for (int i = 0; i < ndoc_rows; i++)
		for (int a = 0;
		     a < doc_rows[i].nstates && !is_default_row(&doc_rows[i]);
		     a++)
			for (int b = 0; b < doc_rows[i].nevents; b++) {
				const char *st = doc_rows[i].states[a];
				const char *ev = doc_rows[i].events[b];
				size_t k;

				if (doc_row_of(st, ev) != &doc_rows[i])
					fail_msg("doc/protocol.md:%d: %s in %s "
						 "is "
						 "also in an earlier row",
						 doc_rows[i].line, ev, st);
				for (k = 0; k < ncells; k++)
					if (!strcmp(cells[k].state, st) &&
					    !strcmp(cells[k].event, ev))
						break;
				if (k == ncells)
					fail_msg("doc/protocol.md:%d: no state "
						 "%s or event %s in the code",
						 doc_rows[i].line, st, ev);
			}
}

/* The first word of a table cell, without backticks, into OUT. */
static void first_word(const char *cell, char *out, size_t size)
{
	size_t n = 0;

	cell += strspn(cell, " `");
	while (n + 1 < size && cell[n] && !strchr(" `|", cell[n])) {
		out[n] = cell[n];
		n++;
	}
	out[n] = '\0';
}

/* doc/protocol.md's "Tasks" table, cell for cell, is the code's. */
static void doc_task_table_matches_code(void **state)
{
	struct dpt__coord_cell code[32];
	size_t ncode = dpt__coord_task_table(code, 32), seen = 0;
	FILE *f = fopen(DPT_TOP_SRCDIR "/doc/protocol.md", "r");
	char line[1024], events[8][NAME_LEN];
	int nevents = 0;

	(void)state;
	assert_non_null(f);
	assert_int_equal(ncode, 4 * 4);
	while (!nevents && fgets(line, sizeof(line), f))
		if (!strncmp(line, "| task state |", 14))
			for (char *q = line + 14;
			     *q && *q != '\n' && nevents < 8;
			     q = strchr(q, '|') + 1)
				first_word(q, events[nevents++], NAME_LEN);
	assert_int_equal(nevents, 4);
	assert_non_null(fgets(line, sizeof(line), f)); /* |---| */
	while (fgets(line, sizeof(line), f) && line[0] == '|') {
		char st[NAME_LEN], next[NAME_LEN];
		char *q = strchr(line + 1, '|');

		first_word(line + 1, st, sizeof(st));
		for (int e = 0; e < nevents && q; e++, q = strchr(q + 1, '|')) {
			first_word(q + 1, next, sizeof(next));
			for (size_t k = 0; k < ncode; k++)
				if (!strcmp(code[k].state, st) &&
				    !strcmp(code[k].event, events[e])) {
					if (strcmp(code[k].handler, next))
						fail_msg("doc/protocol.md: a "
							 "%s task on %s goes "
							 "to %s, the code: %s",
							 st, events[e], next,
							 code[k].handler);
					seen++;
				}
		}
	}
	fclose(f);
	assert_int_equal(seen, ncode);
}

/* Generation 1 of the NCCL backend: rank 0 creates the ID, the
 * coordinator relays it; a member's re-join ends the generation; an ID
 * equal to the previous generation's is refused. */
static void nccl_unique_id_relay_and_rejoin(void **state)
{
	struct dpt__coord *c = coord_new(2, 1, 0);
	struct dpt__msg id;

	(void)state;
	join_as(c, "w0", 0, 0, DPT_CAP_NCCL | DPT_CAP_CPU);
	join_as(c, "w1", 1, 0, DPT_CAP_NCCL);
	assert_string_equal(state_now, "ID_WAIT");
	assert_int_equal(sent_last("w0", DPT_MSG_WELCOME)->u.welcome.flags,
			 DPT_WELCOME_CREATE_ID);
	assert_int_equal(sent_last("w1", DPT_MSG_WELCOME)->u.welcome.flags, 0);
	assert_int_equal(sent_last("w1", DPT_MSG_WELCOME)->u.welcome.backend,
			 DPT_BACKEND_NCCL);
	dpt__msg_init(&id, DPT_MSG_UNIQUE_ID, 1);
	memset(id.u.unique_id, 0x5a, DPT_NCCL_ID_SIZE);
	sent_clear();
	deliver(c, "w1", &id); /* not rank 0: nothing */
	assert_int_equal((int)sent_total(), 0);
	assert_string_equal(state_now, "ID_WAIT");
	barrier(c, "w0", 1, 1); /* a barrier may come before the ID */
	deliver(c, "w0", &id);
	assert_string_equal(state_now, "RUNNING");
	assert_int_equal(sent_last("w0", DPT_MSG_UNIQUE_ID)->u.unique_id[7],
			 0x5a);
	assert_int_equal(sent_last("w1", DPT_MSG_UNIQUE_ID)->u.unique_id[7],
			 0x5a);
	barrier(c, "w1", 1, 1);
	assert_int_equal(sent_count("w0", DPT_MSG_BARRIER_DONE), 1);
	deliver(c, "w0", &id); /* late: ignored while RUNNING */
	assert_string_equal(state_now, "RUNNING");

	/* Rank 1's data plane broke: it re-joins, the generation ends. */
	sent_clear();
	join_as(c, "w1", 1, 1, DPT_CAP_NCCL);
	assert_string_equal(state_now, "GATHERING");
	assert_int_equal(sent_last("w0", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_FAULT);
	assert_int_equal(sent_last("w0", DPT_MSG_GEN_END)->u.text.lost_rank, 1);
	join_as(c, "w0", 0, 1, DPT_CAP_NCCL | DPT_CAP_CPU);
	assert_string_equal(state_now, "ID_WAIT");
	assert_int_equal(sent_last("w0", DPT_MSG_WELCOME)->generation, 2);
	/* Rank 0 offers generation 1's ID again: refused. */
	id.generation = 2;
	deliver(c, "w0", &id);
	assert_string_equal(state_now, "GATHERING");
	assert_non_null(strstr(sent_last("w1", DPT_MSG_GEN_END)->u.text.text,
			       "previous generation's nccl unique id"));
	dpt__coord_destroy(&c);
}

/* ID_WAIT: rank 0 sends no ID within the join timeout; it is evicted,
 * rank 1 re-joins alone. A member leaving in ID_WAIT ends it too. */
static void nccl_id_timeout_and_leave(void **state)
{
	struct dpt__coord *c = coord_new(2, 1, 1000);

	(void)state;
	join_as(c, "w0", 0, 0, DPT_CAP_NCCL);
	join_as(c, "w1", 1, 0, DPT_CAP_NCCL);
	assert_string_equal(state_now, "ID_WAIT");
	sent_clear();
	tick(c, 999);
	assert_string_equal(state_now, "ID_WAIT");
	tick(c, 1);
	assert_string_equal(state_now, "GATHERING");
	assert_int_equal(sent_last("w0", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_EVICTED);
	assert_int_equal(sent_last("w1", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_PEER_LOST);
	join_as(c, "w1", 1, 1, DPT_CAP_NCCL);
	assert_string_equal(state_now, "ID_WAIT");
	assert_int_equal(sent_last("w1", DPT_MSG_WELCOME)->u.welcome.world, 1);
	/* The evicted rank 0 still talks: told again, nothing else. */
	sent_clear();
	simple(c, "w0", DPT_MSG_HEARTBEAT, 1);
	assert_int_equal(sent_last("w0", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_EVICTED);
	assert_string_equal(state_now, "ID_WAIT");
	/* A collective failed before the ID came: the generation ends. */
	fault(c, "w1", 2);
	assert_string_equal(state_now, "GATHERING");
	assert_int_equal(sent_last("w1", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_FAULT);
	join_as(c, "w1", 1, 2, DPT_CAP_NCCL);
	assert_string_equal(state_now, "ID_WAIT");
	/* The last member leaves before the generation runs. */
	simple(c, "w1", DPT_MSG_LEAVE, 3);
	assert_string_equal(state_now, "DONE");
	dpt__coord_destroy(&c);
}

/* The join timeout at the start: the generation forms with those that
 * came if they are --min-workers, else the job fails. */
static void join_timeout_forms_or_fails(void **state)
{
	struct dpt__coord *c = coord_new(3, 2, 5000);
	int code = -1;

	(void)state;
	join(c, "w0", 0, 0);
	join(c, "w1", 1, 0);
	barrier(c, "w0", 1, 1); /* no generation yet: ignored */
	fault(c, "w1", 0);
	assert_string_equal(state_now, "GATHERING");
	tick(c, 1000);
	simple(c, "w0", DPT_MSG_HEARTBEAT, 0);
	simple(c, "w1", DPT_MSG_HEARTBEAT, 0);
	tick(c, 1500);
	simple(c, "w0", DPT_MSG_HEARTBEAT, 0);
	simple(c, "w1", DPT_MSG_HEARTBEAT, 0);
	tick(c, 1500);
	simple(c, "w0", DPT_MSG_HEARTBEAT, 0);
	simple(c, "w1", DPT_MSG_HEARTBEAT, 0);
	tick(c, 1000);
	assert_string_equal(state_now, "RUNNING");
	assert_int_equal(sent_last("w1", DPT_MSG_WELCOME)->u.welcome.world, 2);
	assert_non_null(strstr(logged, "2 of 3 workers joined within 5000 ms"));
	dpt__coord_destroy(&c);

	c = coord_new(3, 3, 5000);
	join(c, "w0", 0, 0);
	for (int i = 0; i < 5; i++) {
		tick(c, 1000);
		simple(c, "w0", DPT_MSG_HEARTBEAT, 0);
	}
	assert_true(done(c, &code));
	assert_int_equal(code, 1);
	assert_int_equal(sent_last("w0", DPT_MSG_ERROR)->u.text.code,
			 DPT_EPEERLOST);
	dpt__coord_destroy(&c);
}

/* After a generation ends, whoever has not re-joined by the join timeout
 * is dropped and the others go on. */
static void join_timeout_drops_the_missing(void **state)
{
	struct dpt__coord *c = coord_new(3, 1, 1000);

	(void)state;
	join(c, "w0", 0, 0);
	join(c, "w1", 1, 0);
	join(c, "w2", 2, 0);
	assert_string_equal(state_now, "RUNNING");
	fault(c, "w0", 1);
	assert_string_equal(state_now, "GATHERING");
	join(c, "w0", 0, 1);
	join(c, "w1", 1, 1);
	assert_string_equal(state_now, "GATHERING"); /* w2 is awaited */
	sent_clear();
	tick(c, 1000);
	assert_string_equal(state_now, "RUNNING");
	assert_int_equal(sent_last("w2", DPT_MSG_ERROR)->u.text.code,
			 DPT_ETIMEDOUT);
	assert_int_equal(sent_last("w0", DPT_MSG_WELCOME)->u.welcome.world, 2);
	assert_int_equal(sent_last("w0", DPT_MSG_WELCOME)->generation, 2);
	dpt__coord_destroy(&c);
}

/* Silence evicts: a member in RUNNING (the generation ends), then the
 * last peer while GATHERING (the job fails). Heartbeats keep a peer. */
static void silence_evicts(void **state)
{
	struct dpt__coord *c = running_pair();
	int code = -1;

	(void)state;
	tick(c, 1000);
	simple(c, "w0", DPT_MSG_HEARTBEAT, 1);
	assert_int_equal(sent_count("w1", DPT_MSG_HEARTBEAT), 1); /* we speak */
	tick(c, 1000);
	assert_string_equal(state_now, "GATHERING");
	assert_int_equal(sent_last("w1", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_EVICTED);
	assert_int_equal(sent_last("w0", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_PEER_LOST);
	assert_int_equal(sent_last("w0", DPT_MSG_GEN_END)->u.text.lost_rank, 1);
	/* The evicted worker still talks: it is told again. */
	sent_clear();
	vote(c, "w1", 1, 1, 0, 0);
	assert_int_equal(sent_last("w1", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_EVICTED);
	tick(c, 1000);
	assert_true(done(c, &code));
	assert_int_equal(code, 1);
	dpt__coord_destroy(&c);

	/* ID_WAIT too. */
	c = coord_new(1, 1, 0);
	join_as(c, "w0", 0, 0, DPT_CAP_NCCL);
	assert_string_equal(state_now, "ID_WAIT");
	tick(c, 2000);
	assert_true(done(c, &code));
	assert_int_equal(code, 1);
	dpt__coord_destroy(&c);
}

/* A closed connection evicts 100 ms later, unless the peer left first
 * (its LEAVE came before the close) or came back; its last messages, read
 * after the close, change nothing. */
static void closed_connection_evicts(void **state)
{
	struct dpt__coord *c = running_pair();
	int code = -1;

	(void)state;
	dpt__coord_on_disconnect(c, fd_of("w1"), now);
	tick(c, 99);
	assert_string_equal(state_now, "RUNNING");
	tick(c, 1);
	assert_string_equal(state_now, "GATHERING");
	assert_int_equal(sent_last("w0", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_PEER_LOST);
	/* While GATHERING: w0 is WAITING; its connection closes too. */
	dpt__coord_on_disconnect(c, fd_of("w0"), now);
	tick(c, 100);
	assert_true(done(c, &code));
	assert_int_equal(code, 1);
	dpt__coord_destroy(&c);

	/* A heartbeat sent before the close but read after it does not tie
	 * the peer to the closed descriptor again: evicted 100 ms after the
	 * close all the same, not at the heartbeat timeout. */
	c = running_pair();
	dpt__coord_on_disconnect(c, fd_of("w1"), now);
	simple(c, "w1", DPT_MSG_HEARTBEAT, 1);
	tick(c, 100);
	assert_string_equal(state_now, "GATHERING");
	assert_int_equal(sent_last("w0", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_PEER_LOST);
	dpt__coord_destroy(&c);

	/* A LEAVE handled after the close was seen still counts. */
	c = running_pair();
	dpt__coord_on_disconnect(c, fd_of("w1"), now);
	simple(c, "w1", DPT_MSG_LEAVE, 1);
	tick(c, 100);
	simple(c, "w0", DPT_MSG_LEAVE, 1);
	assert_true(done(c, &code));
	assert_int_equal(code, 0);
	dpt__coord_destroy(&c);

	/* ID_WAIT. */
	c = coord_new(2, 1, 0);
	join_as(c, "w0", 0, 0, DPT_CAP_NCCL);
	join_as(c, "w1", 1, 0, DPT_CAP_NCCL);
	dpt__coord_on_disconnect(c, fd_of("w0"), now);
	tick(c, 100);
	assert_string_equal(state_now, "GATHERING");
	dpt__coord_destroy(&c);
}

/* slurmstepd's TASK_EXIT: acknowledged always; a member's task ends the
 * generation; a task that never joined before generation 1 is no
 * longer waited for; an unknown task id changes nothing. */
static void task_exits(void **state)
{
	struct dpt__coord *c = coord_new(3, 1, 0);

	(void)state;
	join(c, "w0", 0, 0);
	task_exit(c, "stepd", 2, 0, 1); /* never joined, clean */
	assert_string_equal(state_now, "GATHERING");
	assert_int_equal(sent_last("stepd", DPT_MSG_ACK)->seq, 1);
	join(c, "w1", 1, 0); /* 2 of the 2 still expected */
	assert_string_equal(state_now, "RUNNING");
	task_exit(c, "stepd", 7, 0, 2);
	assert_string_equal(state_now, "RUNNING");
	assert_non_null(strstr(logged, "task 7 exited (exit code 0): no such "
				       "task in a step of 3"));
	simple(c, "w5", DPT_MSG_LEAVE, 1); /* never joined */
	assert_int_equal(sent_last("w5", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_EVICTED);
	assert_string_equal(state_now, "RUNNING");
	task_exit(c, "stepd", 1, 9, 3);
	assert_string_equal(state_now, "GATHERING");
	assert_int_equal(sent_last("w1", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_EVICTED);
	assert_int_equal(sent_last("w0", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_TASK_EXIT);
	assert_non_null(strstr(logged, "its task exited (signal 9)"));
	/* Its worker, not knowing, joins again: refused. */
	join(c, "w1", 1, 1);
	assert_int_equal(sent_last("w1", DPT_MSG_ERROR)->u.text.code,
			 DPT_ECLOSED);
	join(c, "w0", 0, 1);
	assert_string_equal(state_now, "RUNNING");
	assert_int_equal(sent_last("w0", DPT_MSG_WELCOME)->u.welcome.world, 1);
	dpt__coord_destroy(&c);

	/* ID_WAIT. */
	c = coord_new(2, 1, 0);
	join_as(c, "w0", 0, 0, DPT_CAP_NCCL);
	join_as(c, "w1", 1, 0, DPT_CAP_NCCL);
	task_exit(c, "stepd", 0, 256, 1);
	assert_string_equal(state_now, "GATHERING");
	dpt__coord_destroy(&c);
}

/* SHUTDOWN: with nobody connected a normal end, else everyone is told
 * and the coordinator fails; in every live state. */
static void shutdown_in_every_state(void **state)
{
	struct dpt__coord *c = coord_new(2, 1, 0);
	int code = -1;

	(void)state;
	dpt__coord_shutdown(c, "the coordinator got signal 15", now);
	assert_true(done(c, &code));
	assert_int_equal(code, 0);
	dpt__coord_destroy(&c);

	c = coord_new(2, 1, 0);
	join(c, "w0", 0, 0);
	dpt__coord_shutdown(c, "the coordinator got signal 15", now);
	assert_true(done(c, &code));
	assert_int_equal(code, 1);
	assert_int_equal(sent_last("w0", DPT_MSG_ERROR)->u.text.code,
			 DPT_ECLOSED);
	dpt__coord_destroy(&c);

	c = running_pair();
	dpt__coord_shutdown(c, "parent exited", now);
	assert_true(done(c, &code));
	assert_int_equal(code, 1);
	assert_string_equal(sent_last("w1", DPT_MSG_ERROR)->u.text.text,
			    "parent exited");
	dpt__coord_shutdown(c, "again", now); /* DONE: ignored */
	dpt__coord_stop(c, "late", now);
	dpt__coord_destroy(&c);

	c = coord_new(1, 1, 0);
	join_as(c, "w0", 0, 0, DPT_CAP_NCCL);
	dpt__coord_shutdown(c, "stop", now);
	assert_true(done(c, &code));
	dpt__coord_destroy(&c);
}

/* The walltime's STOP may come before the generation runs: the first
 * VOTE_DONE carries it. A BARRIER's release carries no flags. */
static void stop_before_the_generation_runs(void **state)
{
	struct dpt__coord *c = coord_new(2, 1, 0);

	(void)state;
	dpt__coord_stop(c, "the step ends soon", now);
	join_as(c, "w0", 0, 0, DPT_CAP_NCCL);
	join_as(c, "w1", 1, 0, DPT_CAP_NCCL);
	dpt__coord_stop(c, "the step ends soon", now); /* ID_WAIT */
	assert_non_null(strstr(logged, "the step ends soon: the workers are "
				       "told to stop at their next vote"));
	vote(c, "w0", 1, 1, 0, 0);
	barrier(c, "w1", 1, 1);
	assert_int_equal(sent_last("w0", DPT_MSG_VOTE_DONE)->u.vote.flags,
			 DPT_VOTE_STOP);
	assert_int_equal(sent_count("w1", DPT_MSG_BARRIER_DONE), 1);
	assert_true(dpt__coord_stop_sent(c));
	dpt__coord_destroy(&c);
}

/* Votes: failures are counted and the lowest rank's code is given;
 * a duplicate arrival does not release the barrier early; a member
 * leaving un-counts its arrival. */
static void votes_and_duplicate_barriers(void **state)
{
	struct dpt__coord *c = coord_new(3, 1, 0);
	const struct dpt__msg *d;

	(void)state;
	join(c, "w0", 0, 0);
	join(c, "w1", 1, 0);
	join(c, "w2", 2, 0);
	vote(c, "w2", 1, 1, DPT_EIO, 0);
	vote(c, "w2", 1, 1, DPT_EIO, 0); /* duplicate */
	vote(c, "w1", 1, 1, DPT_ENOSPC, 0);
	assert_int_equal(sent_count("w0", DPT_MSG_VOTE_DONE), 0);
	vote(c, "w0", 1, 1, 0, 0);
	d = sent_last("w0", DPT_MSG_VOTE_DONE);
	assert_int_equal(d->u.vote.failed, 2);
	assert_int_equal(d->u.vote.code, DPT_ENOSPC);
	assert_non_null(strstr(logged, "2 of 3 members failed"));
	barrier(c, "w0", 1, 1); /* an old number: ignored */
	barrier(c, "w0", 1, 2);
	barrier(c, "w1", 1, 2);
	simple(c, "w0", DPT_MSG_LEAVE, 1);
	assert_int_equal(sent_count("w1", DPT_MSG_BARRIER_DONE), 0);
	barrier(c, "w2", 1, 2);
	assert_int_equal(sent_count("w1", DPT_MSG_BARRIER_DONE), 1);
	assert_int_equal(sent_count("w0", DPT_MSG_BARRIER_DONE), 0);
	/* After a member left, a newcomer is refused: the job finishes. */
	join(c, "w3", 0, 0);
	assert_int_equal(sent_last("w3", DPT_MSG_ERROR)->u.text.code,
			 DPT_EBUSY);
	dpt__coord_destroy(&c);
}

/* Joins that repeat or collide: a repeated JOIN counts once and keeps
 * its place; the same task from another connection is refused; a full
 * world refuses newcomers; a newcomer with room ends a running (or
 * forming) generation and joins the next. */
static void duplicate_and_late_joins(void **state)
{
	struct dpt__coord *c = coord_new(3, 1, 1000);

	(void)state;
	join(c, "w0", 0, 0);
	join(c, "w0", 0, 0);
	join(c, "w0", 0, 0);
	assert_non_null(strstr(logged, "joins generation 1 (1 of 3)"));
	join(c, "x0", 0, 0); /* task 0 again, another connection */
	assert_int_equal(sent_last("x0", DPT_MSG_ERROR)->u.text.code,
			 DPT_EEXIST);
	join(c, "w1", 1, 0);
	assert_string_equal(state_now, "GATHERING");
	tick(c, 1000); /* the third never comes */
	assert_string_equal(state_now, "RUNNING");
	assert_int_equal(sent_last("w1", DPT_MSG_WELCOME)->u.welcome.world, 2);
	/* It comes now: the generation ends (GROW) and the next has 3. */
	join(c, "w2", 2, 0);
	assert_string_equal(state_now, "GATHERING");
	assert_int_equal(sent_last("w0", DPT_MSG_GEN_END)->u.text.code,
			 DPT_END_GROW);
	join(c, "w0", 0, 1);
	join(c, "w1", 1, 1);
	assert_string_equal(state_now, "RUNNING");
	assert_int_equal(sent_last("w2", DPT_MSG_WELCOME)->u.welcome.world, 3);
	join(c, "w9", 1, 0); /* full */
	assert_int_equal(sent_last("w9", DPT_MSG_ERROR)->u.text.code,
			 DPT_EEXIST);
	join(c, "w8", DPT_WIRE_NO_TASK, 0);
	assert_int_equal(sent_last("w8", DPT_MSG_ERROR)->u.text.code,
			 DPT_EBUSY);
	dpt__coord_destroy(&c);

	/* A newcomer while ID_WAIT. */
	c = coord_new(2, 1, 1000);
	join_as(c, "w0", 0, 0, DPT_CAP_NCCL);
	tick(c, 1000);
	assert_string_equal(state_now, "ID_WAIT");
	join_as(c, "w1", 1, 0, DPT_CAP_NCCL);
	assert_string_equal(state_now, "GATHERING");
	join_as(c, "w0", 0, 1, DPT_CAP_NCCL);
	assert_string_equal(state_now, "ID_WAIT");
	assert_int_equal(sent_last("w1", DPT_MSG_WELCOME)->u.welcome.world, 2);
	dpt__coord_destroy(&c);
}

/* A rejoin storm: every member of a large generation re-joins at once
 * (their data plane broke together), with heartbeats and stale
 * barriers in between. One GEN_END each, then exactly one generation 2
 * with everyone, one WELCOME each. */
static void rejoin_storm(void **state)
{
	enum { W = 64 };
	struct dpt__coord *c = coord_new(W, 1, 0);
	char id[W][16]; /* "s" and any int: gcc -O1 checks the width */

	(void)state;
	for (int i = 0; i < W; i++) {
		snprintf(id[i], sizeof(id[i]), "s%d", i);
		join(c, id[i], (uint32_t)i, 0);
	}
	assert_string_equal(state_now, "RUNNING");
	sent_clear();
	for (int i = W - 1; i >= 0; i--) {
		join(c, id[i], (uint32_t)i, 1);
		simple(c, id[(i + 7) % W], DPT_MSG_HEARTBEAT, 1);
		barrier(c, id[(i + 3) % W], 1, 1);
		if (i > 0)
			assert_string_equal(state_now, "GATHERING");
	}
	assert_string_equal(state_now, "RUNNING");
	for (int i = 0; i < W; i++) {
		const struct dpt__msg *w = sent_last(id[i], DPT_MSG_WELCOME);

		assert_int_equal(sent_count(id[i], DPT_MSG_GEN_END), 1);
		assert_int_equal(sent_count(id[i], DPT_MSG_WELCOME), 1);
		assert_int_equal(w->generation, 2);
		assert_int_equal(w->u.welcome.rank, i);
		assert_int_equal(w->u.welcome.world, W);
	}
	dpt__coord_destroy(&c);
}

/* Leaving: a worker that leaves before generation 1 is no longer
 * expected; the survivors of a broken generation may all leave instead
 * of re-joining, a clean end. */
static void leaving(void **state)
{
	struct dpt__coord *c = coord_new(3, 1, 0);
	int code = -1;

	(void)state;
	join(c, "w0", 0, 0);
	join(c, "w1", 1, 0);
	simple(c, "w1", DPT_MSG_LEAVE, 0);
	assert_string_equal(state_now, "GATHERING");
	join(c, "w2", 2, 0);
	assert_string_equal(state_now, "RUNNING");
	assert_int_equal(sent_last("w2", DPT_MSG_WELCOME)->u.welcome.world, 2);
	fault(c, "w2", 1);
	assert_string_equal(state_now, "GATHERING");
	simple(c, "w0", DPT_MSG_LEAVE, 1);
	simple(c, "w2", DPT_MSG_LEAVE, 1);
	assert_true(done(c, &code));
	assert_int_equal(code, 0);
	assert_non_null(strstr(logged, "every worker left: exiting"));
	dpt__coord_destroy(&c);
}

/*
 * Every cell of the table that does something was executed by the tests
 * above (this runs last), and every row of the document. The one row
 * that no sequence of events can reach is RUNNING's JOIN_TIMEOUT: the
 * timer is disarmed when a generation forms (CPU) or when its ID is
 * relayed (NCCL); the row is there so that the table has no hole.
 */
static void every_row_is_exercised(void **state)
{
	(void)state;
	for (size_t i = 0; i < ncells; i++)
		if (strcmp(cells[i].handler, "ignore") && !cell_hits[i])
			fail_msg("no test executes %s in %s (%s)",
				 cells[i].event, cells[i].state,
				 cells[i].handler);
	for (int i = 0; i < ndoc_rows; i++)
		if (!doc_rows[i].hits &&
		    !(doc_rows[i].nstates == 1 && doc_rows[i].nevents == 1 &&
		      !strcmp(doc_rows[i].states[0], "RUNNING") &&
		      !strcmp(doc_rows[i].events[0], "JOIN_TIMEOUT")))
			fail_msg("no test exercises doc/protocol.md:%d",
				 doc_rows[i].line);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(doc_task_table_matches_code),
		cmocka_unit_test(linger_counts_and_acks_task_exits),
		cmocka_unit_test(member_stop_request_stops_everyone),
		cmocka_unit_test(member_save_request_reaches_everyone),
		cmocka_unit_test(other_version_join_is_refused),
		cmocka_unit_test(doc_table_matches_code),
		cmocka_unit_test(nccl_unique_id_relay_and_rejoin),
		cmocka_unit_test(nccl_id_timeout_and_leave),
		cmocka_unit_test(join_timeout_forms_or_fails),
		cmocka_unit_test(join_timeout_drops_the_missing),
		cmocka_unit_test(silence_evicts),
		cmocka_unit_test(closed_connection_evicts),
		cmocka_unit_test(task_exits),
		cmocka_unit_test(shutdown_in_every_state),
		cmocka_unit_test(stop_before_the_generation_runs),
		cmocka_unit_test(votes_and_duplicate_barriers),
		cmocka_unit_test(duplicate_and_late_joins),
		cmocka_unit_test(rejoin_storm),
		cmocka_unit_test(leaving),
		cmocka_unit_test(every_row_is_exercised), /* last */
	};

	/* The coordinator's logs are part of what is tested where a test
	 * says so, and kept out of the TAP output. */
	dpt__log_set_level(DPT_LOG_INFO);
	dpt__log_set_sink(capture);
	ncells = dpt__coord_table(cells, CELLS_MAX);
	if (ncells > CELLS_MAX ||
	    parse_doc(DPT_TOP_SRCDIR "/doc/protocol.md") < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}

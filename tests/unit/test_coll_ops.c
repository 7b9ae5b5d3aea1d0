/*
 * The collectives backends' operations (worker/coll.h): the list is
 * complete (every backend has every operation it must, names, JOIN
 * capabilities and WELCOME values are its own), WELCOME's value finds its
 * backend, each backend says what it takes, and the CPU backend's
 * operations run a one-rank generation: created from a roster, refused
 * for a roster of another size, aborted, destroyed.
 */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "worker/coll.h"
#include "worker/cpu_comm.h"
#include "worker/nccl.h"

#define STEP_KEY "0123456789abcdefghijABCDEFGHIJ0123456789"

static void test_list_complete(void **state)
{
	const struct dpt__coll_ops *const *all = dpt__coll_backends;
	int n = 0;

	(void)state;
	for (; all[n]; n++) {
		const struct dpt__coll_ops *b = all[n];

		assert_non_null(b->name);
		assert_non_null(b->available);
		assert_non_null(b->unavailable);
		assert_non_null(b->create);
		assert_non_null(b->allreduce);
		assert_non_null(b->broadcast);
		assert_non_null(b->allgather);
		assert_non_null(b->destroy);
		assert_true(b->memory & DPT__COLL_HOST);
		assert_int_equal(
			b->memory & ~(DPT__COLL_HOST | DPT__COLL_DEVICE), 0);
		assert_true(b->bootstrap == DPT_MSG_ROSTER ||
			    b->bootstrap == DPT_MSG_UNIQUE_ID);
		assert_ptr_equal(dpt__coll_find(b->wire), b);
		for (int j = 0; j < n; j++) {
			assert_string_not_equal(all[j]->name, b->name);
			assert_int_not_equal(all[j]->wire, b->wire);
			assert_int_equal(all[j]->cap & b->cap, 0);
		}
	}
	assert_int_equal(n, 2);
}

static void test_find(void **state)
{
	(void)state;
	assert_ptr_equal(dpt__coll_find(DPT_BACKEND_CPU), &dpt__coll_cpu);
	assert_ptr_equal(dpt__coll_find(DPT_BACKEND_NCCL), &dpt__coll_nccl);
	/* Any other value (the wire's rules admit none): the CPU backend,
	 * as before there was a list. */
	assert_ptr_equal(dpt__coll_find(0), &dpt__coll_cpu);
	assert_ptr_equal(dpt__coll_find(99), &dpt__coll_cpu);
}

static void test_capabilities(void **state)
{
	(void)state;
	assert_string_equal(dpt__coll_cpu.name, "cpu");
	assert_int_equal(dpt__coll_cpu.memory, DPT__COLL_HOST);
	assert_int_equal(dpt__coll_cpu.cap, DPT_CAP_CPU);
	assert_true(dpt__coll_cpu.listens);
	assert_true(dpt__coll_cpu.available());
	assert_null(dpt__coll_cpu.root);
	assert_null(dpt__coll_cpu.reduce_refusal);
	assert_null(dpt__coll_cpu.set_stream);

	assert_string_equal(dpt__coll_nccl.name, "nccl");
	assert_int_equal(dpt__coll_nccl.memory,
			 DPT__COLL_HOST | DPT__COLL_DEVICE);
	assert_int_equal(dpt__coll_nccl.cap, DPT_CAP_NCCL);
	assert_false(dpt__coll_nccl.listens);
	assert_non_null(dpt__coll_nccl.root);
	assert_non_null(dpt__coll_nccl.set_stream);
	assert_non_null(dpt__coll_nccl.reduce_refusal(DPT_INT16));
	assert_non_null(dpt__coll_nccl.reduce_refusal(DPT_UINT16));
	assert_null(dpt__coll_nccl.reduce_refusal(DPT_FLOAT32));
	assert_null(dpt__coll_nccl.reduce_refusal(DPT_INT32));
#ifndef HAVE_NCCL
	{
		struct dpt__msg m;

		assert_false(dpt__coll_nccl.available());
		dpt__msg_init(&m, DPT_MSG_UNIQUE_ID, 1);
		assert_int_equal(dpt__coll_nccl.root(&m), DPT_ENOTSUP);
	}
#endif
}

/* Both destroy NULL. */
static void test_destroy_null(void **state)
{
	(void)state;
	for (int i = 0; dpt__coll_backends[i]; i++) {
		void *comm = NULL;

		dpt__coll_backends[i]->destroy(&comm);
		assert_null(comm);
	}
}

/* A roster of one rank, this process, listening on loopback. */
static void one_rank(struct dpt__cpu_listener **l, struct dpt__peer *peer,
		     struct dpt__msg *m, struct dpt__coll_gen *g,
		     atomic_int *abort)
{
	uint16_t port = 0;

	assert_int_equal(dpt__cpu_listen(l, "127.0.0.1", &port), 0);
	*peer = (struct dpt__peer){.port = port, .node = 0};
	snprintf(peer->host, sizeof(peer->host), "127.0.0.1");
	dpt__msg_init(m, DPT_MSG_ROSTER, 4);
	m->world = 1;
	m->roster = peer;
	*g = (struct dpt__coll_gen){
		.generation = 4,
		.rank = 0,
		.world = 1,
		.session = "dpt-test-g4",
		.step_key = STEP_KEY,
		.step_key_len = strlen(STEP_KEY),
		.timeout_ms = 5000,
		.abort = abort,
		.listener = l,
	};
}

static void test_cpu_one_rank(void **state)
{
	const struct dpt__coll_ops *ops = &dpt__coll_cpu;
	struct dpt__cpu_listener *l = NULL;
	struct dpt__peer peer;
	struct dpt__coll_gen g;
	struct dpt__msg m;
	atomic_int abort_flag = 0;
	float in[3] = {1.5f, -2.0f, 4.0f}, out[3] = {0};
	int32_t word = 7, gathered = 0;
	void *comm = NULL;

	(void)state;
	one_rank(&l, &peer, &m, &g, &abort_flag);
	assert_int_equal(ops->create(&comm, &g, &m), 0);
	assert_non_null(comm);
	assert_null(l); /* taken over */
	assert_int_equal(ops->allreduce(comm, in, out, 3, DPT_FLOAT32, DPT_SUM),
			 0);
	assert_memory_equal(in, out, sizeof(in));
	assert_int_equal(ops->broadcast(comm, &word, 1, DPT_INT32, 0), 0);
	assert_int_equal(word, 7);
	assert_int_equal(ops->allgather(comm, &word, &gathered, 1, DPT_INT32),
			 0);
	assert_int_equal(gathered, 7);
	ops->abort(comm);
	assert_int_equal(ops->allreduce(comm, in, out, 3, DPT_FLOAT32, DPT_SUM),
			 DPT_EGENERATION);
	ops->destroy(&comm);
	assert_null(comm);
}

static void test_cpu_roster_of_another_size(void **state)
{
	struct dpt__cpu_listener *l = NULL;
	struct dpt__peer peer;
	struct dpt__coll_gen g;
	struct dpt__msg m;
	atomic_int abort_flag = 0;
	void *comm = NULL;

	(void)state;
	one_rank(&l, &peer, &m, &g, &abort_flag);
	g.world = 2; /* WELCOME said 2, the roster has 1 */
	assert_int_equal(dpt__coll_cpu.create(&comm, &g, &m), DPT_EPROTO);
	assert_null(comm);
	assert_non_null(l); /* still the caller's */
	dpt__cpu_listener_destroy(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list_complete),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_capabilities),
		cmocka_unit_test(test_destroy_null),
		cmocka_unit_test(test_cpu_one_rank),
		cmocka_unit_test(test_cpu_roster_of_another_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The CPU backend's operations (worker/coll.h): its bootstrap is the
 * roster that the coordinator relays (every member's data-plane address,
 * from its JOIN), and its ranks connect to each other from the listener
 * that JOIN advertised (worker/cpu_comm.h).
 */
#include "config.h"

#include <string.h>

#include <dptrain/error.h>

#include "coll.h"
#include "cpu_comm.h"
#include "hash.h"
#include "log.h"

static uint32_t roster_digest(const struct dpt__peer *peers, uint32_t n)
{
	uint64_t h = DPT_FNV1A_INIT;
	for (uint32_t i = 0; i < n; i++) {
		h = dpt__fnv1a(peers[i].host, strlen(peers[i].host), h);
		h = dpt__fnv1a(&peers[i].port, sizeof(peers[i].port), h);
		h = dpt__fnv1a(&peers[i].node, sizeof(peers[i].node), h);
	}
	return (uint32_t)(h ^ (h >> 32));
}

static int available(void)
{
	return 1;
}

static int create(void **out, const struct dpt__coll_gen *g,
		  const struct dpt__msg *m)
{
	struct dpt__cpu_comm *comm = NULL;
	int rc;

	if (m->world != (uint32_t)g->world) {
		dpt__error("the coordinator's roster has %u ranks, its welcome "
			   "said %d",
			   m->world, g->world);
		return DPT_EPROTO;
	}
	rc = dpt__cpu_comm_new(&comm, g->listener, g->rank, g->world, m->roster,
			       g->session, g->step_key, g->step_key_len,
			       g->timeout_ms);
	if (rc)
		return rc;
	dpt__debug("rank %d of %d in generation %u: cpu backend, roster %08x",
		   g->rank, g->world, g->generation,
		   roster_digest(m->roster, m->world));
	*out = comm;
	return 0;
}

static int allreduce(void *comm, const void *send, void *recv, size_t count,
		     enum dpt_dtype dtype, enum dpt_op op)
{
	return dpt__cpu_allreduce(comm, send, recv, count, dtype, op);
}

static int broadcast(void *comm, void *buf, size_t count, enum dpt_dtype dtype,
		     int root)
{
	return dpt__cpu_broadcast(comm, buf, count, dtype, root);
}

static int allgather(void *comm, const void *send, void *recv, size_t count,
		     enum dpt_dtype dtype)
{
	return dpt__cpu_allgather(comm, send, recv, count, dtype);
}

static void comm_abort(void *comm)
{
	dpt__cpu_comm_abort(comm);
}

static void destroy(void **comm)
{
	struct dpt__cpu_comm *c = *comm;

	dpt__cpu_comm_destroy(&c);
	*comm = NULL;
}

const struct dpt__coll_ops dpt__coll_cpu = {
	.name = "cpu",
	.wire = DPT_BACKEND_CPU,
	.cap = DPT_CAP_CPU,
	.memory = DPT__COLL_HOST,
	.listens = true,
	.available = available,
	.unavailable = "",
	.bootstrap = DPT_MSG_ROSTER,
	.create = create,
	.allreduce = allreduce,
	.broadcast = broadcast,
	.allgather = allgather,
	.abort = comm_abort,
	.destroy = destroy,
};

/*
 * libdptrain's worker API: joining generations through the coordinator
 * (worker/agent.c holds the link) and calling the collectives through the
 * operations of the generation's backend (worker/coll.h). The worker state
 * machine is doc/protocol.md's. dpt_init's options and the creation of a
 * context are worker/init.c's.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dptrain/dptrain.h>

#include "agent.h"
#include "client.h"
#include "coll.h"
#include "cpu_comm.h"
#include "cpu_reduce.h"
#include "ctx.h"
#include "internal.h"
#include "log.h"
#include "wire.h"

/* How many generations in a row may break while a worker joins before it
 * gives up: each break is a peer that died during set-up. */
#define JOIN_ATTEMPTS	32
#define LEAVE_LINGER_MS 1000

_Static_assert(ATOMIC_INT_LOCK_FREE == 2,
	       "dpt_request_stop needs a lock-free atomic int");

/* ------------------------------------------------------------ comms */

/* The agent's hook (its thread; worker/ctx.h): a generation ended, or the
 * link died. */
void dpt__on_abort(void *arg, uint32_t generation, int cause)
{
	struct dpt_ctx *ctx = arg;

	(void)cause;
	pthread_mutex_lock(&ctx->lock);
	if (generation == UINT32_MAX)
		ctx->link_dead = true;
	else if (generation > ctx->ended)
		ctx->ended = generation;
	if (ctx->link_dead || ctx->comm_generation <= ctx->ended) {
		if (ctx->comm && ctx->coll->abort)
			ctx->coll->abort(ctx->comm);
		atomic_store(&ctx->comm_abort, 1);
	}
	pthread_cond_broadcast(&ctx->verdict);
	pthread_mutex_unlock(&ctx->lock);
}

/* Take the communicator out of the hook's reach, then free it. */
static void release_comm(struct dpt_ctx *ctx)
{
	void *comm;

	pthread_mutex_lock(&ctx->lock);
	comm = ctx->comm;
	ctx->comm = NULL;
	pthread_mutex_unlock(&ctx->lock);
	if (comm)
		ctx->coll->destroy(&comm);
}

/* Whether the generation being set up is still alive. */
static bool generation_alive(struct dpt_ctx *ctx, uint32_t g)
{
	bool alive;

	pthread_mutex_lock(&ctx->lock);
	alive = !ctx->link_dead && ctx->ended < g;
	pthread_mutex_unlock(&ctx->lock);
	return alive;
}

/* Hand a new communicator to the hook's reach. If the generation died
 * while it was being built, it is aborted at once (the hook came too
 * early to see it). */
static int install_comm(struct dpt_ctx *ctx, void *comm)
{
	int rc = 0;

	pthread_mutex_lock(&ctx->lock);
	ctx->comm = comm;
	ctx->comm_generation = ctx->generation;
	if (ctx->link_dead || ctx->ended >= ctx->generation) {
		if (ctx->coll->abort)
			ctx->coll->abort(comm);
		atomic_store(&ctx->comm_abort, 1);
		rc = DPT_EGENERATION;
	}
	pthread_mutex_unlock(&ctx->lock);
	return rc;
}

/* ------------------------------------------------------------ messages */

/*
 * Wait for a message of TYPE about generation GEN (0: about a generation
 * newer than ours, for a WELCOME), with sequence number SEQ when non-zero.
 * Messages about older generations are stale and skipped. A GEN_END for
 * the awaited generation gives DPT_EGENERATION; a dead link gives its
 * error.
 */
static int await(struct dpt_ctx *ctx, uint8_t type, uint32_t gen, uint32_t seq,
		 struct dpt__msg *out)
{
	for (;;) {
		struct dpt__msg m;
		bool ours;
		int rc = dpt__agent_recv(ctx->agent, &m, -1);

		if (rc == DPT_ETIMEDOUT)
			continue;
		if (rc)
			return rc;
		ours = gen ? m.generation == gen
			   : m.generation > ctx->generation;
		if (m.type == DPT_MSG_GEN_END && ours) {
			dpt__msg_release(&m);
			return DPT_EGENERATION;
		}
		if (m.type == type && ours && (!seq || m.seq == seq)) {
			*out = m;
			return 0;
		}
		dpt__msg_release(&m);
	}
}

static int send_msg(struct dpt_ctx *ctx, struct dpt__msg *m)
{
	int rc = dpt__agent_send(ctx->agent, m);
	if (rc)
		dpt__error("cannot send %s to the coordinator: %s",
			   dpt__msg_type_name(m->type), dpt_strerror(rc));
	return rc;
}

/* Tell the coordinator that this generation's data plane failed, so that
 * it ends the generation for everyone without waiting for a timeout. */
static void report_fault(struct dpt_ctx *ctx, int code)
{
	struct dpt__msg m;

	if (ctx->fault_sent || code >= 0)
		return;
	dpt__msg_init(&m, DPT_MSG_FAULT, ctx->generation);
	m.u.fault_code = code;
	if (dpt__agent_send(ctx->agent, &m) == 0)
		ctx->fault_sent = true;
}

/* ------------------------------------------------------------ joining */

/*
 * The generation's communicator, of the backend that WELCOME named: its
 * bootstrap (sent first when this rank is its ROOT), relayed by the
 * coordinator, then the backend's create. LISTENER is JOIN's.
 */
static int setup_comm(struct dpt_ctx *ctx, bool root,
		      struct dpt__cpu_listener **listener)
{
	const struct dpt__coll_ops *ops = ctx->coll;
	struct dpt__coll_gen g;
	struct dpt__msg m;
	char session[64];
	void *comm = NULL;
	int rc;

	if (root && ops->root) {
		/* This process is the bootstrap's root: it stays in the
		 * generation until every rank has initialised. */
		dpt__msg_init(&m, ops->bootstrap, ctx->generation);
		rc = ops->root(&m);
		if (!rc)
			rc = send_msg(ctx, &m);
		if (rc)
			return rc;
	}
	rc = await(ctx, ops->bootstrap, ctx->generation, 0, &m);
	if (rc)
		return rc;
	pthread_mutex_lock(&ctx->lock);
	if (ctx->ended < ctx->generation)
		atomic_store(&ctx->comm_abort, 0);
	pthread_mutex_unlock(&ctx->lock);
	snprintf(session, sizeof(session), "%s-g%u", ctx->session_base,
		 ctx->generation);
	g = (struct dpt__coll_gen){
		.generation = ctx->generation,
		.rank = ctx->rank,
		.world = ctx->world,
		.local_hint = (int)ctx->local_hint,
		.session = session,
		.step_key = ctx->keys.worker_secret,
		.step_key_len = strlen(ctx->keys.worker_secret),
		.timeout_ms = ctx->comm_timeout_ms,
		.stream = ctx->cuda_stream,
		.abort = &ctx->comm_abort,
		.listener = listener,
	};
	rc = ops->create(&comm, &g, &m);
	dpt__msg_release(&m);
	if (rc)
		return rc;
	return install_comm(ctx, comm);
}

/* One attempt: JOIN, WELCOME, then the backend's set-up. */
static int join_once(struct dpt_ctx *ctx)
{
	struct dpt__cpu_listener *listener = NULL;
	struct dpt__msg m;
	uint16_t port = 0;
	int rc;

	release_comm(ctx);
	ctx->state = W_JOINING;
	ctx->barrier_seq = 0;
	ctx->fault_sent = false;
	if (ctx->caps & DPT_CAP_CPU) {
		/* The data address only: what the roster advertises. */
		rc = dpt__cpu_listen(&listener, ctx->data_host, &port);
		if (rc)
			goto out;
	}
	dpt__msg_init(&m, DPT_MSG_JOIN, ctx->generation);
	m.u.join = (struct dpt__msg_join){
		.node = ctx->node,
		.local_rank = ctx->local_hint,
		.task_id = ctx->task_id,
		.pid = (uint32_t)getpid(),
		.caps = ctx->caps,
		.addr = {.port = port, .node = ctx->node},
	};
	snprintf(m.u.join.addr.host, sizeof(m.u.join.addr.host), "%s",
		 ctx->data_host);
	snprintf(m.u.join.name, sizeof(m.u.join.name), "%s", ctx->hostname);
	rc = send_msg(ctx, &m);
	if (rc)
		goto out;

	rc = await(ctx, DPT_MSG_WELCOME, 0, 0, &m);
	if (rc)
		goto out;
	ctx->generation = m.generation;
	ctx->rank = (int)m.u.welcome.rank;
	ctx->world = (int)m.u.welcome.world;
	ctx->local_rank = (int)m.u.welcome.local_rank;
	ctx->local_world = (int)m.u.welcome.local_world;
	ctx->coll = dpt__coll_find(m.u.welcome.backend);

	if (!ctx->coll->listens)
		dpt__cpu_listener_destroy(&listener);
	rc = setup_comm(ctx, m.u.welcome.flags & DPT_WELCOME_CREATE_ID,
			&listener);
	if (!rc && !generation_alive(ctx, ctx->generation))
		rc = DPT_EGENERATION;
out:
	dpt__cpu_listener_destroy(&listener);
	if (!rc)
		ctx->state = W_ACTIVE;
	return rc;
}

static bool link_error(int rc)
{
	return rc == DPT_ECOORDLOST || rc == DPT_EAUTH || rc == DPT_ECLOSED ||
	       rc == DPT_EBUSY || rc == DPT_EEXIST || rc == DPT_EVERSION;
}

/*
 * Join the next generation. A generation that breaks while it is being
 * set up (a peer died, the coordinator ended it) is not the caller's
 * problem: report it and join the one after.
 */
int dpt__join(struct dpt_ctx *ctx)
{
	int rc = DPT_EGENERATION;

	for (int attempt = 0; attempt < JOIN_ATTEMPTS; attempt++) {
		rc = join_once(ctx);
		if (!rc)
			return 0;
		if (dpt__agent_failed(ctx->agent))
			rc = dpt__agent_failed(ctx->agent);
		if (link_error(rc))
			break;
		if (rc != DPT_EGENERATION && rc != DPT_EPEERLOST &&
		    rc != DPT_ETIMEDOUT && rc != DPT_ENCCL)
			break;
		report_fault(ctx, rc);
		dpt__warn("generation %u broke while rank %d joined it (%s): "
			  "joining the next one",
			  ctx->generation, ctx->rank, dpt_strerror(rc));
	}
	ctx->state = dpt__agent_failed(ctx->agent) ? W_LOST : W_BROKEN;
	ctx->error = rc;
	return rc;
}

/* ------------------------------------------------------------ API */

int dpt_rank(const struct dpt_ctx *ctx)
{
	return ctx ? ctx->rank : -1;
}

int dpt_world_size(const struct dpt_ctx *ctx)
{
	return ctx ? ctx->world : -1;
}

int dpt_local_rank(const struct dpt_ctx *ctx)
{
	return ctx ? ctx->local_rank : -1;
}

uint32_t dpt_generation(const struct dpt_ctx *ctx)
{
	return ctx ? ctx->generation : 0;
}

const char *dpt_backend(const struct dpt_ctx *ctx)
{
	if (!ctx || ctx->state == W_JOINING)
		return "none";
	return ctx->coll->name;
}

/* The coordinator's agent failed (the coordinator is lost): the context
 * is lost for good. Returns that error, or 0. */
static int agent_lost(struct dpt_ctx *ctx)
{
	int rc = dpt__agent_failed(ctx->agent);

	if (rc) {
		ctx->state = W_LOST;
		ctx->error = rc;
	}
	return rc;
}

/* Whether collectives may run now; otherwise the error to return. */
static int ready(struct dpt_ctx *ctx)
{
	int rc;

	if (!ctx)
		return DPT_EINVAL;
	rc = agent_lost(ctx);
	if (rc)
		return rc;
	if (ctx->state == W_BROKEN || ctx->state == W_LOST)
		return ctx->error;
	if (ctx->state != W_ACTIVE)
		return DPT_EINVAL;
	if (!generation_alive(ctx, ctx->generation)) {
		ctx->state = W_BROKEN;
		ctx->error = DPT_EGENERATION;
		return DPT_EGENERATION;
	}
	return 0;
}

/* A peer that vanished from the data plane may have left because the
 * coordinator died (workers abort their collectives when they lose it):
 * wait, at most VERDICT_WAIT_MS, for the coordinator's answer to the
 * FAULT (it ends the generation at once) or for the link to fail. */
#define VERDICT_WAIT_MS 500
static void await_verdict(struct dpt_ctx *ctx)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += VERDICT_WAIT_MS * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&ctx->lock);
	while (!ctx->link_dead && ctx->ended < ctx->generation &&
	       pthread_cond_timedwait(&ctx->verdict, &ctx->lock, &until) == 0)
		;
	pthread_mutex_unlock(&ctx->lock);
}

/* After a collective: a failure breaks the generation (and, when the data
 * plane saw it first, the coordinator is told). */
static int after(struct dpt_ctx *ctx, int rc)
{
	int lost;

	if (!rc || rc == DPT_EINVAL)
		return rc;
	if (rc == DPT_EPEERLOST) {
		report_fault(ctx, rc);
		await_verdict(ctx);
	}
	lost = dpt__agent_failed(ctx->agent);
	if (lost) {
		ctx->state = W_LOST;
		ctx->error = lost;
		return lost;
	}
	ctx->state = W_BROKEN;
	ctx->error = rc;
	if (rc != DPT_EGENERATION)
		report_fault(ctx, rc);
	return rc;
}

static int check_buffers(const void *a, const void *b, size_t count,
			 enum dpt_dtype dtype, size_t factor)
{
	size_t size = dpt_dtype_size(dtype);

	if (!size)
		return DPT_EINVAL;
	if (count && (!a || !b))
		return DPT_EINVAL;
	if (count > SIZE_MAX / size / (factor ? factor : 1))
		return DPT_ERANGE;
	return 0;
}

/* Arrives at the next barrier with a BARRIER, or a VOTE of CODE, and waits
 * for its release in *REPLY (to release when this returns 0). */
static int barrier_round(struct dpt_ctx *ctx, uint8_t type, int code,
			 uint32_t flags, struct dpt__msg *reply)
{
	uint32_t seq = ++ctx->barrier_seq;
	int rc;

	dpt__msg_init(reply, type, ctx->generation);
	reply->seq = seq;
	if (type == DPT_MSG_VOTE) {
		/* A stop asked for on this rank rides on every vote from
		 * then on: the coordinator stops the step at the first. */
		if (atomic_load_explicit(&ctx->stop_requested,
					 memory_order_relaxed)) {
			flags |= DPT_VOTE_STOP;
			if (!ctx->stop_logged)
				dpt__info("rank %d asks the step to stop at "
					  "vote %" PRIu32,
					  ctx->rank, seq);
			ctx->stop_logged = true;
		}
		reply->u.vote.code = code;
		reply->u.vote.flags = flags;
	}
	rc = send_msg(ctx, reply);
	if (!rc)
		rc = await(ctx,
			   type == DPT_MSG_VOTE ? DPT_MSG_VOTE_DONE
						: DPT_MSG_BARRIER_DONE,
			   ctx->generation, seq, reply);
	return rc;
}

int dpt_barrier(struct dpt_ctx *ctx)
{
	struct dpt__msg m;
	int rc = ready(ctx);

	if (rc)
		return rc;
	rc = barrier_round(ctx, DPT_MSG_BARRIER, 0, 0, &m);
	if (!rc)
		dpt__msg_release(&m);
	return after(ctx, rc);
}

int dpt__poll(struct dpt_ctx *ctx, uint32_t mine, uint32_t *flags)
{
	struct dpt__msg m;
	int rc = ready(ctx);

	*flags = 0;
	if (rc)
		return rc;
	rc = barrier_round(ctx, DPT_MSG_VOTE, 0, mine, &m);
	if (!rc) {
		*flags = m.u.vote.flags;
		dpt__msg_release(&m);
	}
	return after(ctx, rc);
}

/* Its own connection, not the agent's: a reply cannot mix with the
 * generation's messages, and a report that fails costs one warning. */
#define REPORT_TIMEOUT_MS 2000
void dpt__report(struct dpt_ctx *ctx, const char *key, const char *value)
{
	int rc;

	if (!ctx || !ctx->secret_hex[0])
		return;
	rc = dpt__client_kv_put(ctx->endpoint, ctx->secret_hex, key, value,
				REPORT_TIMEOUT_MS);
	if (rc)
		dpt__warn("cannot tell the coordinator %s=%s: %s (its requeue "
			  "guard goes without it)",
			  key, value, dpt_strerror(rc));
}

int dpt_should_stop(struct dpt_ctx *ctx, int *stop)
{
	uint32_t flags;
	int rc;

	if (!stop)
		return DPT_EINVAL;
	rc = dpt__poll(ctx, 0, &flags);
	*stop = (flags & DPT_VOTE_STOP) != 0;
	return rc;
}

void dpt_request_stop(struct dpt_ctx *ctx)
{
	/* Nothing else: this runs in signal handlers. */
	if (ctx)
		atomic_store_explicit(&ctx->stop_requested, 1,
				      memory_order_relaxed);
}

int dpt__vote(struct dpt_ctx *ctx, int code, uint32_t *failed, int *first)
{
	struct dpt__msg m;
	int rc = ready(ctx);

	if (rc)
		return rc;
	rc = barrier_round(ctx, DPT_MSG_VOTE, code > 0 ? DPT_EIO : code, 0, &m);
	if (!rc) {
		*failed = m.u.vote.failed;
		if (first)
			*first = m.u.vote.code;
		dpt__msg_release(&m);
	}
	return after(ctx, rc);
}

/* Whether the backend can reduce DTYPE with OP, said in the log when it
 * cannot. Checked before anything is sent, on every rank alike (the
 * answer depends on the arguments and the backend only), so that a
 * refusal leaves the generation intact: after() does not count it as a
 * failure. */
static int reduce_supported(const struct dpt_ctx *ctx, enum dpt_dtype dtype,
			    enum dpt_op op)
{
	const char *why = dpt__reduce_refusal(dtype, op);

	if (why) {
		dpt__error("cannot allreduce dtype %d with op %d: %s",
			   (int)dtype, (int)op, why);
		return DPT_EINVAL;
	}
	if (ctx->coll->reduce_refusal &&
	    (why = ctx->coll->reduce_refusal(dtype))) {
		dpt__error("cannot allreduce dtype %d with the %s backend: %s",
			   (int)dtype, ctx->coll->name, why);
		return DPT_ENOTSUP;
	}
	return 0;
}

int dpt_allreduce(struct dpt_ctx *ctx, const void *send, void *recv,
		  size_t count, enum dpt_dtype dtype, enum dpt_op op)
{
	int rc = ready(ctx);

	if (!rc)
		rc = check_buffers(send, recv, count, dtype, 1);
	if (!rc)
		rc = reduce_supported(ctx, dtype, op);
	if (rc)
		return rc;
	rc = ctx->coll->allreduce(ctx->comm, send, recv, count, dtype, op);
	return after(ctx, rc);
}

int dpt_broadcast(struct dpt_ctx *ctx, void *buf, size_t count,
		  enum dpt_dtype dtype, int root)
{
	int rc = ready(ctx);

	if (!rc)
		rc = check_buffers(buf, buf, count, dtype, 1);
	if (!rc && (root < 0 || root >= ctx->world))
		rc = DPT_EINVAL;
	if (rc)
		return rc;
	rc = ctx->coll->broadcast(ctx->comm, buf, count, dtype, root);
	return after(ctx, rc);
}

int dpt_allgather(struct dpt_ctx *ctx, const void *send, void *recv,
		  size_t count, enum dpt_dtype dtype)
{
	int rc = ready(ctx);

	if (!rc)
		rc = check_buffers(send, recv, count, dtype,
				   (size_t)ctx->world);
	if (rc)
		return rc;
	rc = ctx->coll->allgather(ctx->comm, send, recv, count, dtype);
	return after(ctx, rc);
}

int dpt_set_cuda_stream(struct dpt_ctx *ctx, void *stream)
{
	if (!ctx)
		return DPT_EINVAL;
	ctx->cuda_stream = stream;
	if (ctx->comm && ctx->coll->set_stream)
		ctx->coll->set_stream(ctx->comm, stream);
	return 0;
}

int dpt_rejoin(struct dpt_ctx *ctx)
{
	int rc;

	if (!ctx)
		return DPT_EINVAL;
	rc = agent_lost(ctx);
	return rc ? rc : dpt__join(ctx);
}

int dpt_finalize(struct dpt_ctx **pctx)
{
	struct dpt_ctx *ctx = *pctx;
	int rc = 0;

	if (!ctx)
		return 0;
	/* Before the LEAVE: the last values reach the events while the
	 * coordinator still runs. */
	dpt__log_stop(ctx);
	release_comm(ctx);
	if (ctx->agent) {
		rc = dpt__agent_failed(ctx->agent);
		if (!rc) {
			struct dpt__msg m;
			dpt__msg_init(&m, DPT_MSG_LEAVE, ctx->generation);
			dpt__agent_send(ctx->agent, &m);
		}
		/* The linger lets the LEAVE reach the coordinator before the
		 * socket closes. */
		dpt__agent_stop(&ctx->agent, LEAVE_LINGER_MS);
	}
	pthread_mutex_destroy(&ctx->lock);
	pthread_cond_destroy(&ctx->verdict);
	explicit_bzero(&ctx->keys, sizeof(ctx->keys));
	explicit_bzero(ctx->secret_hex, sizeof(ctx->secret_hex));
	free(ctx);
	*pctx = NULL;
	return rc;
}

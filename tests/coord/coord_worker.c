/*
 * A real worker (and a few hostile clients) for the coordinator's
 * integration tests. The test scripts in tests/coord/ start the
 * coordinator and several of these, and check what they print.
 *
 *   coord_worker run              join, check every collective, leave
 *   coord_worker loop [--rejoin] [--barriers] [--progress] [--step-us=N]
 *                                 join, train until an error, print it
 *                                 (and with --rejoin: rejoin, check, leave);
 *                                 --barriers: barriers only, no data plane;
 *                                 --progress: "step=N t=NS" every 100 steps;
 *                                 --step-us: compute per step (2000)
 *   coord_worker nccl-id ENDPOINT NODE LOCAL_RANK TASK [ROUNDS [reuse]]
 *                                 join as an NCCL-capable worker (raw
 *                                 protocol, no GPU), create the unique ID
 *                                 when told to, print the ID received;
 *                                 ROUNDS generations in a row; "reuse":
 *                                 rank 0 offers the old ID again
 *   coord_worker garbage HOST PORT      raw junk at the coordinator's port
 *   coord_worker hostile ENDPOINT       authenticated but malformed input
 *   coord_worker report-exit ENDPOINT TASK STATUS
 *   coord_worker kv ENDPOINT KEY VALUE  KV_PUT then KV_GET, timed
 *
 * Workers read the usual environment (DPTRAIN_COORDINATOR, DPTRAIN_SECRET,
 * SLURM_NODEID, SLURM_LOCALID, SLURM_PROCID).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include <dptrain/dptrain.h>

#include "client.h"
#include "parse.h"
#include "tests/testlib.h"
#include "wire.h"

static long long wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int fail(const char *what, int rc)
{
	printf("FAIL %s: %s (%s)\n", what, dpt_err_name(rc), dpt_strerror(rc));
	fflush(stdout);
	return 1;
}

/* ------------------------------------------------------------ exactness */

/* Small integers are exact in every float type, so is their mean when it
 * is an integer: the checks compare exactly. */
#define N 257 /* odd, so that no chunking hides an off-by-one */

/* Rank r contributes 2r + (i % 2): the sum is W(W-1) + W(i % 2) <= 256 for
 * W <= 16 and the mean (W-1) + (i % 2), exact in bf16 and fp16 too. */
static int check_allreduce(struct dpt_ctx *ctx, enum dpt_dtype dt,
			   enum dpt_op op)
{
	int r = dpt_rank(ctx), w = dpt_world_size(ctx);
	size_t esz = dpt_dtype_size(dt);
	unsigned char *buf = malloc(N * esz);
	int rc;

	for (int i = 0; i < N; i++) {
		float v = (float)(2 * r + i % 2);
		switch (dt) {
		case DPT_FLOAT32:
			((float *)buf)[i] = v;
			break;
		case DPT_FLOAT64:
			((double *)buf)[i] = v;
			break;
		case DPT_BFLOAT16:
			((uint16_t *)buf)[i] = bf16_of(v);
			break;
		case DPT_FLOAT16:
			((uint16_t *)buf)[i] = half_of(v);
			break;
		default:
			((int32_t *)buf)[i] = (int32_t)v;
		}
	}
	rc = dpt_allreduce(ctx, buf, buf, N, dt, op); /* in place */
	if (rc) {
		free(buf);
		return fail("allreduce", rc);
	}
	for (int i = 0; i < N; i++) {
		double want = op == DPT_SUM ? (double)w * (w - 1) + w * (i % 2)
					    : (double)(w - 1) + (i % 2),
		       got;
		switch (dt) {
		case DPT_FLOAT32:
			got = ((float *)buf)[i];
			break;
		case DPT_FLOAT64:
			got = ((double *)buf)[i];
			break;
		case DPT_BFLOAT16:
			got = float_of_bf16(((uint16_t *)buf)[i]);
			break;
		case DPT_FLOAT16:
			got = float_of_half(((uint16_t *)buf)[i]);
			break;
		default:
			got = ((int32_t *)buf)[i];
		}
		if (got != want) {
			printf("FAIL allreduce dtype %d op %d: element %d is "
			       "%g, "
			       "want %g\n",
			       dt, op, i, got, want);
			free(buf);
			return 1;
		}
	}
	free(buf);
	return 0;
}

static int check_collectives(struct dpt_ctx *ctx)
{
	const enum dpt_dtype dts[] = {DPT_FLOAT32, DPT_FLOAT64, DPT_BFLOAT16,
				      DPT_FLOAT16, DPT_INT32};
	int r = dpt_rank(ctx), w = dpt_world_size(ctx), rc;
	double b[N];
	int32_t *all, mine[N];

	for (size_t k = 0; k < sizeof(dts) / sizeof(dts[0]); k++)
		if (check_allreduce(ctx, dts[k], DPT_SUM) ||
		    check_allreduce(ctx, dts[k], DPT_AVG))
			return 1;

	for (int i = 0; i < N; i++)
		b[i] = r * 1000.0 + i;
	rc = dpt_broadcast(ctx, b, N, DPT_FLOAT64, w - 1);
	if (rc)
		return fail("broadcast", rc);
	for (int i = 0; i < N; i++)
		if (b[i] != (w - 1) * 1000.0 + i) {
			printf("FAIL broadcast: element %d is %g\n", i, b[i]);
			return 1;
		}

	all = calloc((size_t)w * N, sizeof(*all));
	for (int i = 0; i < N; i++)
		mine[i] = r * 100 + i;
	rc = dpt_allgather(ctx, mine, all, N, DPT_INT32); /* out of place */
	for (int k = 0; !rc && k < w * N; k++)
		if (all[k] != (k / N) * 100 + k % N) {
			printf("FAIL allgather: element %d is %d\n", k, all[k]);
			free(all);
			return 1;
		}
	if (rc) {
		free(all);
		return fail("allgather", rc);
	}
	memset(all, 0, (size_t)w * N * sizeof(*all));
	memcpy(all + (size_t)r * N, mine, sizeof(mine));
	rc = dpt_allgather(ctx, all + (size_t)r * N, all, N, DPT_INT32);
	for (int k = 0; !rc && k < w * N; k++)
		if (all[k] != (k / N) * 100 + k % N) {
			printf("FAIL allgather in place: element %d is %d\n", k,
			       all[k]);
			free(all);
			return 1;
		}
	free(all);
	if (rc)
		return fail("allgather in place", rc);
	rc = dpt_barrier(ctx);
	if (rc)
		return fail("barrier", rc);
	return 0;
}

static void print_membership(const char *what, struct dpt_ctx *ctx)
{
	printf("%s rank=%d world=%d local_rank=%d gen=%u backend=%s pid=%d\n",
	       what, dpt_rank(ctx), dpt_world_size(ctx), dpt_local_rank(ctx),
	       dpt_generation(ctx), dpt_backend(ctx), (int)getpid());
	fflush(stdout);
}

/* ------------------------------------------------------------ workers */

/* Check every collective, say so, and leave: a worker's clean end. */
static int check_and_leave(struct dpt_ctx *ctx)
{
	int rc;

	if (check_collectives(ctx)) {
		dpt_finalize(&ctx);
		return 1;
	}
	printf("ok rank=%d\n", dpt_rank(ctx));
	fflush(stdout);
	rc = dpt_finalize(&ctx);
	return rc ? fail("finalize", rc) : 0;
}

static int cmd_run(void)
{
	struct dpt_ctx *ctx = NULL;
	int rc = dpt_init(&ctx, NULL);

	if (rc)
		return fail("init", rc);
	print_membership("joined", ctx);
	return check_and_leave(ctx);
}

/* A training loop: collectives until something breaks. Each step
 * "computes" for STEP_US microseconds; with PROGRESS, every 100th step
 * prints its number and the time. */
static int cmd_loop(bool rejoin, bool barriers_only, long step_us,
		    bool progress)
{
	struct dpt_ctx *ctx = NULL;
	float grad[1024];
	int rc = dpt_init(&ctx, NULL);

	if (rc)
		return fail("init", rc);
	print_membership("joined", ctx);
	for (long step = 1;; step++) {
		for (int i = 0; i < 1024; i++)
			grad[i] = 1.0f;
		rc = train_step(ctx, grad, 1024, barriers_only);
		if (rc)
			break;
		if (progress && step % 100 == 0)
			printf("step=%ld t=%lld\n", step, wall_ns());
		if (step_us)
			usleep((useconds_t)step_us);
	}
	printf("error=%s t=%lld rank=%d\n", dpt_err_name(rc), wall_ns(),
	       dpt_rank(ctx));
	fflush(stdout);
	if (!rejoin || rc == DPT_ECOORDLOST) {
		dpt_finalize(&ctx);
		return rc == DPT_ECOORDLOST ? 3 : 2;
	}
	rc = dpt_rejoin(ctx);
	if (rc) {
		fail("rejoin", rc);
		dpt_finalize(&ctx);
		return 1;
	}
	print_membership("rejoined", ctx);
	return check_and_leave(ctx);
}

/* ------------------------------------------------------------ hostile */

static int tcp_connect(const char *host, const char *port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
	struct addrinfo *res;
	int fd;

	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	fd = socket(res->ai_family, SOCK_STREAM, 0);
	if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* Connections that could not be made: the coordinator stopped listening
 * (or died) while the junk arrived. */
static int junk_refused;

static void send_junk(const char *host, const char *port, const void *p,
		      size_t n)
{
	int fd = tcp_connect(host, port);
	if (fd < 0) {
		printf("cannot connect to %s:%s\n", host, port);
		junk_refused++;
		return;
	}
	(void)!write(fd, p, n);
	usleep(50000);
	close(fd);
}

/* Junk at the TCP level: random bytes, truncated and lying ZMTP
 * greetings, a NULL-mechanism client, a connection that says nothing. */
static int cmd_garbage(const char *host, const char *port)
{
	unsigned char buf[65536];
	unsigned char greeting[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0};
	int fd;

	srand((unsigned)getpid());
	for (int round = 0; round < 20; round++) {
		size_t n = (size_t)(rand() % (int)sizeof(buf)) + 1;
		for (size_t i = 0; i < n; i++)
			buf[i] = (unsigned char)rand();
		send_junk(host, port, buf, n);
	}
	/* A ZMTP 3.0 greeting with the NULL mechanism: the server wants
	 * CURVE and must refuse it. */
	memcpy(greeting + 12, "NULL", 4);
	send_junk(host, port, greeting, sizeof(greeting));
	/* A greeting, then a frame header claiming 2^63 bytes. */
	memcpy(greeting + 12, "CURVE", 5);
	memcpy(buf, greeting, 64);
	memcpy(buf + 64, "\x06\x7f\xff\xff\xff\xff\xff\xff\xff", 9);
	send_junk(host, port, buf, 73);
	/* Half a greeting, then silence until the handshake times out on
	 * the server's side: we just close after a moment. */
	send_junk(host, port, greeting, 5);
	fd = tcp_connect(host, port);
	if (fd >= 0) {
		usleep(200000);
		close(fd);
	} else {
		junk_refused++;
	}
	/* Every connection was taken, the last one after all the junk
	 * before it: the coordinator still listened. What it did with them
	 * is its log's to say (tests/coord/security.sh). */
	printf("garbage sent: %d of 24 connections refused\n", junk_refused);
	return junk_refused ? 1 : 0;
}

struct client {
	void *ctx, *sock;
};

static int client_open(struct client *c, const char *endpoint,
		       const struct dpt__curve_keys *k)
{
	int zero = 0;
	c->ctx = zmq_ctx_new();
	c->sock = zmq_socket(c->ctx, ZMQ_DEALER);
	zmq_setsockopt(c->sock, ZMQ_LINGER, &zero, sizeof(zero));
	dpt__client_limit(c->sock, DPT_WIRE_MSG_MAX, 10000);
	zmq_setsockopt(c->sock, ZMQ_CURVE_SERVERKEY, k->coord_public, 40);
	zmq_setsockopt(c->sock, ZMQ_CURVE_PUBLICKEY, k->worker_public, 40);
	zmq_setsockopt(c->sock, ZMQ_CURVE_SECRETKEY, k->worker_secret, 40);
	return zmq_connect(c->sock, endpoint);
}

static void client_close(struct client *c)
{
	zmq_close(c->sock);
	zmq_ctx_term(c->ctx);
}

/* The next decodable reply within MS, or -1. */
static int client_reply(struct client *c, struct dpt__msg *m, int ms)
{
	zmq_pollitem_t it = {.socket = c->sock, .events = ZMQ_POLLIN};
	uint8_t buf[4096];
	int n;

	while (zmq_poll(&it, 1, ms) == 1) {
		n = zmq_recv(c->sock, buf, sizeof(buf), 0);
		if (n > 0 && (size_t)n <= sizeof(buf) &&
		    dpt__wire_decode(buf, (size_t)n, sizeof(buf), m) == 0)
			return 0;
	}
	return -1;
}

static void client_send(struct client *c, const struct dpt__msg *m)
{
	uint8_t buf[1024];
	long n = dpt__wire_encode(m, buf, sizeof(buf));
	if (n > 0)
		zmq_send(c->sock, buf, (size_t)n, 0);
}

/* A client with the secret that sends what no worker would. Replies are
 * checked where the protocol promises one. */
static int cmd_hostile(const char *endpoint)
{
	struct dpt__curve_keys k;
	struct client c;
	struct dpt__msg m, r;
	uint8_t buf[2048];
	long n;
	int failures = 0;

	if (dpt__wire_derive_keys(getenv("DPTRAIN_SECRET"), &k) != 0)
		return fail("keys", DPT_EINVAL);

	/* 1. An oversized message: the coordinator drops the connection
	 * (ZMQ_MAXMSGSIZE) without reading it. */
	client_open(&c, endpoint, &k);
	{
		size_t big = 2u << 20;
		char *p = calloc(1, big);
		zmq_send(c.sock, p, big, 0);
		free(p);
	}
	usleep(300000);
	client_close(&c);

	client_open(&c, endpoint, &k);
	/* 2. A JOIN of another protocol version: refused with EVERSION. */
	dpt__msg_init(&m, DPT_MSG_JOIN, 0);
	m.u.join =
		(struct dpt__msg_join){.caps = DPT_CAP_CPU,
				       .addr = {.host = "127.0.0.1", .port = 9},
				       .task_id = DPT_WIRE_NO_TASK};
	n = dpt__wire_encode(&m, buf, sizeof(buf));
	buf[2] = 9;
	zmq_send(c.sock, buf, (size_t)n, 0);
	if (client_reply(&c, &r, 2000) != 0 || r.type != DPT_MSG_ERROR ||
	    r.u.text.code != DPT_EVERSION) {
		printf("FAIL no EVERSION error for a version 9 join\n");
		failures++;
	} else {
		printf("version 9 join refused: %s\n", r.u.text.text);
	}
	/* 3. Truncated, lying, unknown, multi-frame, direction-violating. */
	buf[2] = DPT_WIRE_VERSION;
	zmq_send(c.sock, buf, 7, 0);
	buf[15] ^= 0x40;
	zmq_send(c.sock, buf, (size_t)n, 0);
	buf[15] ^= 0x40;
	buf[3] = 200;
	zmq_send(c.sock, buf, (size_t)n, 0);
	buf[3] = DPT_MSG_JOIN;
	zmq_send(c.sock, buf, (size_t)n, ZMQ_SNDMORE);
	zmq_send(c.sock, buf, (size_t)n, 0);
	dpt__msg_init(&m, DPT_MSG_WELCOME, 1);
	m.u.welcome = (struct dpt__msg_welcome){.world = 1,
						.local_world = 1,
						.backend = DPT_BACKEND_CPU,
						.heartbeat_ms = 1,
						.timeout_ms = 1};
	client_send(&c, &m);
	for (int i = 0; i < 200; i++) {
		size_t len = (size_t)(rand() % 300);
		for (size_t j = 0; j < len; j++)
			buf[j] = (uint8_t)rand();
		if (len >= 3) {
			buf[0] = DPT_WIRE_MAGIC0;
			buf[1] = DPT_WIRE_MAGIC1;
			buf[2] = DPT_WIRE_VERSION;
		}
		zmq_send(c.sock, buf, len, 0);
	}
	/* 4. Messages of members from a stranger, replays of old
	 * generations: ignored, or answered with an eviction notice. */
	dpt__msg_init(&m, DPT_MSG_BARRIER, 1);
	m.seq = 1;
	client_send(&c, &m);
	dpt__msg_init(&m, DPT_MSG_UNIQUE_ID, 1);
	client_send(&c, &m);
	dpt__msg_init(&m, DPT_MSG_FAULT, 1);
	m.u.fault_code = DPT_EPEERLOST;
	client_send(&c, &m);
	dpt__msg_init(&m, DPT_MSG_HEARTBEAT, 7);
	client_send(&c, &m);
	/* 5. A task exit for a task that does not exist: acknowledged. */
	dpt__msg_init(&m, DPT_MSG_TASK_EXIT, 0);
	m.seq = 4242;
	m.u.task_exit.task_id = 999999;
	client_send(&c, &m);
	{
		bool acked = false;
		for (int i = 0; i < 20 && !acked; i++)
			if (client_reply(&c, &r, 1000) == 0 &&
			    r.type == DPT_MSG_ACK && r.seq == 4242)
				acked = true;
		if (!acked) {
			printf("FAIL no ACK for a task exit\n");
			failures++;
		}
	}
	client_close(&c);
	printf(failures ? "hostile client: %d failures\n"
			: "hostile client done\n",
	       failures);
	return failures ? 1 : 0;
}

/* An NCCL worker as the coordinator sees it, without NCCL or a GPU: the
 * unique ID is opaque to the coordinator, so random bytes stand for
 * ncclGetUniqueId. Prints the membership and the ID as relayed ("joined
 * ... id=HEX"), then leaves; with ROUNDS > 1 it re-joins after each ID
 * instead (which ends the generation for all), and with REUSE rank 0
 * offers the previous generation's ID again. Heartbeats while it waits,
 * as libdptrain's agent would. */
static int cmd_nccl_id(const char *endpoint, const char *node_s,
		       const char *local_s, const char *task_s, int rounds,
		       bool reuse)
{
	struct dpt__curve_keys k;
	struct client c;
	struct dpt__msg m, r;
	struct dpt__msg_welcome w = {0};
	long node, local, task;
	uint32_t gen = 0, done_gen = 0;
	bool welcomed = false;
	long long deadline = wall_ns() + 20000000000LL;
	uint8_t prev[DPT_NCCL_ID_SIZE];
	bool have_prev = false;
	char hex[2 * DPT_NCCL_ID_SIZE + 1];

	if (dpt__parse_long(node_s, 0, UINT32_MAX, &node) ||
	    dpt__parse_long(local_s, 0, UINT32_MAX, &local) ||
	    dpt__parse_long(task_s, 0, UINT32_MAX, &task))
		return fail("arguments", DPT_EINVAL);
	if (dpt__wire_derive_keys(getenv("DPTRAIN_SECRET"), &k) != 0)
		return fail("keys", DPT_EINVAL);
	client_open(&c, endpoint, &k);
	dpt__msg_init(&m, DPT_MSG_JOIN, 0);
	m.u.join = (struct dpt__msg_join){.node = (uint32_t)node,
					  .local_rank = (uint32_t)local,
					  .task_id = (uint32_t)task,
					  .pid = (uint32_t)getpid(),
					  .caps = DPT_CAP_NCCL,
					  .addr = {.host = "127.0.0.1"}};
	client_send(&c, &m);
	while (wall_ns() < deadline) {
		if (client_reply(&c, &r, 300) != 0) {
			struct dpt__msg hb;
			dpt__msg_init(&hb, DPT_MSG_HEARTBEAT, gen);
			client_send(&c, &hb);
			continue;
		}
		if (r.type == DPT_MSG_WELCOME) {
			w = r.u.welcome;
			gen = r.generation;
			welcomed = true;
			if (w.flags & DPT_WELCOME_CREATE_ID) {
				struct dpt__msg id;
				dpt__msg_init(&id, DPT_MSG_UNIQUE_ID, gen);
				if (reuse && have_prev)
					memcpy(id.u.unique_id, prev,
					       DPT_NCCL_ID_SIZE);
				else if (getrandom(id.u.unique_id,
						   DPT_NCCL_ID_SIZE,
						   0) != DPT_NCCL_ID_SIZE)
					return fail("getrandom", DPT_ESYS);
				client_send(&c, &id);
			}
		} else if (r.type == DPT_MSG_UNIQUE_ID && welcomed &&
			   r.generation == gen) {
			for (int i = 0; i < DPT_NCCL_ID_SIZE; i++)
				snprintf(hex + 2 * i, 3, "%02x",
					 r.u.unique_id[i]);
			printf("joined rank=%u world=%u local_rank=%u "
			       "local_world=%u gen=%u backend=%u create=%d "
			       "id=%s\n",
			       w.rank, w.world, w.local_rank, w.local_world,
			       gen, w.backend,
			       (w.flags & DPT_WELCOME_CREATE_ID) ? 1 : 0, hex);
			done_gen = gen;
			welcomed = false;
			if (--rounds > 0) {
				/* Re-join: JOIN from a member. */
				memcpy(prev, r.u.unique_id, DPT_NCCL_ID_SIZE);
				have_prev = true;
				m.generation = gen;
				client_send(&c, &m);
			} else {
				dpt__msg_init(&m, DPT_MSG_LEAVE, gen);
				client_send(&c, &m);
				usleep(100000); /* LINGER is 0: let it go */
				client_close(&c);
				return 0;
			}
		} else if (r.type == DPT_MSG_GEN_END && done_gen &&
			   r.generation == done_gen) {
			/* Another member's re-join ended the generation
			 * whose ID we have: expected, we re-join too. */
		} else if (r.type == DPT_MSG_ERROR ||
			   r.type == DPT_MSG_GEN_END) {
			printf("FAIL %s gen=%u: %s\n",
			       dpt__msg_type_name(r.type), r.generation,
			       r.u.text.text);
			dpt__msg_release(&r);
			client_close(&c);
			return 1;
		}
		dpt__msg_release(&r);
	}
	client_close(&c);
	printf("FAIL no unique id within 20 s\n");
	return 1;
}

static int cmd_report_exit(const char *endpoint, const char *task,
			   const char *status)
{
	long t, s;
	int rc;

	if (dpt__parse_long(task, 0, UINT32_MAX, &t) ||
	    dpt__parse_long(status, INT32_MIN, INT32_MAX, &s))
		return fail("arguments", DPT_EINVAL);
	rc = dpt__client_report_exit(endpoint, getenv("DPTRAIN_SECRET"),
				     (uint32_t)t, (int32_t)s, 2000);
	if (rc)
		return fail("report-exit", rc);
	printf("reported t=%lld\n", wall_ns());
	return 0;
}

/* A key-value exchange as the SPANK plugin does it (a connection of its
 * own, KV_PUT then KV_GET): prints how long each took. */
static int cmd_kv(const char *endpoint, const char *key, const char *value)
{
	const char *secret = getenv("DPTRAIN_SECRET");
	char got[DPT_KV_VALUE_MAX + 1];
	long long t0 = wall_ns(), t1, t2;
	int rc = dpt__client_kv_put(endpoint, secret, key, value, 10000);

	if (rc)
		return fail("kv put", rc);
	t1 = wall_ns();
	rc = dpt__client_kv_get(endpoint, secret, key, got, sizeof(got), 10000);
	if (rc)
		return fail("kv get", rc);
	t2 = wall_ns();
	if (strcmp(got, value)) {
		printf("FAIL kv get: %s, want %s\n", got, value);
		return 1;
	}
	printf("kv put_ms=%lld get_ms=%lld\n", (t1 - t0) / 1000000,
	       (t2 - t1) / 1000000);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "run"))
		return cmd_run();
	if (argc >= 2 && !strcmp(argv[1], "loop")) {
		bool rejoin = false, barriers = false, progress = false;
		long step_us = 2000;
		for (int i = 2; i < argc; i++)
			if (!strcmp(argv[i], "--rejoin"))
				rejoin = true;
			else if (!strcmp(argv[i], "--barriers"))
				barriers = true;
			else if (!strcmp(argv[i], "--progress"))
				progress = true;
			else if (!strncmp(argv[i], "--step-us=", 10) &&
				 !dpt__parse_long(argv[i] + 10, 0, 10000000,
						  &step_us))
				continue;
			else
				return fail(argv[i], DPT_EINVAL);
		return cmd_loop(rejoin, barriers, step_us, progress);
	}
	if (argc >= 6 && argc <= 8 && !strcmp(argv[1], "nccl-id"))
		return cmd_nccl_id(argv[2], argv[3], argv[4], argv[5],
				   argc >= 7 ? (int)strtol(argv[6], NULL, 10)
					     : 1,
				   argc == 8 && !strcmp(argv[7], "reuse"));
	if (argc == 4 && !strcmp(argv[1], "garbage"))
		return cmd_garbage(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "hostile"))
		return cmd_hostile(argv[2]);
	if (argc == 5 && !strcmp(argv[1], "report-exit"))
		return cmd_report_exit(argv[2], argv[3], argv[4]);
	if (argc == 5 && !strcmp(argv[1], "kv"))
		return cmd_kv(argv[2], argv[3], argv[4]);
	fprintf(stderr, "usage: coord_worker run|loop [--rejoin] [--barriers] "
			"[--progress] [--step-us=N]|"
			"nccl-id ENDPOINT NODE LOCAL TASK [ROUNDS [reuse]]|"
			"garbage HOST PORT|hostile ENDPOINT|"
			"report-exit ENDPOINT TASK STATUS|"
			"kv ENDPOINT KEY VALUE\n");
	return 2;
}

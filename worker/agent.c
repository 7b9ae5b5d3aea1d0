#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include <dptrain/error.h>

#include "clock.h"
#include "agent.h"
#include "client.h"
#include "log.h"

#define STOP_BYTE                                                              \
	'S' /* a one-byte pipe message: no wire message is that short */
#define AUTH_FAILURES 3
/* One TCP connect to the coordinator: ZeroMQ retries after it, until the
 * caller's own connect timeout (DPTRAIN_CONNECT_TIMEOUT_MS) runs out. */
#define CONNECT_MS 10000

struct dpt__agent {
	void *ctx;
	void *pipe; /* the application thread's end */
	pthread_t thread;
	bool started;
	char pipe_name[64];
	char endpoint[512];
	struct dpt__curve_keys keys;
	int connect_timeout_ms;
	int heartbeat_ms;
	int timeout_ms;
	dpt__agent_abort_fn abort_fn;
	void *abort_arg;
	atomic_int failed;
	atomic_int linger_ms;
};

/* The agent thread's own state. */
struct link {
	struct dpt__agent *a;
	void *dealer;
	void *pipe;
	void *mon;
	int64_t started;
	int64_t last_rx;
	int64_t last_tx;
	bool contact;	   /* heard from the coordinator at least once */
	bool joined;	   /* a JOIN was sent: heartbeats may start */
	bool handshake_ok; /* a CURVE handshake succeeded */
	bool left;	   /* LEAVE sent: the coordinator may go */
	int auth_failures;
	uint32_t generation;
	int heartbeat_ms;
	int timeout_ms;
};

/* The link is dead: abort the collectives, tell the application thread
 * (as an ERROR message in the pipe, so that it wakes up), stop talking. */
static void fail_link(struct link *l, int code, const char *text)
{
	struct dpt__msg m;
	uint8_t buf[DPT_WIRE_HDR_SIZE + 8 + DPT_WIRE_TEXT_MAX];
	long len;
	int expected = 0;

	if (!atomic_compare_exchange_strong(&l->a->failed, &expected, code))
		return;
	dpt__error("%s", text);
	l->a->abort_fn(l->a->abort_arg, UINT32_MAX, code);
	dpt__msg_init(&m, DPT_MSG_ERROR, 0);
	m.u.text.code = code;
	snprintf(m.u.text.text, sizeof(m.u.text.text), "%.200s", text);
	len = dpt__wire_encode(&m, buf, sizeof(buf));
	if (len > 0)
		zmq_send(l->pipe, buf, (size_t)len, ZMQ_DONTWAIT);
}

/* Handshake events of the DEALER, to tell a refused secret from a
 * coordinator that is merely slow (see on_monitor). Optional: without
 * them a refused worker fails after the connect timeout instead. */
static void open_monitor(struct link *l)
{
	char name[80];

	snprintf(name, sizeof(name), "%s-monitor", l->a->pipe_name);
	if (zmq_socket_monitor(l->dealer, name,
			       ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
				       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
				       ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
				       ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
				       ZMQ_EVENT_DISCONNECTED) != 0)
		return;
	l->mon = zmq_socket(l->a->ctx, ZMQ_PAIR);
	if (l->mon && zmq_connect(l->mon, name) != 0) {
		zmq_close(l->mon);
		l->mon = NULL;
	}
}

static int setup_dealer(struct link *l)
{
	struct dpt__agent *a = l->a;
	uint8_t id[16];
	int zero = 0, ivl = 100, ivl_max = 1000, hwm = 10000;

	/* A routing id of our own: after a reconnect the coordinator sees
	 * the same peer (ZMQ_ROUTER_HANDOVER), not a stranger. Ids starting
	 * with a zero byte are reserved by ZeroMQ. */
	if (getrandom(id, sizeof(id), 0) != (ssize_t)sizeof(id))
		return DPT_ESYS;
	id[0] |= 0x80;
	l->dealer = zmq_socket(a->ctx, ZMQ_DEALER);
	if (!l->dealer)
		return DPT_ESYS;
	if (zmq_setsockopt(l->dealer, ZMQ_ROUTING_ID, id, sizeof(id)) ||
	    zmq_setsockopt(l->dealer, ZMQ_CURVE_SERVERKEY, a->keys.coord_public,
			   DPT_Z85_KEY_LEN) ||
	    zmq_setsockopt(l->dealer, ZMQ_CURVE_PUBLICKEY,
			   a->keys.worker_public, DPT_Z85_KEY_LEN) ||
	    zmq_setsockopt(l->dealer, ZMQ_CURVE_SECRETKEY,
			   a->keys.worker_secret, DPT_Z85_KEY_LEN) ||
	    dpt__client_limit(l->dealer, DPT_WIRE_MSG_MAX, CONNECT_MS) ||
	    zmq_setsockopt(l->dealer, ZMQ_LINGER, &zero, sizeof(zero)) ||
	    zmq_setsockopt(l->dealer, ZMQ_RECONNECT_IVL, &ivl, sizeof(ivl)) ||
	    zmq_setsockopt(l->dealer, ZMQ_RECONNECT_IVL_MAX, &ivl_max,
			   sizeof(ivl_max)) ||
	    zmq_setsockopt(l->dealer, ZMQ_SNDHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(l->dealer, ZMQ_RCVHWM, &hwm, sizeof(hwm)))
		return DPT_ESYS;
	open_monitor(l);
	if (zmq_connect(l->dealer, a->endpoint) != 0) {
		dpt__error("cannot connect to the coordinator at '%s': %s",
			   a->endpoint, zmq_strerror(errno));
		return DPT_ECONFIG;
	}
	return 0;
}

static void on_dealer(struct link *l, int64_t now);

/* A connection that closes before its CURVE handshake completes, again
 * and again, means the coordinator does not accept our keys: another
 * step's secret. Say so instead of waiting for the connect timeout. A
 * connection that closes after it was established means the coordinator
 * exited or was killed: fail at once instead of after the timeout (the
 * coordinator evicts a worker whose connection closed, so no reconnect
 * could save it). */
static void on_monitor(struct link *l, int64_t now)
{
	zmq_msg_t ev, where;
	uint16_t event = 0;

	zmq_msg_init(&ev);
	zmq_msg_init(&where);
	if (zmq_msg_recv(&ev, l->mon, ZMQ_DONTWAIT) >= 0) {
		if (zmq_msg_more(&ev))
			zmq_msg_recv(&where, l->mon, 0);
		if (zmq_msg_size(&ev) >= 2)
			memcpy(&event, zmq_msg_data(&ev), 2);
	}
	zmq_msg_close(&ev);
	zmq_msg_close(&where);
	if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
		l->handshake_ok = true;
		l->auth_failures = 0;
		return;
	}
	if (event == ZMQ_EVENT_DISCONNECTED && l->handshake_ok && !l->left) {
		char text[600];
		/* What it said before it closed (an ERROR, say) comes first. */
		on_dealer(l, now);
		snprintf(
			text, sizeof(text),
			"the connection to the coordinator at '%.400s' closed: "
			"it exited or was killed",
			l->a->endpoint);
		fail_link(l, DPT_ECOORDLOST, text);
		return;
	}
	if (event == 0 || l->handshake_ok)
		return;
	if (++l->auth_failures >= AUTH_FAILURES) {
		char text[600];
		snprintf(text, sizeof(text),
			 "the coordinator at '%.400s' refused this worker: "
			 "DPTRAIN_SECRET is not the secret of its job step",
			 l->a->endpoint);
		fail_link(l, DPT_EAUTH, text);
	}
}

/* A message from the coordinator: note the contact, act on what must not
 * wait for the application thread, and pass it on. */
static void on_dealer(struct link *l, int64_t now)
{
	for (int i = 0; i < 256; i++) {
		zmq_msg_t msg;
		const uint8_t *d;
		size_t len;
		struct dpt__msg m;
		uint8_t type;

		zmq_msg_init(&msg);
		if (zmq_msg_recv(&msg, l->dealer, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&msg);
			return;
		}
		if (zmq_msg_more(&msg)) {
			zmq_msg_close(&msg);
			continue; /* never ours: the next frames are dropped too
				   */
		}
		l->last_rx = now;
		l->contact = true;
		d = zmq_msg_data(&msg);
		len = zmq_msg_size(&msg);
		type = len >= DPT_WIRE_HDR_SIZE ? d[3] : 0;
		if (type == DPT_MSG_WELCOME || type == DPT_MSG_GEN_END ||
		    type == DPT_MSG_ERROR) {
			if (dpt__wire_decode(d, len, DPT_WIRE_MSG_MAX, &m) !=
			    0) {
				dpt__warn("dropped a malformed %s from the "
					  "coordinator",
					  dpt__msg_type_name(type));
				zmq_msg_close(&msg);
				continue;
			}
			if (type == DPT_MSG_WELCOME) {
				l->generation = m.generation;
				l->heartbeat_ms = (int)m.u.welcome.heartbeat_ms;
				l->timeout_ms = (int)m.u.welcome.timeout_ms;
			} else if (type == DPT_MSG_GEN_END) {
				l->a->abort_fn(l->a->abort_arg, m.generation,
					       DPT_EGENERATION);
			} else {
				char text[320];
				snprintf(text, sizeof(text),
					 "the coordinator says: %s",
					 m.u.text.text);
				zmq_msg_close(&msg);
				fail_link(l, m.u.text.code, text);
				continue;
			}
		}
		if (type != DPT_MSG_HEARTBEAT && !atomic_load(&l->a->failed))
			zmq_msg_send(&msg, l->pipe, ZMQ_DONTWAIT);
		zmq_msg_close(&msg);
	}
}

/* A message from the application thread: forward it. Returns false when
 * it asks the thread to stop. */
static bool on_pipe(struct link *l, int64_t now)
{
	for (int i = 0; i < 256; i++) {
		zmq_msg_t msg;
		const uint8_t *d;
		size_t len;

		zmq_msg_init(&msg);
		if (zmq_msg_recv(&msg, l->pipe, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&msg);
			return true;
		}
		d = zmq_msg_data(&msg);
		len = zmq_msg_size(&msg);
		if (len == 1 && d[0] == STOP_BYTE) {
			zmq_msg_close(&msg);
			return false;
		}
		if (len >= DPT_WIRE_HDR_SIZE && d[3] == DPT_MSG_JOIN)
			l->joined = true;
		if (len >= DPT_WIRE_HDR_SIZE && d[3] == DPT_MSG_LEAVE)
			l->left = true;
		if (!atomic_load(&l->a->failed) &&
		    zmq_msg_send(&msg, l->dealer, ZMQ_DONTWAIT) >= 0)
			l->last_tx = now;
		zmq_msg_close(&msg);
	}
	return true;
}

static void on_timers(struct link *l, int64_t now)
{
	char text[600];

	if (atomic_load(&l->a->failed))
		return;
	if (l->contact && now - l->last_rx > l->timeout_ms) {
		snprintf(text, sizeof(text),
			 "lost contact with the coordinator at '%.400s': "
			 "silent for %d ms",
			 l->a->endpoint, l->timeout_ms);
		fail_link(l, DPT_ECOORDLOST, text);
		return;
	}
	if (!l->contact && now - l->started > l->a->connect_timeout_ms) {
		snprintf(text, sizeof(text),
			 "cannot reach the coordinator at '%.400s' within "
			 "%d ms",
			 l->a->endpoint, l->a->connect_timeout_ms);
		fail_link(l, DPT_ECOORDLOST, text);
		return;
	}
	/* Before its JOIN, a worker is nobody: a heartbeat would only earn
	 * it an eviction notice. */
	if (l->joined && now - l->last_tx >= l->heartbeat_ms) {
		struct dpt__msg m;
		uint8_t buf[DPT_WIRE_HDR_SIZE];
		dpt__msg_init(&m, DPT_MSG_HEARTBEAT, l->generation);
		if (dpt__wire_encode(&m, buf, sizeof(buf)) > 0 &&
		    zmq_send(l->dealer, buf, sizeof(buf), ZMQ_DONTWAIT) >= 0)
			l->last_tx = now;
	}
}

static int64_t next_wakeup(const struct link *l, int64_t now)
{
	int64_t t = now + 1000;

	if (atomic_load(&l->a->failed))
		return t;
	if (l->joined && l->last_tx + l->heartbeat_ms < t)
		t = l->last_tx + l->heartbeat_ms;
	if (l->contact && l->last_rx + l->timeout_ms + 1 < t)
		t = l->last_rx + l->timeout_ms + 1;
	if (!l->contact && l->started + l->a->connect_timeout_ms + 1 < t)
		t = l->started + l->a->connect_timeout_ms + 1;
	return t;
}

static void *agent_main(void *arg)
{
	struct link l = {.a = arg};
	int rc, linger;

	l.started = l.last_rx = l.last_tx = dpt__now_ms();
	l.heartbeat_ms = l.a->heartbeat_ms;
	l.timeout_ms = l.a->timeout_ms;
	l.pipe = zmq_socket(l.a->ctx, ZMQ_PAIR);
	if (!l.pipe || zmq_connect(l.pipe, l.a->pipe_name) != 0) {
		/* Without a pipe there is no one to tell: mark the failure,
		 * which the application thread checks. */
		atomic_store(&l.a->failed, DPT_ESYS);
		goto out;
	}
	rc = setup_dealer(&l);
	if (rc) {
		fail_link(&l, rc, "cannot set up the link to the coordinator");
		goto wait_stop;
	}
	for (;;) {
		zmq_pollitem_t items[3] = {
			{.socket = l.pipe, .events = ZMQ_POLLIN},
			{.socket = l.dealer, .events = ZMQ_POLLIN},
			{.socket = l.mon, .events = l.mon ? ZMQ_POLLIN : 0},
		};
		int64_t now = dpt__now_ms();
		int64_t wait = next_wakeup(&l, now) - now;

		if (zmq_poll(items, l.mon ? 3 : 2, wait > 0 ? (long)wait : 0) <
			    0 &&
		    errno != EINTR && errno != EAGAIN)
			break;
		now = dpt__now_ms();
		if ((items[1].revents & ZMQ_POLLIN))
			on_dealer(&l, now);
		if (l.mon && (items[2].revents & ZMQ_POLLIN))
			on_monitor(&l, now);
		if ((items[0].revents & ZMQ_POLLIN) && !on_pipe(&l, now))
			break;
		on_timers(&l, now);
	}
	goto out;

wait_stop:
	/* Failed early: wait for the application thread's stop. */
	for (;;) {
		char b[DPT_WIRE_HDR_SIZE];
		int n = zmq_recv(l.pipe, b, sizeof(b), 0);
		if (n == 1 && b[0] == STOP_BYTE)
			break;
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			break;
	}
out:
	if (l.mon) {
		zmq_socket_monitor(l.dealer, NULL, 0);
		zmq_close(l.mon);
	}
	if (l.dealer) {
		linger = atomic_load(&l.a->linger_ms);
		zmq_setsockopt(l.dealer, ZMQ_LINGER, &linger, sizeof(linger));
		zmq_close(l.dealer);
	}
	if (l.pipe)
		zmq_close(l.pipe);
	return NULL;
}

int dpt__agent_start(struct dpt__agent **out,
		     const struct dpt__agent_config *cfg)
{
	struct dpt__agent *a = calloc(1, sizeof(*a));
	int rc = 0;

	*out = NULL;
	if (!a)
		return DPT_ENOMEM;
	snprintf(a->endpoint, sizeof(a->endpoint), "%s", cfg->endpoint);
	a->keys = *cfg->keys;
	a->connect_timeout_ms = cfg->connect_timeout_ms;
	a->heartbeat_ms = cfg->heartbeat_ms;
	a->timeout_ms = cfg->timeout_ms;
	a->abort_fn = cfg->abort_fn;
	a->abort_arg = cfg->abort_arg;
	atomic_init(&a->failed, 0);
	atomic_init(&a->linger_ms, 0);
	snprintf(a->pipe_name, sizeof(a->pipe_name),
		 "inproc://dptrain-agent-%p", (void *)a);
	a->ctx = zmq_ctx_new();
	if (!a->ctx) {
		rc = DPT_ESYS;
		goto out;
	}
	/* The pipe is bound before the thread connects to it. */
	a->pipe = zmq_socket(a->ctx, ZMQ_PAIR);
	if (!a->pipe || zmq_bind(a->pipe, a->pipe_name) != 0) {
		rc = DPT_ESYS;
		goto out;
	}
	if (pthread_create(&a->thread, NULL, agent_main, a) != 0) {
		rc = DPT_ESYS;
		goto out;
	}
	a->started = true;
out:
	if (rc)
		dpt__agent_stop(&a, 0);
	*out = a;
	return rc;
}

int dpt__agent_send(struct dpt__agent *a, const struct dpt__msg *m)
{
	size_t size = dpt__wire_size(m);
	zmq_msg_t msg;
	int rc;

	if (!size)
		return DPT_EINVAL;
	rc = atomic_load(&a->failed);
	if (rc)
		return rc;
	if (zmq_msg_init_size(&msg, size) != 0)
		return DPT_ENOMEM;
	dpt__wire_encode(m, zmq_msg_data(&msg), size);
	if (zmq_msg_send(&msg, a->pipe, 0) < 0) {
		zmq_msg_close(&msg);
		return DPT_ESYS;
	}
	return 0;
}

int dpt__agent_recv(struct dpt__agent *a, struct dpt__msg *m, int timeout_ms)
{
	for (;;) {
		zmq_pollitem_t item = {.socket = a->pipe, .events = ZMQ_POLLIN};
		zmq_msg_t msg;
		int rc;

		rc = zmq_poll(&item, 1, timeout_ms);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return DPT_ESYS;
		if (rc == 0)
			return DPT_ETIMEDOUT;
		zmq_msg_init(&msg);
		if (zmq_msg_recv(&msg, a->pipe, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&msg);
			continue;
		}
		rc = dpt__wire_decode(zmq_msg_data(&msg), zmq_msg_size(&msg),
				      DPT_WIRE_MSG_MAX, m);
		zmq_msg_close(&msg);
		if (rc) {
			dpt__warn("dropped a malformed message from the "
				  "coordinator: %s",
				  dpt_strerror(rc));
			continue;
		}
		/* Logged by the agent's thread: its text is the cause of
		 * this thread's error too (dpt_last_error). */
		if (m->type == DPT_MSG_ERROR) {
			dpt__set_last_error(m->u.text.text);
			return m->u.text.code;
		}
		return 0;
	}
}

int dpt__agent_failed(const struct dpt__agent *a)
{
	return atomic_load(&a->failed);
}

void dpt__agent_stop(struct dpt__agent **ap, int linger_ms)
{
	struct dpt__agent *a = *ap;
	char stop = STOP_BYTE;

	if (!a)
		return;
	if (a->started) {
		atomic_store(&a->linger_ms, linger_ms);
		zmq_send(a->pipe, &stop, 1, 0);
		pthread_join(a->thread, NULL);
	}
	if (a->pipe)
		zmq_close(a->pipe);
	if (a->ctx)
		zmq_ctx_term(a->ctx);
	explicit_bzero(&a->keys, sizeof(a->keys));
	free(a);
	*ap = NULL;
}

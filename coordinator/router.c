/*
 * The coordinator's CURVE ROUTER (coordinator/service.h): its set-up, the
 * endpoint workers are told and its file, the state machine's sender, and
 * two sources of the loop: the router's messages and its monitor's events
 * (closed connections, failed handshakes).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.h>

#include <dptrain/error.h>

#include "clock.h"
#include "file.h"
#include "log.h"
#include "net.h"
#include "ratelimit.h"
#include "service.h"

#define MONITOR_ENDPOINT "inproc://dptrain-coordinator-monitor"

static bool is_wildcard(const char *host)
{
	return !strcmp(host, "*") || !strcmp(host, "0.0.0.0") ||
	       !strcmp(host, "[::]") || !strcmp(host, "::");
}

/* The endpoint workers use: the bound port with the advertised host. */
static int make_endpoint(void *router, const struct options *o, char *out,
			 size_t size)
{
	char last[DPT_ENDPOINT_MAX], host[256];
	const char *port, *h;
	size_t hlen;
	size_t len = sizeof(last);
	int n;

	if (zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, last, &len) != 0)
		return DPT_ESYS;
	last[sizeof(last) - 1] = '\0';
	port = strrchr(last, ':');
	h = strstr(last, "://");
	if (!port || !h)
		return DPT_EINVAL;
	h += 3;
	hlen = (size_t)(port - h);
	if (hlen >= sizeof(host))
		return DPT_EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	if (o->advertise)
		snprintf(host, sizeof(host), "%s", o->advertise);
	else if (is_wildcard(host))
		dpt__host_address(host, sizeof(host));
	/* A bare IPv6 address needs brackets in an endpoint. */
	n = snprintf(out, size,
		     strchr(host, ':') && host[0] != '[' ? "tcp://[%s]%s"
							 : "tcp://%s%s",
		     host, port);
	return n < 0 || (size_t)n >= size ? DPT_ETOOBIG : 0;
}

/* Write the endpoint so that a reader never sees half of it. */
int dpt__endpoint_file_write(const char *path, const char *endpoint)
{
	char text[DPT_ENDPOINT_MAX + 2];
	int n = snprintf(text, sizeof(text), "%s\n", endpoint), err;

	if (n < 0 || (size_t)n >= sizeof(text))
		return DPT_ETOOBIG;
	err = dpt__file_replace(path, text, (size_t)n, 0644);
	if (err) {
		dpt__error("cannot write '%s': %s", path, strerror(err));
		return DPT_EIO;
	}
	return 0;
}

/*
 * Remove the endpoint file of a coordinator started with --parent-pid (by
 * srun's plugin, in a directory of the step's own), and the directory when
 * that parent started us or is gone. A coordinator started by hand leaves
 * its file to whoever named it: the next coordinator may already have
 * written the same path (tests/coord/lib.sh starts one after another). srun
 * removes both in slurm_spank_exit, but an srun killed with SIGKILL runs no
 * exit callback; this process is the only one of ours left on srun's host then,
 * and it always notices (PR_SET_PDEATHSIG, the parent's pidfd). slurmstepd's
 * callbacks run on the compute nodes, not on srun's host, and a next step may
 * never come. rmdir removes only an empty directory: a directory that holds
 * anything else is left alone.
 */
void dpt__endpoint_file_remove(const struct options *o, bool parent_dir)
{
	char dir[PATH_MAX], *slash;
	int n;

	if (!o->endpoint_file)
		return;
	if (unlink(o->endpoint_file) != 0 && errno != ENOENT)
		dpt__warn("cannot remove '%s': %s", o->endpoint_file,
			  strerror(errno));
	if (!parent_dir)
		return;
	n = snprintf(dir, sizeof(dir), "%s", o->endpoint_file);
	if (n < 0 || (size_t)n >= sizeof(dir) || !(slash = strrchr(dir, '/')) ||
	    slash == dir)
		return;
	*slash = '\0';
	if (rmdir(dir) != 0 && errno != ENOENT)
		dpt__warn("cannot remove '%s': %s", dir, strerror(errno));
}

/* Every event waiting on the ROUTER's monitor. A closed connection goes
 * to the state machine (its value is the descriptor); a failed handshake
 * (wrong secret, garbage, a port scanner) is logged at most once a
 * second. Called before each message is handled: see
 * dpt__coord_on_disconnect. */
static void monitor_drain(void *mon, struct dpt__coord *c, int64_t now)
{
	static struct dpt__ratelimit rl;

	for (;;) {
		zmq_msg_t ev, where;
		uint16_t event = 0;
		uint32_t value = 0;
		long n;
		int rc;

		zmq_msg_init(&ev);
		rc = zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT);
		if (rc >= 0 && zmq_msg_more(&ev)) {
			zmq_msg_init(&where);
			zmq_msg_recv(&where, mon, 0);
			zmq_msg_close(&where);
		}
		if (rc >= 6) {
			memcpy(&event, zmq_msg_data(&ev), 2);
			memcpy(&value, (char *)zmq_msg_data(&ev) + 2, 4);
		}
		zmq_msg_close(&ev);
		if (rc < 0)
			break;
		if (event == ZMQ_EVENT_DISCONNECTED) {
			dpt__coord_on_disconnect(c, (int)value, now);
			continue;
		}
		n = dpt__ratelimit(&rl, now, 1, 1000);
		if (n)
			dpt__warn("%ld connection(s) failed the handshake "
				  "(last: %s): wrong secret or not a dptrain "
				  "client",
				  n,
				  event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
					  ? "refused"
				  : event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
					  ? "protocol error"
					  : "no detail");
	}
}

static int setup_router(void *router, const struct dpt__curve_keys *keys,
			const struct options *o)
{
	int one = 1, zero = 0;
	int backlog = o->world_size < 4096 ? (int)o->world_size + 64 : 4096;
	int hwm = 10000, handshake = 10000, linger = 1000;
	int64_t maxmsg = DPT_WIRE_IN_MAX;

	if (zmq_setsockopt(router, ZMQ_CURVE_SERVER, &one, sizeof(one)) ||
	    zmq_setsockopt(router, ZMQ_CURVE_SECRETKEY, keys->coord_secret,
			   DPT_Z85_KEY_LEN) ||
	    zmq_setsockopt(router, ZMQ_ZAP_DOMAIN, "dptrain", 7) ||
	    zmq_setsockopt(router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg)) ||
	    /* A connection storm from thousands of workers must not
	     * overflow the listen queue: a dropped SYN costs a worker 1 s. */
	    zmq_setsockopt(router, ZMQ_BACKLOG, &backlog, sizeof(backlog)) ||
	    zmq_setsockopt(router, ZMQ_HANDSHAKE_IVL, &handshake,
			   sizeof(handshake)) ||
	    zmq_setsockopt(router, ZMQ_SNDHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(router, ZMQ_RCVHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof(linger)) ||
	    /* Workers name their connection: one that reconnects after a
	     * network glitch takes its place back instead of being a
	     * stranger. */
	    zmq_setsockopt(router, ZMQ_ROUTER_HANDOVER, &one, sizeof(one)) ||
	    zmq_setsockopt(router, ZMQ_IPV6,
			   strchr(o->bind, '[') ? &one : &zero, sizeof(int))) {
		dpt__error("cannot configure the router socket: %s",
			   zmq_strerror(errno));
		return DPT_ESYS;
	}
	return 0;
}

/* The state machine's sender (struct dpt__coord_sender): the routing id
 * frame, then the message. Never blocks: ZMQ_DONTWAIT. */
static int router_send(void *router, const uint8_t *id, size_t id_len,
		       zmq_msg_t *msg)
{
	zmq_msg_t copy;

	/* A copy shares MSG's buffer (a reference count): the roster is
	 * encoded once and sent to every member. */
	if (zmq_send(router, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
		dpt__debug("cannot send to a peer: %s", zmq_strerror(errno));
		return -1;
	}
	zmq_msg_init(&copy);
	zmq_msg_copy(&copy, msg);
	if (zmq_msg_send(&copy, router, ZMQ_DONTWAIT) < 0) {
		dpt__debug("cannot send to a peer: %s", zmq_strerror(errno));
		zmq_msg_close(&copy);
		return -1;
	}
	return 0;
}

/* Drain the router: one batch of messages per loop turn, so that timers,
 * ZAP and signals are served in between under any load. Returns whether
 * everything that had arrived was read. */
static bool read_router(void *router, void *mon, struct dpt__coord *c)
{
	for (int i = 0; i < 4096; i++) {
		zmq_msg_t id, body;
		int64_t now;
		int fd;

		zmq_msg_init(&id);
		if (zmq_msg_recv(&id, router, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&id);
			return true;
		}
		zmq_msg_init(&body);
		if (!zmq_msg_more(&id) ||
		    zmq_msg_recv(&body, router, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&id);
			zmq_msg_close(&body);
			continue;
		}
		now = dpt__now_ms();
		/* The closes that happened before this message arrived, so
		 * that its descriptor is not taken for a closed one's. */
		if (mon)
			monitor_drain(mon, c, now);
		fd = zmq_msg_get(&body, ZMQ_SRCFD);
		/* A status client may ask STATUS and nothing else. */
		const char *user = zmq_msg_gets(&body, "User-Id");
		if (user && !strcmp(user, DPT_ZAP_USER_STATUS) &&
		    (zmq_msg_size(&body) < DPT_WIRE_HDR_SIZE ||
		     ((const uint8_t *)zmq_msg_data(&body))[3] !=
			     DPT_MSG_STATUS)) {
			zmq_msg_close(&id);
			zmq_msg_close(&body);
			continue;
		}
		if (zmq_msg_more(&body)) {
			/* A protocol message is one frame: drop the lot. */
			zmq_msg_t extra;
			zmq_msg_init(&extra);
			while (zmq_msg_more(&body) &&
			       zmq_msg_recv(&extra, router, ZMQ_DONTWAIT) >= 0)
				zmq_msg_move(&body, &extra);
			zmq_msg_close(&extra);
			dpt__coord_on_message(c, zmq_msg_data(&id),
					      zmq_msg_size(&id), "", 0, fd,
					      now);
		} else {
			dpt__coord_on_message(c, zmq_msg_data(&id),
					      zmq_msg_size(&id),
					      zmq_msg_data(&body),
					      zmq_msg_size(&body), fd, now);
		}
		zmq_msg_close(&id);
		zmq_msg_close(&body);
	}
	return false;
}

int dpt__router_open(struct dpt__service *s)
{
	const struct options *o = &s->o;

	/* The ZAP handler must be bound before the router accepts anyone. */
	s->zap.sock = zmq_socket(s->ctx, ZMQ_REP);
	if (!s->zap.sock || zmq_bind(s->zap.sock, ZAP_ENDPOINT) != 0) {
		dpt__error("cannot bind '%s': %s", ZAP_ENDPOINT,
			   zmq_strerror(errno));
		return DPT_ESYS;
	}
	s->router = zmq_socket(s->ctx, ZMQ_ROUTER);
	if (!s->router || setup_router(s->router, &s->keys, o) != 0)
		return DPT_ESYS;
	if (zmq_socket_monitor(s->router, MONITOR_ENDPOINT,
			       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
				       ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
				       ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
				       ZMQ_EVENT_DISCONNECTED) == 0) {
		s->mon = zmq_socket(s->ctx, ZMQ_PAIR);
		if (s->mon && zmq_connect(s->mon, MONITOR_ENDPOINT) != 0) {
			zmq_close(s->mon);
			s->mon = NULL;
		}
	}
	if (zmq_bind(s->router, o->bind) != 0) {
		dpt__error("cannot bind '%s': %s", o->bind,
			   zmq_strerror(errno));
		return DPT_EINVAL;
	}
	if (make_endpoint(s->router, o, s->endpoint, sizeof(s->endpoint))) {
		dpt__error("cannot tell the bound endpoint of '%s'", o->bind);
		return DPT_ESYS;
	}
	return 0;
}

void dpt__router_send_init(struct dpt__service *s,
			   struct dpt__coord_sender *sender)
{
	*sender = (struct dpt__coord_sender){
		.send = router_send,
		.arg = s->router,
	};
}

static void monitor_ready(void *arg, const zmq_pollitem_t *items, size_t n,
			  int64_t now)
{
	struct dpt__service *s = arg;

	(void)items, (void)n;
	monitor_drain(s->mon, s->coord, now);
}

struct dpt__loop_source dpt__monitor_source(struct dpt__service *s)
{
	return (struct dpt__loop_source){
		.name = "monitor",
		.item = dpt__loop_item(s->mon, -1, ZMQ_POLLIN),
		.ready = monitor_ready,
		.arg = s,
	};
}

/* Every turn: the backlog flag is this turn's. */
static void router_ready(void *arg, const zmq_pollitem_t *items, size_t n,
			 int64_t now)
{
	struct dpt__service *s = arg;

	(void)n, (void)now;
	s->backlog = (items[0].revents & ZMQ_POLLIN) &&
		     !read_router(s->router, s->mon, s->coord);
}

struct dpt__loop_source dpt__router_source(struct dpt__service *s)
{
	return (struct dpt__loop_source){
		.name = "router",
		.item = dpt__loop_item(s->router, -1, ZMQ_POLLIN),
		.ready = router_ready,
		.arg = s,
		.every_turn = true,
	};
}

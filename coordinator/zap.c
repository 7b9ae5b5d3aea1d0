#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <zmq.h>

#include "log.h"
#include "ratelimit.h"
#include "zap.h"

/*
 * One ZAP request (RFC 27): accept the CURVE client key derived from the
 * step secret, refuse anything else. A reply is always sent, or the
 * handshake would hang until ZMQ_HANDSHAKE_IVL.
 */
static void zap_handle(void *zap, const uint8_t *worker_key,
		       const uint8_t *status_key, int64_t now)
{
	static struct dpt__ratelimit rl;
	zmq_msg_t frames[8];
	int n = 0, more = 1;
	bool ok, status = false;
	char addr[64] = "?";

	while (more && n < 8) {
		zmq_msg_init(&frames[n]);
		if (zmq_msg_recv(&frames[n], zap, 0) < 0) {
			zmq_msg_close(&frames[n]);
			break;
		}
		more = zmq_msg_more(&frames[n]);
		n++;
	}
	while (more) { /* more frames than the protocol has: drain */
		zmq_msg_t extra;
		zmq_msg_init(&extra);
		if (zmq_msg_recv(&extra, zap, 0) < 0)
			more = 0;
		else
			more = zmq_msg_more(&extra);
		zmq_msg_close(&extra);
	}
	/* version, request id, domain, address, identity, mechanism,
	 * credentials */
	ok = n == 7 && zmq_msg_size(&frames[0]) == 3 &&
	     !memcmp(zmq_msg_data(&frames[0]), "1.0", 3) &&
	     zmq_msg_size(&frames[5]) == 5 &&
	     !memcmp(zmq_msg_data(&frames[5]), "CURVE", 5) &&
	     zmq_msg_size(&frames[6]) == 32;
	if (ok && status_key &&
	    !memcmp(zmq_msg_data(&frames[6]), status_key, 32))
		status = true;
	else if (ok)
		ok = !memcmp(zmq_msg_data(&frames[6]), worker_key, 32);
	if (n >= 4) {
		size_t len = zmq_msg_size(&frames[3]);
		if (len >= sizeof(addr))
			len = sizeof(addr) - 1;
		memcpy(addr, zmq_msg_data(&frames[3]), len);
		addr[len] = '\0';
		for (size_t i = 0; i < len; i++)
			if (addr[i] < 0x20 || addr[i] > 0x7e)
				addr[i] = '?';
	}
	if (!ok) {
		/* At most one line per second, whatever an attacker does. */
		long count = dpt__ratelimit(&rl, now, 1, 1000);

		if (count)
			dpt__warn("refused %ld connection(s), the last from "
				  "'%s': not a worker of this job step "
				  "(wrong secret)",
				  count, addr);
	}
	zmq_send(zap, "1.0", 3, ZMQ_SNDMORE);
	if (n >= 2)
		zmq_send(zap, zmq_msg_data(&frames[1]),
			 zmq_msg_size(&frames[1]), ZMQ_SNDMORE);
	else
		zmq_send(zap, "", 0, ZMQ_SNDMORE);
	zmq_send(zap, ok ? "200" : "400", 3, ZMQ_SNDMORE);
	zmq_send(zap, ok ? "OK" : "not a worker of this step", ok ? 2 : 25,
		 ZMQ_SNDMORE);
	/* The user id: each message's "User-Id" property, by which the
	 * event loop tells a status client's messages from a worker's. */
	if (ok)
		zmq_send(zap,
			 status ? DPT_ZAP_USER_STATUS : DPT_ZAP_USER_WORKER, 6,
			 ZMQ_SNDMORE);
	else
		zmq_send(zap, "", 0, ZMQ_SNDMORE);
	zmq_send(zap, "", 0, 0);
	for (int i = 0; i < n; i++)
		zmq_msg_close(&frames[i]);
}

/* The ZAP requests waiting, 64 at most: one batch per loop turn. */
void dpt__zap_serve(void *zap, const uint8_t *worker_key,
		    const uint8_t *status_key, int64_t now)
{
	for (int i = 0; i < 64; i++) {
		int more = 0;
		size_t sz = sizeof(more);

		zap_handle(zap, worker_key, status_key, now);
		if (zmq_getsockopt(zap, ZMQ_EVENTS, &more, &sz) ||
		    !(more & ZMQ_POLLIN))
			break;
	}
}

static void zap_ready(void *arg, const zmq_pollitem_t *items, size_t n,
		      int64_t now)
{
	struct dpt__zap *z = arg;

	(void)items, (void)n;
	dpt__zap_serve(z->sock, z->worker_key, z->status_key, now);
}

struct dpt__loop_source dpt__zap_source(struct dpt__zap *z)
{
	return (struct dpt__loop_source){
		.name = "zap",
		.item = dpt__loop_item(z->sock, -1, ZMQ_POLLIN),
		.ready = zap_ready,
		.arg = z,
	};
}

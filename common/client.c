/*
 * The coordinator client of short-lived callers: see client.h.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include <dptrain/error.h>

#include "client.h"
#include "clock.h"
#include "log.h"
#include "wire.h"

int dpt__client_limit(void *sock, int64_t max_msg, int connect_ms)
{
	if (!sock || max_msg < 0 || connect_ms <= 0)
		return DPT_EINVAL;
	if (zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max_msg, sizeof(max_msg)) ||
	    zmq_setsockopt(sock, ZMQ_CONNECT_TIMEOUT, &connect_ms,
			   sizeof(connect_ms)))
		return DPT_ESYS;
	return 0;
}

/*
 * Send REQ to the coordinator at ENDPOINT and wait up to TIMEOUT_MS for the
 * reply that echoes its seq: an ACK or KV_VALUE (returned in REPLY, 0) or
 * an ERROR (its code, after logging its text). DPT_ETIMEDOUT when none
 * came: the coordinator is gone, or the secret is wrong (CURVE drops the
 * connection without a word).
 */
static int request_keys(const char *endpoint, const char *server_public,
			const char *client_public, const char *client_secret,
			struct dpt__msg *req, int timeout_ms,
			struct dpt__msg *reply)
{
	uint8_t out[DPT_WIRE_IN_MAX];
	void *ctx = NULL, *sock = NULL;
	long len, deadline;
	int rc, zero = 0;

	if (!endpoint || timeout_ms < 0)
		return DPT_EINVAL;
	ctx = zmq_ctx_new();
	sock = ctx ? zmq_socket(ctx, ZMQ_DEALER) : NULL;
	if (!sock) {
		rc = DPT_ESYS;
		goto out;
	}
	/* The endpoint may be one a job's environment chose, and the caller
	 * root's slurmstepd: a peer may announce any frame size. */
	rc = dpt__client_limit(sock, DPT_CLIENT_MSG_MAX,
			       timeout_ms > 0 ? timeout_ms : 1);
	if (rc)
		goto out;
	if (zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof(zero)) ||
	    zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server_public,
			   DPT_Z85_KEY_LEN) ||
	    zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, client_public,
			   DPT_Z85_KEY_LEN) ||
	    zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, client_secret,
			   DPT_Z85_KEY_LEN)) {
		rc = errno == EINVAL ? DPT_ENOTSUP : DPT_ESYS;
		goto out;
	}
	if (zmq_connect(sock, endpoint) != 0) {
		dpt__error("cannot connect to '%s': %s", endpoint,
			   zmq_strerror(errno));
		rc = DPT_EINVAL;
		goto out;
	}
	/* The reply echoes SEQ; any value tells this request from another. */
	req->seq = (uint32_t)getpid() ^ (uint32_t)dpt__now_ms();
	len = dpt__wire_encode(req, out, sizeof(out));
	if (len < 0) {
		rc = (int)len;
		goto out;
	}
	if (zmq_send(sock, out, (size_t)len, ZMQ_DONTWAIT) < 0) {
		rc = DPT_ESYS;
		goto out;
	}
	deadline = dpt__now_ms() + timeout_ms;
	rc = DPT_ETIMEDOUT;
	for (;;) {
		zmq_pollitem_t item = {.socket = sock, .events = ZMQ_POLLIN};
		long left = deadline - dpt__now_ms();
		uint8_t in[DPT_CLIENT_MSG_MAX];
		int n;

		if (left <= 0)
			break;
		if (zmq_poll(&item, 1, left) <= 0)
			continue;
		n = zmq_recv(sock, in, sizeof(in), ZMQ_DONTWAIT);
		if (n < 0 || (size_t)n > sizeof(in))
			continue;
		if (dpt__wire_decode(in, (size_t)n, sizeof(in), reply))
			continue;
		if (reply->seq != req->seq) {
			dpt__msg_release(reply);
			continue;
		}
		if (reply->type == DPT_MSG_ERROR) {
			dpt__error("the coordinator refused %s: %s",
				   dpt__msg_type_name(req->type),
				   reply->u.text.text);
			rc = reply->u.text.code;
			/* Only a reply that the caller takes is its to
			 * release. */
			dpt__msg_release(reply);
		} else {
			rc = 0;
		}
		break;
	}
out:
	if (sock)
		zmq_close(sock);
	if (ctx)
		zmq_ctx_term(ctx);
	return rc;
}

static int request(const char *endpoint, const char *secret_hex,
		   struct dpt__msg *req, int timeout_ms, struct dpt__msg *reply)
{
	struct dpt__curve_keys keys;
	int rc = dpt__wire_derive_keys(secret_hex, &keys);

	if (rc)
		return rc;
	rc = request_keys(endpoint, keys.coord_public, keys.worker_public,
			  keys.worker_secret, req, timeout_ms, reply);
	explicit_bzero(&keys, sizeof(keys));
	return rc;
}

int dpt__client_status(const char *endpoint, const char *coord_public,
		       const char *status_public, const char *status_secret,
		       int timeout_ms, struct dpt__msg_status *out)
{
	struct dpt__msg m, reply;
	int rc;

	if (!coord_public || !status_public || !status_secret ||
	    strlen(coord_public) != DPT_Z85_KEY_LEN ||
	    strlen(status_public) != DPT_Z85_KEY_LEN ||
	    strlen(status_secret) != DPT_Z85_KEY_LEN)
		return DPT_EINVAL;
	dpt__msg_init(&m, DPT_MSG_STATUS, 0);
	rc = request_keys(endpoint, coord_public, status_public, status_secret,
			  &m, timeout_ms, &reply);
	if (rc)
		return rc;
	if (reply.type != DPT_MSG_STATUS_REPLY) {
		dpt__msg_release(&reply);
		return DPT_EPROTO;
	}
	*out = reply.u.status;
	dpt__msg_release(&reply);
	return 0;
}

/* A request answered by an ACK; a reply of another type (a ROSTER that
 * owns memory, say) is released and refused. */
static int request_ack(const char *endpoint, const char *secret_hex,
		       struct dpt__msg *req, int timeout_ms)
{
	struct dpt__msg reply;
	int rc = request(endpoint, secret_hex, req, timeout_ms, &reply);

	if (rc)
		return rc;
	if (reply.type != DPT_MSG_ACK) {
		dpt__error("the coordinator answered %s with %s, not ACK",
			   dpt__msg_type_name(req->type),
			   dpt__msg_type_name(reply.type));
		rc = DPT_EPROTO;
	}
	dpt__msg_release(&reply);
	return rc;
}

int dpt__client_report_exit(const char *endpoint, const char *secret_hex,
			    uint32_t task_id, int32_t status, int timeout_ms)
{
	struct dpt__msg m;

	dpt__msg_init(&m, DPT_MSG_TASK_EXIT, 0);
	m.u.task_exit.task_id = task_id;
	m.u.task_exit.status = status;
	return request_ack(endpoint, secret_hex, &m, timeout_ms);
}

static int kv_msg(struct dpt__msg *m, enum dpt__msg_type type, const char *key,
		  const char *value)
{
	size_t klen = key ? strlen(key) : 0, vlen = value ? strlen(value) : 0;

	dpt__msg_init(m, type, 0);
	if (!key || klen > DPT_KV_KEY_MAX || vlen > DPT_KV_VALUE_MAX)
		return DPT_EINVAL;
	memcpy(m->u.kv.key, key, klen + 1);
	if (value)
		memcpy(m->u.kv.value, value, vlen + 1);
	return 0;
}

int dpt__client_kv_put(const char *endpoint, const char *secret_hex,
		       const char *key, const char *value, int timeout_ms)
{
	struct dpt__msg m;
	int rc = kv_msg(&m, DPT_MSG_KV_PUT, key, value);

	return rc ? rc : request_ack(endpoint, secret_hex, &m, timeout_ms);
}

int dpt__client_kv_get(const char *endpoint, const char *secret_hex,
		       const char *key, char *value, size_t size,
		       int timeout_ms)
{
	struct dpt__msg m, reply;
	int rc = kv_msg(&m, DPT_MSG_KV_GET, key, NULL);

	if (rc || timeout_ms < 0)
		return rc ? rc : DPT_EINVAL;
	/* The coordinator answers a little before our own deadline, so that
	 * a timeout is its clear ERROR rather than our silence. */
	m.u.kv.wait_ms = timeout_ms > 500 ? (uint32_t)timeout_ms - 250
					  : (uint32_t)timeout_ms;
	if (m.u.kv.wait_ms > DPT_KV_WAIT_MAX)
		m.u.kv.wait_ms = DPT_KV_WAIT_MAX;
	rc = request(endpoint, secret_hex, &m, timeout_ms, &reply);
	if (rc)
		return rc;
	if (reply.type != DPT_MSG_KV_VALUE || strcmp(reply.u.kv.key, key))
		rc = DPT_EPROTO;
	else if (strlen(reply.u.kv.value) >= size)
		rc = DPT_ETOOBIG;
	else
		memcpy(value, reply.u.kv.value, strlen(reply.u.kv.value) + 1);
	dpt__msg_release(&reply);
	return rc;
}

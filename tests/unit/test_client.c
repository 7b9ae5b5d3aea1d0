/*
 * The short-lived coordinator client (common/client.c) against a hostile
 * peer: an endpoint that a job's environment chose, answering the client's
 * ZMTP greeting with a frame header that announces 3 GiB. The client must
 * drop that connection at once and allocate nothing for it, as root's
 * slurmstepd runs this client for slurm_spank_task_exit. And a coordinator
 * that holds the secret but answers the exit report with a ROSTER (which
 * owns memory once decoded): refused, and released (the sanitized run's
 * leak check).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include <zmq.h>

#include <dptrain/error.h>

#include "client.h"
#include "clock.h"
#include "wire.h"

#define HUGE_FRAME (3ull << 30)
#define CLIENT_MS  3000

static const char secret_hex[] = "00112233445566778899aabbccddeeff"
				 "00112233445566778899aabbccddeeff";

/* The fake coordinator: one connection, a valid ZMTP 3.0 CURVE greeting,
 * then a command frame header of HUGE_FRAME bytes and nothing more. */
struct hostile_peer {
	int lfd;
	long sent_ms; /* when the header went out, 0: never */
	long eof_ms;  /* when the client dropped the connection, 0: never */
};

static void greeting(uint8_t g[64])
{
	memset(g, 0, 64);
	g[0] = 0xff;
	g[9] = 0x7f;
	g[10] = 3; /* ZMTP 3.0 */
	memcpy(g + 12, "CURVE", 5);
	g[32] = 1; /* as-server */
}

static void *hostile_peer_run(void *arg)
{
	struct hostile_peer *p = arg;
	uint8_t g[64], frame[9], in[512];
	struct pollfd pfd;
	int fd = accept(p->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	greeting(g);
	frame[0] = 0x06; /* COMMAND | LONG: an 8-byte size follows */
	for (int i = 0; i < 8; i++)
		frame[1 + i] = (uint8_t)(HUGE_FRAME >> (56 - 8 * i));
	if (write(fd, g, sizeof(g)) != (ssize_t)sizeof(g) ||
	    read(fd, in, sizeof(in)) <= 0 ||
	    write(fd, frame, sizeof(frame)) != (ssize_t)sizeof(frame))
		goto out;
	p->sent_ms = dpt__now_ms();
	pfd = (struct pollfd){.fd = fd, .events = POLLIN};
	while (poll(&pfd, 1, 2 * CLIENT_MS) > 0) {
		ssize_t n = read(fd, in, sizeof(in));

		if (n <= 0) {
			p->eof_ms = dpt__now_ms();
			break;
		}
	}
out:
	close(fd);
	return NULL;
}

static int listen_loopback(uint16_t *port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* The most address space this process ever had, in KiB (VmPeak). */
static long vm_peak_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPeak: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static void huge_frame_dropped(void **state)
{
	struct hostile_peer p = {0};
	char endpoint[64];
	uint16_t port;
	pthread_t t;
	long before, rc;

	(void)state;
	p.lfd = listen_loopback(&port);
	snprintf(endpoint, sizeof(endpoint), "tcp://127.0.0.1:%u", port);
	assert_int_equal(pthread_create(&t, NULL, hostile_peer_run, &p), 0);
	before = vm_peak_kib();
	rc = dpt__client_report_exit(endpoint, secret_hex, 0, 0, CLIENT_MS);
	assert_int_equal(pthread_join(t, NULL), 0);
	close(p.lfd);
	/* The request fails cleanly; nothing near the announced size was
	 * ever mapped; the client hung up at the header, not when its own
	 * deadline closed the socket. */
	assert_int_equal(rc, DPT_ETIMEDOUT);
	assert_true(vm_peak_kib() - before < (long)(HUGE_FRAME >> 10) / 4);
	assert_true(p.sent_ms > 0);
	assert_true(p.eof_ms > 0);
	assert_true(p.eof_ms - p.sent_ms < CLIENT_MS / 2);
}

/* A coordinator that knows the secret: one request on a CURVE ROUTER,
 * answered with a reply of type REPLY that echoes its SEQ. */
struct fake_coord {
	void *ctx, *sock;
	enum dpt__msg_type reply;
	int served;
};

static void *fake_coord_run(void *arg)
{
	struct fake_coord *f = arg;
	struct dpt__peer peers[2] = {{"127.0.0.1", 1, 0}, {"127.0.0.1", 2, 0}};
	uint8_t id[256], in[DPT_WIRE_IN_MAX], out[512];
	struct dpt__msg req, rep;
	int idlen = zmq_recv(f->sock, id, sizeof(id), 0);
	int n = zmq_recv(f->sock, in, sizeof(in), 0);
	long len;

	if (idlen <= 0 || n <= 0 ||
	    dpt__wire_decode(in, (size_t)n, sizeof(in), &req))
		return NULL;
	dpt__msg_init(&rep, f->reply, 1);
	rep.seq = req.seq;
	rep.world = 2;
	rep.roster = peers;
	len = dpt__wire_encode(&rep, out, sizeof(out));
	if (len > 0 && zmq_send(f->sock, id, (size_t)idlen, ZMQ_SNDMORE) >= 0 &&
	    zmq_send(f->sock, out, (size_t)len, 0) >= 0)
		f->served = 1;
	dpt__msg_release(&req);
	return NULL;
}

static long ask_fake(enum dpt__msg_type reply)
{
	struct fake_coord f = {.reply = reply};
	struct dpt__curve_keys keys;
	int server = 1, zero = 0;
	char endpoint[64];
	size_t len = sizeof(endpoint);
	pthread_t t;
	long rc;

	assert_int_equal(dpt__wire_derive_keys(secret_hex, &keys), 0);
	f.ctx = zmq_ctx_new();
	f.sock = zmq_socket(f.ctx, ZMQ_ROUTER);
	assert_non_null(f.sock);
	assert_int_equal(zmq_setsockopt(f.sock, ZMQ_CURVE_SERVER, &server,
					sizeof(server)),
			 0);
	assert_int_equal(zmq_setsockopt(f.sock, ZMQ_CURVE_SECRETKEY,
					keys.coord_secret, DPT_Z85_KEY_LEN),
			 0);
	assert_int_equal(
		zmq_setsockopt(f.sock, ZMQ_LINGER, &zero, sizeof(zero)), 0);
	assert_int_equal(zmq_bind(f.sock, "tcp://127.0.0.1:*"), 0);
	assert_int_equal(
		zmq_getsockopt(f.sock, ZMQ_LAST_ENDPOINT, endpoint, &len), 0);
	assert_int_equal(pthread_create(&t, NULL, fake_coord_run, &f), 0);
	rc = dpt__client_report_exit(endpoint, secret_hex, 0, 0, CLIENT_MS);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(f.served);
	zmq_close(f.sock);
	zmq_ctx_term(f.ctx);
	return rc;
}

static void other_reply_refused(void **state)
{
	(void)state;
	assert_int_equal(ask_fake(DPT_MSG_ACK), 0);
	assert_int_equal(ask_fake(DPT_MSG_ROSTER), DPT_EPROTO);
}

static void limits_set(void **state)
{
	void *ctx = zmq_ctx_new(), *sock;
	int64_t max = 0;
	int ms = 0;
	size_t len;

	(void)state;
	assert_non_null(ctx);
	sock = zmq_socket(ctx, ZMQ_DEALER);
	assert_non_null(sock);
	assert_int_equal(dpt__client_limit(sock, DPT_CLIENT_MSG_MAX, 500), 0);
	len = sizeof(max);
	assert_int_equal(zmq_getsockopt(sock, ZMQ_MAXMSGSIZE, &max, &len), 0);
	assert_int_equal(max, DPT_CLIENT_MSG_MAX);
	len = sizeof(ms);
	assert_int_equal(zmq_getsockopt(sock, ZMQ_CONNECT_TIMEOUT, &ms, &len),
			 0);
	assert_int_equal(ms, 500);
	/* No limit is no limit: refused, not passed on to ZeroMQ as one. */
	assert_int_equal(dpt__client_limit(sock, -1, 500), DPT_EINVAL);
	assert_int_equal(dpt__client_limit(sock, DPT_CLIENT_MSG_MAX, 0),
			 DPT_EINVAL);
	assert_int_equal(dpt__client_limit(NULL, DPT_CLIENT_MSG_MAX, 500),
			 DPT_EINVAL);
	zmq_close(sock);
	zmq_ctx_term(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(huge_frame_dropped),
		cmocka_unit_test(limits_set),
		cmocka_unit_test(other_reply_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The short-lived coordinator client (common/client.c) against a hostile
 * peer: an endpoint that a job's environment chose, answering the client's
 * ZMTP greeting with a frame header that announces 3 GiB. The client must
 * drop that connection at once and allocate nothing for it, as root's
 * slurmstepd runs this client for slurm_spank_task_exit.
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

#define HUGE_FRAME (3ull << 30)
#define CLIENT_MS  3000

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
	static const char secret[] = "00112233445566778899aabbccddeeff"
				     "00112233445566778899aabbccddeeff";
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
	rc = dpt__client_report_exit(endpoint, secret, 0, 0, CLIENT_MS);
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

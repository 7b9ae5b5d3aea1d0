/*
 * A connection flood at the coordinator's port, for bench/observe's flood
 * job and tests/coord/flood.sh: what a careless or hostile neighbour on
 * the cluster network can do without the step's secret.
 *
 *   bench/flooder IPV4 PORT CONNS SECONDS [CHURN]
 *
 * Holds CONNS TCP connections open for SECONDS (or until SIGTERM), a
 * third each of: silent ones, ones that stop after 5 bytes of a ZMTP
 * greeting, and ones that send a whole CURVE greeting and then nothing.
 * Whatever the coordinator closes (its handshake timeout) is opened again
 * at once. Beside them,
 * CHURN libzmq clients with random CURVE keys handshake again and again:
 * each costs the coordinator a Curve25519 operation before it can refuse.
 *
 * Prints "established N" once N connections are open (or after 10 s),
 * then at the end one line of counts:
 *   flood held=N opened=N closed_by_peer=N connect_failed=N churn=N
 * Exits 1 if it never held CONNS connections at once.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "client.h"
#include "parse.h"

static volatile sig_atomic_t flooding = 1;

static void stop(int sig)
{
	(void)sig;
	flooding = 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* What a connection sends once it is open (its kind: index % 3). */
static const unsigned char greeting[64] = {
	0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0, 'C', 'U', 'R', 'V', 'E'};

static int open_one(const struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0 &&
	    errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Sends the kind's bytes once the connection is up (POLLOUT). */
static void greet(int fd, int kind)
{
	if (kind == 1)
		(void)!write(fd, greeting, 5);
	else if (kind == 2)
		(void)!write(fd, greeting, sizeof(greeting));
}

static void *churn_socket(void *ctx, const char *endpoint)
{
	char pub[41], sec[41], server[41], unused[41];
	void *s = zmq_socket(ctx, ZMQ_DEALER);
	int zero = 0, ivl = 20;

	/* Keys nobody has: the coordinator's key is derived from the
	 * step's secret, which the flooder does not know. */
	zmq_curve_keypair(pub, sec);
	zmq_curve_keypair(server, unused);
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &ivl, sizeof(ivl));
	dpt__client_limit(s, DPT_WIRE_MSG_MAX, 10000);
	zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server, 40);
	zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 40);
	zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 40);
	zmq_connect(s, endpoint);
	return s;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct rlimit rl;
	struct pollfd *pf;
	long port, conns, seconds, churn = 0, held = 0, max_held = 0,
				   opened = 0, closed = 0, failed = 0;
	double end, start = now_s();
	char endpoint[128];
	void *ctx = NULL, **socks = NULL;
	int established = 0;

	if (argc < 5 || argc > 6 ||
	    inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1 ||
	    dpt__parse_long(argv[2], 1, 65535, &port) ||
	    dpt__parse_long(argv[3], 1, 100000, &conns) ||
	    dpt__parse_long(argv[4], 1, LONG_MAX, &seconds) ||
	    (argc == 6 && dpt__parse_long(argv[5], 0, 1000, &churn))) {
		fprintf(stderr, "usage: bench/flooder IPV4 PORT CONNS SECONDS "
				"[CHURN]\n(CONNS 1 to 100000, SECONDS at "
				"least 1, CHURN 0 to 1000)\n");
		return 2;
	}
	sa.sin_port = htons((uint16_t)port);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	pf = calloc((size_t)conns, sizeof(*pf));
	if (!pf)
		return 2;
	for (long i = 0; i < conns; i++)
		pf[i].fd = -1;

	if (churn) {
		snprintf(endpoint, sizeof(endpoint), "tcp://%s:%s", argv[1],
			 argv[2]);
		ctx = zmq_ctx_new();
		socks = calloc((size_t)churn, sizeof(*socks));
		for (long i = 0; i < churn; i++)
			socks[i] = churn_socket(ctx, endpoint);
	}

	signal(SIGTERM, stop);
	end = start + (double)seconds;
	while (flooding && now_s() < end) {
		/* Top up: a few hundred at a time, so that one pass does not
		 * stall the polling of those already open. */
		for (long i = 0, n = 0; i < conns && n < 256; i++) {
			if (pf[i].fd >= 0)
				continue;
			pf[i].fd = open_one(&sa);
			if (pf[i].fd < 0) {
				failed++;
				continue;
			}
			pf[i].events = POLLOUT;
			opened++;
			held++;
			n++;
		}
		if (held > max_held)
			max_held = held;
		if (!established && (held == conns || now_s() - start > 10)) {
			printf("established %ld\n", held);
			fflush(stdout);
			established = 1;
		}
		if (poll(pf, (nfds_t)conns, 100) < 0 && errno != EINTR)
			break;
		for (long i = 0; i < conns; i++) {
			char buf[512];

			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			if (pf[i].revents & (POLLERR | POLLHUP)) {
				goto gone;
			} else if (pf[i].revents & POLLOUT) {
				greet(pf[i].fd, (int)(i % 3));
				pf[i].events = POLLIN;
			} else if (pf[i].revents & POLLIN) {
				ssize_t n = read(pf[i].fd, buf, sizeof(buf));
				if (n > 0 || (n < 0 && errno == EAGAIN))
					continue; /* its greeting: ignored */
				goto gone;
			}
			continue;
		gone:
			close(pf[i].fd);
			pf[i].fd = -1;
			held--;
			closed++;
		}
		if (failed > opened + 1000) /* nobody listens: back off */
			usleep(10000);
	}
	for (long i = 0; i < conns; i++)
		if (pf[i].fd >= 0)
			close(pf[i].fd);
	for (long i = 0; i < churn; i++)
		zmq_close(socks[i]);
	if (ctx)
		zmq_ctx_term(ctx);
	printf("flood held=%ld opened=%ld closed_by_peer=%ld "
	       "connect_failed=%ld churn=%ld\n",
	       max_held, opened, closed, failed, churn);
	free(pf);
	free(socks);
	return max_held == conns ? 0 : 1;
}

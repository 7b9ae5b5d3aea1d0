/*
 * PLACEHOLDER, REPLACED BY THE REAL RING ON MERGE.
 *
 * A correct but simple implementation of worker/comm.h so that the
 * coordinator branch can test ranks, generations and failure paths, and a
 * small exactness test, with real processes: a star through rank 0 over
 * TCP. Rank 0 reduces in rank order, so every rank gets the same bytes.
 * No shared memory, no pipelining: do not measure bandwidth with it.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "comm.h"
#include "log.h"

#define HELLO_MAGIC 0x44505431u /* "DPT1" */

struct dpt__cpu_listener {
	int fd;
};

struct dpt__cpu_comm {
	int rank;
	int world;
	int *fds; /* rank 0: one per rank (fds[0] unused); others: fds[0] */
	atomic_int aborted;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int dpt__cpu_listen(struct dpt__cpu_listener **out, const char *bind_host,
		    uint16_t *port)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICHOST};
	struct addrinfo *res = NULL;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct dpt__cpu_listener *l = NULL;
	int fd = -1, one = 1, rc = 0;

	*out = NULL;
	if (getaddrinfo(bind_host, "0", &hints, &res) != 0) {
		rc = DPT_EINVAL;
		goto out;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
				 sizeof(one)) != 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
	    listen(fd, 1024) != 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
		dpt__error("cannot listen on '%s': %s", bind_host,
			   strerror(errno));
		rc = DPT_ESYS;
		goto out;
	}
	*port = ntohs(ss.ss_family == AF_INET6 ?
			      ((struct sockaddr_in6 *)&ss)->sin6_port :
			      ((struct sockaddr_in *)&ss)->sin_port);
	l = malloc(sizeof(*l));
	if (!l) {
		rc = DPT_ENOMEM;
		goto out;
	}
	l->fd = fd;
	fd = -1;
	*out = l;
out:
	if (fd >= 0)
		close(fd);
	if (res)
		freeaddrinfo(res);
	return rc;
}

void dpt__cpu_listener_destroy(struct dpt__cpu_listener **l)
{
	if (!*l)
		return;
	close((*l)->fd);
	free(*l);
	*l = NULL;
}

/* Move N bytes, waiting at most until DEADLINE (0: no limit). Errors: the
 * peer closed (DPT_EPEERLOST), or the comm was aborted (DPT_EGENERATION:
 * abort shuts the sockets down, which wakes any poll). */
static int io_all(struct dpt__cpu_comm *c, int fd, void *buf, size_t n,
		  bool out, int64_t deadline)
{
	char *p = buf;

	while (n > 0) {
		struct pollfd pfd = {.fd = fd, .events = out ? POLLOUT : POLLIN};
		int wait = -1;
		ssize_t k;

		if (atomic_load(&c->aborted))
			return DPT_EGENERATION;
		if (deadline) {
			int64_t left = deadline - now_ms();
			if (left <= 0)
				return DPT_ETIMEDOUT;
			wait = (int)left;
		}
		if (poll(&pfd, 1, wait) < 0) {
			if (errno == EINTR)
				continue;
			return DPT_ESYS;
		}
		k = out ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) :
			  recv(fd, p, n, MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (atomic_load(&c->aborted))
			return DPT_EGENERATION;
		if (k <= 0)
			return DPT_EPEERLOST;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static uint64_t session_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

static int connect_to(const struct dpt__peer *p, int64_t deadline, int *out)
{
	char port[8];
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int fd = -1, one = 1;

	snprintf(port, sizeof(port), "%u", p->port);
	if (getaddrinfo(p->host, port, &hints, &res) != 0)
		return DPT_EINVAL;
	while (now_ms() < deadline) {
		fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		usleep(20000);
	}
	freeaddrinfo(res);
	if (fd < 0)
		return DPT_ETIMEDOUT;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*out = fd;
	return 0;
}

int dpt__cpu_comm_new(struct dpt__cpu_comm **out,
		      struct dpt__cpu_listener **listener, int rank, int world,
		      const struct dpt__peer *peers, const char *session,
		      int timeout_ms)
{
	struct dpt__cpu_comm *c = calloc(1, sizeof(*c));
	int64_t deadline = now_ms() + timeout_ms;
	uint64_t sess = session_hash(session);
	int rc = 0;

	*out = NULL;
	if (!c) {
		rc = DPT_ENOMEM;
		goto out;
	}
	c->rank = rank;
	c->world = world;
	atomic_init(&c->aborted, 0);
	c->fds = malloc(sizeof(int) * (size_t)world);
	if (!c->fds) {
		rc = DPT_ENOMEM;
		goto out;
	}
	for (int i = 0; i < world; i++)
		c->fds[i] = -1;
	if (rank != 0) {
		uint32_t hello[4] = {htonl(HELLO_MAGIC), htonl((uint32_t)rank),
				     htonl((uint32_t)(sess >> 32)),
				     htonl((uint32_t)sess)};
		rc = connect_to(&peers[0], deadline, &c->fds[0]);
		if (!rc)
			rc = io_all(c, c->fds[0], hello, sizeof(hello), true,
				    deadline);
		goto out;
	}
	/* Rank 0 accepts one connection per other rank. A stranger (another
	 * generation's late rank, a port scanner) is closed and ignored. */
	for (int got = 1; got < world;) {
		struct pollfd pfd = {.fd = (*listener)->fd, .events = POLLIN};
		int64_t left = deadline - now_ms();
		uint32_t hello[4];
		int fd, one = 1;
		uint32_t r;

		if (left <= 0) {
			rc = DPT_ETIMEDOUT;
			goto out;
		}
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		fd = accept((*listener)->fd, NULL, NULL);
		if (fd < 0)
			continue;
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (io_all(c, fd, hello, sizeof(hello), false,
			   now_ms() + 2000) != 0 ||
		    ntohl(hello[0]) != HELLO_MAGIC ||
		    ntohl(hello[2]) != (uint32_t)(sess >> 32) ||
		    ntohl(hello[3]) != (uint32_t)sess ||
		    (r = ntohl(hello[1])) == 0 || r >= (uint32_t)world ||
		    c->fds[r] >= 0) {
			close(fd);
			continue;
		}
		c->fds[r] = fd;
		got++;
	}
out:
	dpt__cpu_listener_destroy(listener);
	if (rc)
		dpt__cpu_comm_destroy(&c);
	*out = c;
	return rc;
}

/* ------------------------------------------------------------ arithmetic */

static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f,
		 man = h & 0x3ff, bits;
	float f;

	if (exp == 0) { /* zero or subnormal */
		f = (float)man / 1024.0f / 16384.0f;
		return sign ? -f : f;
	}
	if (exp == 31)
		bits = sign | 0x7f800000u | (man << 13);
	else
		bits = sign | ((exp + 112) << 23) | (man << 13);
	memcpy(&f, &bits, sizeof(f));
	return f;
}

static uint16_t float_to_half(float f)
{
	uint32_t x, sign, man;
	int exp;

	memcpy(&x, &f, sizeof(x));
	sign = (x >> 16) & 0x8000;
	exp = (int)((x >> 23) & 0xff) - 127 + 15;
	man = x & 0x7fffff;
	if (((x >> 23) & 0xff) == 0xff) /* inf, nan */
		return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) { /* subnormal or zero */
		if (exp < -10)
			return (uint16_t)sign;
		man |= 0x800000;
		uint32_t shift = (uint32_t)(14 - exp);
		uint32_t h = man >> shift;
		uint32_t rest = man & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rest > half || (rest == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13);
	uint32_t rest = man & 0x1fff;
	if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
		h++; /* may carry into the exponent, which is right */
	return (uint16_t)h;
}

static float bf16_to_float(uint16_t b)
{
	uint32_t bits = (uint32_t)b << 16;
	float f;
	memcpy(&f, &bits, sizeof(f));
	return f;
}

static uint16_t float_to_bf16(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof(x));
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

/* ACC (float, double or int64 per element) += the elements of IN. */
static void accumulate(void *acc, const void *in, size_t count,
		       enum dpt_dtype dtype)
{
	for (size_t i = 0; i < count; i++) {
		switch (dtype) {
		case DPT_FLOAT32:
			((double *)acc)[i] += ((const float *)in)[i];
			break;
		case DPT_FLOAT64:
			((double *)acc)[i] += ((const double *)in)[i];
			break;
		case DPT_BFLOAT16:
			((double *)acc)[i] +=
				bf16_to_float(((const uint16_t *)in)[i]);
			break;
		case DPT_FLOAT16:
			((double *)acc)[i] +=
				half_to_float(((const uint16_t *)in)[i]);
			break;
		case DPT_INT32:
			((int64_t *)acc)[i] += ((const int32_t *)in)[i];
			break;
		case DPT_INT64:
			((int64_t *)acc)[i] += ((const int64_t *)in)[i];
			break;
		case DPT_UINT8:
			((int64_t *)acc)[i] += ((const uint8_t *)in)[i];
			break;
		}
	}
}

static bool is_float(enum dpt_dtype d)
{
	return d == DPT_FLOAT32 || d == DPT_FLOAT64 || d == DPT_BFLOAT16 ||
	       d == DPT_FLOAT16;
}

static void store(void *out, const void *acc, size_t count,
		  enum dpt_dtype dtype, enum dpt_op op, int world)
{
	for (size_t i = 0; i < count; i++) {
		double d = 0;
		int64_t v = 0;
		if (is_float(dtype)) {
			d = ((const double *)acc)[i];
			if (op == DPT_AVG)
				d /= world;
		} else {
			v = ((const int64_t *)acc)[i];
			if (op == DPT_AVG)
				v /= world;
		}
		switch (dtype) {
		case DPT_FLOAT32:
			((float *)out)[i] = (float)d;
			break;
		case DPT_FLOAT64:
			((double *)out)[i] = d;
			break;
		case DPT_BFLOAT16:
			((uint16_t *)out)[i] = float_to_bf16((float)d);
			break;
		case DPT_FLOAT16:
			((uint16_t *)out)[i] = float_to_half((float)d);
			break;
		case DPT_INT32:
			((int32_t *)out)[i] = (int32_t)v;
			break;
		case DPT_INT64:
			((int64_t *)out)[i] = v;
			break;
		case DPT_UINT8:
			((uint8_t *)out)[i] = (uint8_t)v;
			break;
		}
	}
}

/* ------------------------------------------------------------ collectives */

int dpt__cpu_allreduce(struct dpt__cpu_comm *c, const void *send, void *recv,
		       size_t count, enum dpt_dtype dtype, enum dpt_op op)
{
	size_t bytes = count * dpt_dtype_size(dtype);
	void *acc = NULL, *tmp = NULL;
	int rc = 0;

	if (c->rank != 0) {
		rc = io_all(c, c->fds[0], (void *)send, bytes, true, 0);
		if (!rc)
			rc = io_all(c, c->fds[0], recv, bytes, false, 0);
		return rc;
	}
	acc = calloc(count ? count : 1, 8);
	tmp = malloc(bytes ? bytes : 1);
	if (!acc || !tmp) {
		rc = DPT_ENOMEM;
		goto out;
	}
	accumulate(acc, send, count, dtype);
	for (int r = 1; r < c->world && !rc; r++) {
		rc = io_all(c, c->fds[r], tmp, bytes, false, 0);
		if (!rc)
			accumulate(acc, tmp, count, dtype);
	}
	if (rc)
		goto out;
	store(recv, acc, count, dtype, op, c->world);
	for (int r = 1; r < c->world && !rc; r++)
		rc = io_all(c, c->fds[r], recv, bytes, true, 0);
out:
	free(acc);
	free(tmp);
	return rc;
}

int dpt__cpu_broadcast(struct dpt__cpu_comm *c, void *buf, size_t count,
		       enum dpt_dtype dtype, int root)
{
	size_t bytes = count * dpt_dtype_size(dtype);
	int rc = 0;

	if (c->rank != 0) {
		if (c->rank == root)
			return io_all(c, c->fds[0], buf, bytes, true, 0);
		return io_all(c, c->fds[0], buf, bytes, false, 0);
	}
	if (root != 0)
		rc = io_all(c, c->fds[root], buf, bytes, false, 0);
	for (int r = 1; r < c->world && !rc; r++)
		if (r != root)
			rc = io_all(c, c->fds[r], buf, bytes, true, 0);
	return rc;
}

int dpt__cpu_allgather(struct dpt__cpu_comm *c, const void *send, void *recv,
		       size_t count, enum dpt_dtype dtype)
{
	size_t bytes = count * dpt_dtype_size(dtype);
	char *all = recv;
	int rc = 0;

	if (send != all + (size_t)c->rank * bytes)
		memmove(all + (size_t)c->rank * bytes, send, bytes);
	if (c->rank != 0) {
		rc = io_all(c, c->fds[0], all + (size_t)c->rank * bytes, bytes,
			    true, 0);
		if (!rc)
			rc = io_all(c, c->fds[0], all, bytes * (size_t)c->world,
				    false, 0);
		return rc;
	}
	for (int r = 1; r < c->world && !rc; r++)
		rc = io_all(c, c->fds[r], all + (size_t)r * bytes, bytes, false,
			    0);
	for (int r = 1; r < c->world && !rc; r++)
		rc = io_all(c, c->fds[r], all, bytes * (size_t)c->world, true,
			    0);
	return rc;
}

int dpt__cpu_barrier(struct dpt__cpu_comm *c)
{
	uint8_t b = 1;
	return dpt__cpu_allreduce(c, &b, &b, 1, DPT_UINT8, DPT_SUM);
}

void dpt__cpu_comm_abort(struct dpt__cpu_comm *c)
{
	atomic_store(&c->aborted, 1);
	/* shutdown() wakes a thread blocked in poll on these sockets; the
	 * descriptors stay open until destroy, so none is reused meanwhile. */
	for (int i = 0; i < c->world; i++)
		if (c->fds[i] >= 0)
			shutdown(c->fds[i], SHUT_RDWR);
}

void dpt__cpu_comm_destroy(struct dpt__cpu_comm **cp)
{
	struct dpt__cpu_comm *c = *cp;

	if (!c)
		return;
	if (c->fds)
		for (int i = 0; i < c->world; i++)
			if (c->fds[i] >= 0)
				close(c->fds[i]);
	free(c->fds);
	free(c);
	*cp = NULL;
}

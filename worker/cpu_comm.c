/*
 * The CPU collective backend: topology, bootstrap and the collectives of
 * worker/cpu_comm.h, composed from the shared-memory transport (ranks of one
 * node) and the TCP ring (one leader per node, the node's lowest rank).
 *
 * An allreduce is a shared-memory reduce to the leader, a ring allreduce
 * among leaders, and a shared-memory broadcast from the leader; with one
 * node only the first step runs (every rank gets the result), with one
 * rank per node only the ring.
 *
 * Connections: each leader connects to the next leader (the ring), each
 * other rank to its leader. The latter carry only the shared-memory
 * set-up, then stay open so that each side sees the other's death as an
 * end of file. A rank that fails a collective shuts all its sockets down
 * and marks its segment dead, so that the failure spreads to every rank
 * in milliseconds instead of waiting for timeouts.
 */
#define _GNU_SOURCE /* accept4 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "clock.h"
#include "cpu_comm.h"
#include "cpu_hello.h"
#include "cpu_reduce.h"
#include "cpu_ring.h"
#include "cpu_shm.h"
#include "cpu_watch.h"
#include "log.h"

/* Messages of the shared-memory set-up: the leader's "ready" carries the
 * segment's random name, the others answer "mapped". */
#define SHM_READY      0x32594452u /* "RDY2" */
#define SHM_MAPPED     0x31504d4du /* "MMP1" */
#define SHM_TOKEN      16	   /* random bytes of a segment's name */
#define SHM_NAME_TRIES 4

/* Slot of one rank in one of the two buffers of a node's segment. 1 MiB:
 * measured with bench/allreduce (doc/PERFORMANCE.md); a node's segment is
 * 2 MiB per local rank. */
#define SHM_SLOT_BYTES	   (1024u * 1024u)
#define DEFAULT_TIMEOUT_MS 60000

struct dpt__cpu_listener {
	int fd;
};

struct dpt__cpu_comm {
	int rank;
	int world;
	/* Nodes in the order of their lowest rank, which is their ring
	 * position; node i's ranks, ascending, are members[first[i] ..
	 * first[i + 1]) and the first of them is its leader. */
	int nodes;
	int *first;
	int *members;
	int *pos_of_rank;   /* ring position of each rank's node */
	int *local_of_rank; /* index of each rank within its node */
	int pos;	    /* my node */
	int local_world;
	int local_rank;
	int ring_send_fd; /* leaders of several nodes only */
	int ring_recv_fd;
	/* Per local rank: the leader's sockets to the others, the others'
	 * socket to the leader; -1 elsewhere. They carry the shared-memory
	 * set-up, then only the news of a process's end. */
	int *local_fds;
	size_t *gather_offsets; /* per local rank, for the allgather */
	struct dpt__ring ring;
	struct dpt__shm *shm;
	struct dpt__cpu_watch watch;
	int failed; /* the error that broke the communicator, or 0 */
};

/* ------------------------------------------------------------- listener */

int dpt__cpu_listen(struct dpt__cpu_listener **out, const char *bind_host,
		    uint16_t *port)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV,
	};
	struct addrinfo *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct dpt__cpu_listener *l = NULL;
	int fd = -1, one = 1, rc;

	if (!out || !bind_host || !port)
		return DPT_EINVAL;
	if (getaddrinfo(bind_host, "0", &hints, &ai) != 0) {
		dpt__error("cannot listen on '%s': not a numeric address",
			   bind_host);
		return DPT_EINVAL;
	}
	rc = DPT_ESYS;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto out;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		/* The data address is bound, not every interface: one that
		 * is not this host's (a NAT's, a typo) fails here. */
		dpt__error("cannot listen on '%s': %s%s", bind_host,
			   strerror(errno),
			   errno == EADDRNOTAVAIL
				   ? " (set DPTRAIN_DATA_HOST to an address "
				     "of this host)"
				   : "");
		goto out;
	}
	rc = DPT_ENOMEM;
	l = malloc(sizeof(*l));
	if (!l)
		goto out;
	*port = ntohs(ss.ss_family == AF_INET6
			      ? ((struct sockaddr_in6 *)&ss)->sin6_port
			      : ((struct sockaddr_in *)&ss)->sin_port);
	l->fd = fd;
	fd = -1;
	*out = l;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

void dpt__cpu_listener_destroy(struct dpt__cpu_listener **lp)
{
	if (!lp || !*lp)
		return;
	close((*lp)->fd);
	free(*lp);
	*lp = NULL;
}

/* ------------------------------------------------------ bootstrap I/O */

static int ms_left(uint64_t deadline)
{
	uint64_t now = dpt__now_ns();

	if (now >= deadline)
		return 0;
	return (int)((deadline - now + 999999u) / 1000000u);
}

/* Read or write all N bytes on the non-blocking FD by DEADLINE. */
static int io_all(int fd, void *buf, size_t n, int writing, uint64_t deadline)
{
	unsigned char *p = buf;

	while (n) {
		struct pollfd pfd = {.fd = fd,
				     .events = writing ? POLLOUT : POLLIN};
		ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL)
				    : recv(fd, p, n, 0);
		int ms;

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k == 0)
			return DPT_EPEERLOST;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return DPT_EPEERLOST;
		ms = ms_left(deadline);
		if (!ms)
			return DPT_ETIMEDOUT;
		if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
			return DPT_ESYS;
	}
	return 0;
}

static int send_word(int fd, uint32_t v, uint64_t deadline)
{
	unsigned char b[4];

	dpt__put32(b, v);
	return io_all(fd, b, sizeof(b), 1, deadline);
}

static int recv_word(int fd, uint32_t expect, uint64_t deadline)
{
	unsigned char b[4];
	int rc = io_all(fd, b, sizeof(b), 0, deadline);

	if (!rc && dpt__get32(b) != expect)
		rc = DPT_EPROTO;
	return rc;
}

static void tune_socket(int fd)
{
	int one = 1;

	/* Small collectives (a barrier is one byte) must not wait for
	 * Nagle's timer. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* Connect to PEER and send HELLO (its REPLY is read later, by
 * await_reply); *FD receives the socket. */
static int dial(const struct dpt__peer *peer, const unsigned char *hello,
		uint64_t deadline, int *fd_out)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
	};
	struct addrinfo *ai = NULL;
	char port[8];
	int fd = -1, rc;

	snprintf(port, sizeof(port), "%u", (unsigned)peer->port);
	if (getaddrinfo(peer->host, port, &hints, &ai) != 0) {
		dpt__error("cannot connect to '%s': not a numeric address",
			   peer->host);
		return DPT_EINVAL;
	}
	for (;;) {
		struct pollfd pfd;
		int err = 0;
		socklen_t len = sizeof(err);

		rc = DPT_ESYS;
		fd = socket(ai->ai_family,
			    SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			goto out;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 &&
		    errno != EINPROGRESS)
			err = errno;
		if (!err) {
			pfd = (struct pollfd){.fd = fd, .events = POLLOUT};
			if (poll(&pfd, 1, ms_left(deadline)) == 0) {
				rc = DPT_ETIMEDOUT;
				goto out;
			}
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
		}
		if (!err)
			break;
		close(fd);
		fd = -1;
		/* Listeners open before the roster is sent, so a refusal
		 * is a peer that is not up yet or gone: retry until the
		 * deadline tells which. */
		if (!ms_left(deadline)) {
			dpt__error("cannot connect to %s:%s: %s", peer->host,
				   port, strerror(err));
			rc = DPT_ETIMEDOUT;
			goto out;
		}
		usleep(10000);
	}
	rc = io_all(fd, (void *)hello, DPT__HELLO_BYTES, 1, deadline);
	if (rc)
		goto out;
	tune_socket(fd);
	*fd_out = fd;
	fd = -1;
out:
	if (fd >= 0)
		close(fd);
	freeaddrinfo(ai);
	return rc;
}

/* ------------------------------------------------------------- topology */

static int build_topology(struct dpt__cpu_comm *c,
			  const struct dpt__peer *peers)
{
	size_t w = (size_t)c->world;
	int *node_of_pos = NULL, *count = NULL;
	int rc = DPT_ENOMEM;

	c->first = calloc(w + 1, sizeof(int));
	c->members = calloc(w, sizeof(int));
	c->pos_of_rank = calloc(w, sizeof(int));
	c->local_of_rank = calloc(w, sizeof(int));
	node_of_pos = calloc(w, sizeof(int));
	count = calloc(w, sizeof(int));
	if (!c->first || !c->members || !c->pos_of_rank || !c->local_of_rank ||
	    !node_of_pos || !count)
		goto out;
	/* Quadratic in the number of nodes, run once per generation. */
	for (int r = 0; r < c->world; r++) {
		int p = 0;
		while (p < c->nodes && node_of_pos[p] != (int)peers[r].node)
			p++;
		if (p == c->nodes)
			node_of_pos[c->nodes++] = (int)peers[r].node;
		c->pos_of_rank[r] = p;
		c->local_of_rank[r] = count[p]++;
	}
	for (int p = 0; p < c->nodes; p++)
		c->first[p + 1] = c->first[p] + count[p];
	for (int r = 0; r < c->world; r++)
		c->members[c->first[c->pos_of_rank[r]] + c->local_of_rank[r]] =
			r;
	c->pos = c->pos_of_rank[c->rank];
	c->local_rank = c->local_of_rank[c->rank];
	c->local_world = count[c->pos];
	rc = 0;
out:
	free(node_of_pos);
	free(count);
	return rc;
}

static int leader_of(const struct dpt__cpu_comm *c, int pos)
{
	return c->members[c->first[pos]];
}

/* "/dptrain-<32 hex digits>": the segment's name says nothing of the
 * session or the secret, and nobody can predict it (doc/protocol.md). */
static void shm_name(char *buf, size_t size,
		     const unsigned char token[SHM_TOKEN])
{
	static const char hex[] = "0123456789abcdef";
	size_t n = (size_t)snprintf(buf, size, "/dptrain-");

	for (int i = 0; i < SHM_TOKEN && n + 2 < size; i++) {
		buf[n++] = hex[token[i] >> 4];
		buf[n++] = hex[token[i] & 15];
	}
	buf[n] = '\0';
}

/* Admit one connection of the topology: the previous leader's (ring) or a
 * rank's of this node (leader only). Returns 1 when it was, 0 when it was
 * refused. */
static int admit(struct dpt__cpu_comm *c, int fd, const struct dpt__hello *h,
		 int *want_ring, int *want_local)
{
	int prev = c->nodes > 1
			   ? leader_of(c, (c->pos + c->nodes - 1) % c->nodes)
			   : -1;
	uint32_t rank = h->from;

	if (rank >= (uint32_t)c->world) {
		dpt__hello_refuse(fd, "a rank beyond the world");
		return 0;
	}
	if (h->kind == DPT__HELLO_KIND_RING && *want_ring &&
	    (int)rank == prev) {
		c->ring_recv_fd = fd;
		*want_ring = 0;
	} else if (h->kind == DPT__HELLO_KIND_LOCAL && *want_local &&
		   c->pos_of_rank[rank] == c->pos &&
		   c->local_of_rank[rank] > 0 &&
		   c->local_fds[c->local_of_rank[rank]] < 0) {
		c->local_fds[c->local_of_rank[rank]] = fd;
		(*want_local)--;
	} else {
		/* An authenticated rank that the topology does not expect
		 * here, or a second connection for one slot (a replay). */
		dpt__hello_refuse(fd, "a rank or kind not expected here, or "
				      "already connected");
		return 0;
	}
	tune_socket(fd);
	return 1;
}

/* Accept the connections that this rank expects: from the previous
 * leader (ring) and from the other ranks of the node (leader only). */
static int accept_peers(struct dpt__cpu_comm *c, int lfd,
			const struct dpt__hello_key *key, int want_ring,
			uint64_t deadline)
{
	int want_local = c->local_rank == 0 ? c->local_world - 1 : 0;
	struct dpt__hello_gate *gate;
	int rc = 0;

	if (!want_ring && !want_local)
		return 0;
	/* 64 pending connections: too big for the stack of a thread. */
	gate = malloc(sizeof(*gate));
	if (!gate)
		return DPT_ENOMEM;
	dpt__hello_gate_init(gate, key, (uint32_t)c->rank);
	while (!rc && (want_ring || want_local)) {
		struct dpt__hello h;
		int fd;

		rc = dpt__hello_gate_next(gate, lfd, deadline, &fd, &h);
		if (!rc)
			admit(c, fd, &h, &want_ring, &want_local);
	}
	dpt__hello_gate_release(gate);
	free(gate);
	return rc;
}

/* Read the listener's REPLY to HELLO on FD: it holds the key too. */
static int await_reply(int fd, const struct dpt__hello_key *key,
		       const unsigned char *hello, int peer, uint64_t deadline)
{
	unsigned char reply[DPT__HELLO_REPLY_BYTES];
	int rc = io_all(fd, reply, sizeof(reply), 0, deadline);

	if (rc == DPT_EPEERLOST)
		dpt__error("rank %d closed the data-plane connection before "
			   "its reply: it refused this rank's hello (another "
			   "step or generation?)",
			   peer);
	if (rc)
		return rc;
	rc = dpt__hello_check_reply(key, hello, reply);
	if (rc)
		dpt__error("the listener of rank %d answered with a wrong "
			   "key: not a member of this generation",
			   peer);
	return rc;
}

/* Create the node's segment under a random name; *TOKEN receives it. */
static int create_shm(struct dpt__cpu_comm *c, unsigned char *token, char *name,
		      size_t size)
{
	int rc = DPT_EEXIST;

	for (int i = 0; i < SHM_NAME_TRIES && rc == DPT_EEXIST; i++) {
		if (getrandom(token, SHM_TOKEN, 0) != SHM_TOKEN)
			return DPT_ESYS;
		shm_name(name, size, token);
		/* A 128-bit name that exists already is some other
		 * process's: never ours to remove. Draw again. */
		rc = dpt__shm_create(&c->shm, name, c->local_world,
				     SHM_SLOT_BYTES);
	}
	if (rc)
		dpt__error("cannot create shared memory in /dev/shm: %s",
			   rc == DPT_EEXIST ? "every name drawn exists"
					    : strerror(errno));
	return rc;
}

/* The leader creates the node's segment and sends its name to the other
 * ranks on their admitted connections; each maps it, and the name is
 * removed as soon as all have: from then on nothing is left in /dev/shm
 * whatever happens to the processes. */
static int setup_shm(struct dpt__cpu_comm *c, uint64_t deadline)
{
	unsigned char msg[4 + SHM_TOKEN];
	char name[64];
	int rc;

	if (c->local_rank == 0) {
		rc = create_shm(c, msg + 4, name, sizeof(name));
		if (rc)
			return rc;
		dpt__put32(msg, SHM_READY);
		for (int j = 1; j < c->local_world && !rc; j++)
			rc = io_all(c->local_fds[j], msg, sizeof(msg), 1,
				    deadline);
		for (int j = 1; j < c->local_world && !rc; j++)
			rc = recv_word(c->local_fds[j], SHM_MAPPED, deadline);
		dpt__shm_unlink(name);
		return rc;
	}
	rc = io_all(c->local_fds[0], msg, sizeof(msg), 0, deadline);
	if (!rc && dpt__get32(msg) != SHM_READY)
		rc = DPT_EPROTO;
	if (rc)
		return rc;
	shm_name(name, sizeof(name), msg + 4);
	rc = dpt__shm_attach(&c->shm, name, c->local_world, c->local_rank);
	if (rc) {
		dpt__error("cannot map shared memory '%s': %s", name,
			   rc == DPT_ESYS    ? strerror(errno)
			   : rc == DPT_EAUTH ? "not this user's alone"
					     : "unexpected layout");
		return rc;
	}
	return send_word(c->local_fds[0], SHM_MAPPED, deadline);
}

/* Dial the one connection this rank opens (to the next leader, or to its
 * own leader), accept those it expects, then check the dialled one's
 * REPLY: only after accepting, for the listener it dialled may itself
 * be dialling before it accepts. */
static int connect_peers(struct dpt__cpu_comm *c, int lfd,
			 const struct dpt__peer *peers,
			 const struct dpt__hello_key *key, uint64_t deadline)
{
	const int leader = c->local_rank == 0;
	struct dpt__hello h = {.from = (uint32_t)c->rank};
	unsigned char hello[DPT__HELLO_BYTES];
	int *fd = NULL, rc;

	if (leader && c->nodes > 1) {
		h.kind = DPT__HELLO_KIND_RING;
		h.to = (uint32_t)leader_of(c, (c->pos + 1) % c->nodes);
		fd = &c->ring_send_fd;
	} else if (!leader) {
		h.kind = DPT__HELLO_KIND_LOCAL;
		h.to = (uint32_t)leader_of(c, c->pos);
		fd = &c->local_fds[0];
	}
	if (fd) {
		rc = dpt__hello_encode(key, &h, hello);
		if (!rc)
			rc = dial(&peers[h.to], hello, deadline, fd);
		if (rc)
			return rc;
	}
	rc = accept_peers(c, lfd, key, leader && c->nodes > 1, deadline);
	if (!rc && fd)
		rc = await_reply(*fd, key, hello, (int)h.to, deadline);
	return rc;
}

int dpt__cpu_comm_new(struct dpt__cpu_comm **out,
		      struct dpt__cpu_listener **listener, int rank, int world,
		      const struct dpt__peer *peers, const char *session,
		      const void *step_key, size_t step_key_len, int timeout_ms)
{
	uint64_t deadline =
		dpt__now_ns() +
		(uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
	struct dpt__cpu_listener *l = listener ? *listener : NULL;
	struct dpt__cpu_comm *c = NULL;
	struct dpt__hello_key key;
	int rc;

	if (listener)
		*listener = NULL;
	rc = DPT_EINVAL;
	if (!out || !l || world < 1 || rank < 0 || rank >= world || !peers ||
	    !session)
		goto out;
	rc = dpt__hello_key_derive(&key, step_key, step_key_len, session);
	if (rc)
		goto out;
	rc = DPT_ENOMEM;
	c = calloc(1, sizeof(*c));
	if (!c)
		goto out;
	c->rank = rank;
	c->world = world;
	c->ring_send_fd = -1;
	c->ring_recv_fd = -1;
	c->watch.wake_fd = -1;
	c->watch.timeout_ms = DEFAULT_TIMEOUT_MS;
	rc = build_topology(c, peers);
	if (rc)
		goto out;
	c->local_fds = malloc(sizeof(int) * (size_t)c->local_world);
	c->gather_offsets = calloc((size_t)c->local_world, sizeof(size_t));
	if (!c->local_fds || !c->gather_offsets)
		goto out;
	for (int j = 0; j < c->local_world; j++)
		c->local_fds[j] = -1;
	rc = DPT_ESYS;
	c->watch.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->watch.wake_fd < 0)
		goto out;

	rc = connect_peers(c, l->fd, peers, &key, deadline);
	if (rc)
		goto out;
	if (c->local_world > 1) {
		rc = setup_shm(c, deadline);
		if (rc)
			goto out;
		dpt__shm_watch_peers(c->shm, c->local_fds);
	}
	if (c->local_rank == 0 && c->nodes > 1) {
		rc = dpt__ring_init(&c->ring, c->ring_send_fd, c->ring_recv_fd,
				    c->pos, c->nodes, world);
		if (rc)
			goto out;
	}
	*out = c;
	c = NULL;
	rc = 0;
out:
	if (rc == DPT_ETIMEDOUT)
		dpt__error("rank %d: the ranks of the generation did not all "
			   "connect within %d ms",
			   rank, timeout_ms);
	explicit_bzero(&key, sizeof(key));
	dpt__cpu_comm_destroy(&c);
	dpt__cpu_listener_destroy(&l);
	return rc;
}

void dpt__cpu_comm_set_timeout(struct dpt__cpu_comm *c, int timeout_ms)
{
	c->watch.timeout_ms = timeout_ms;
}

void dpt__cpu_comm_abort(struct dpt__cpu_comm *c)
{
	uint64_t one = 1;

	if (!c)
		return;
	atomic_store(&c->watch.aborted, 1);
	/* Ends a poll() in the TCP ring; the futex word ends a sleep in
	 * shared memory (it wakes the node's other sleepers too, who just
	 * go back to sleep). */
	if (write(c->watch.wake_fd, &one, sizeof(one)) < 0) {
		/* The counter is already non-zero: polls see it anyway. */
	}
	dpt__shm_wake(c->shm);
}

void dpt__cpu_comm_destroy(struct dpt__cpu_comm **cp)
{
	struct dpt__cpu_comm *c = cp ? *cp : NULL;

	if (!c)
		return;
	dpt__ring_release(&c->ring);
	dpt__shm_destroy(&c->shm);
	if (c->ring_send_fd >= 0)
		close(c->ring_send_fd);
	if (c->ring_recv_fd >= 0)
		close(c->ring_recv_fd);
	for (int j = 0; c->local_fds && j < c->local_world; j++)
		if (c->local_fds[j] >= 0)
			close(c->local_fds[j]);
	if (c->watch.wake_fd >= 0)
		close(c->watch.wake_fd);
	free(c->local_fds);
	free(c->gather_offsets);
	free(c->first);
	free(c->members);
	free(c->pos_of_rank);
	free(c->local_of_rank);
	free(c);
	*cp = NULL;
}

/* ---------------------------------------------------------- collectives */

static int enter(const struct dpt__cpu_comm *c)
{
	if (atomic_load(&c->watch.aborted))
		return DPT_EGENERATION;
	return c->failed;
}

/*
 * A collective that failed leaves its peers waiting for data that will
 * never come: shut every socket down (they see an end of file) and mark
 * the node's segment dead, so that all ranks fail now, not at a timeout.
 * The communicator is unusable from then on.
 */
static int leave(struct dpt__cpu_comm *c, int rc)
{
	if (!rc)
		return 0;
	if (atomic_load(&c->watch.aborted))
		rc = DPT_EGENERATION;
	if (!c->failed) {
		c->failed = rc;
		if (c->ring_send_fd >= 0)
			shutdown(c->ring_send_fd, SHUT_RDWR);
		if (c->ring_recv_fd >= 0)
			shutdown(c->ring_recv_fd, SHUT_RDWR);
		for (int j = 0; j < c->local_world; j++)
			if (c->local_fds[j] >= 0)
				shutdown(c->local_fds[j], SHUT_RDWR);
		dpt__shm_fail(c->shm);
	}
	return rc;
}

static int check_count(size_t count, enum dpt_dtype dtype, size_t times)
{
	size_t es = dpt_dtype_size(dtype);

	if (!es || count > SIZE_MAX / es / times)
		return DPT_EINVAL;
	return 0;
}

int dpt__cpu_allreduce(struct dpt__cpu_comm *c, const void *send, void *recv,
		       size_t count, enum dpt_dtype dtype, enum dpt_op op)
{
	unsigned divisor;
	int rc;

	if (!c || !dpt__reduce_valid(dtype, op) ||
	    check_count(count, dtype, 1) || (count && (!send || !recv)))
		return DPT_EINVAL;
	rc = enter(c);
	if (rc || !count)
		return rc;
	divisor = op == DPT_AVG ? (unsigned)c->world : 1;
	if (c->world == 1) {
		if (send != recv)
			memcpy(recv, send, count * dpt_dtype_size(dtype));
	} else if (c->nodes == 1) {
		rc = dpt__shm_reduce(c->shm, &c->watch, send, recv, count,
				     dtype, divisor, -1);
	} else if (c->local_world == 1) {
		rc = dpt__ring_allreduce(&c->ring, &c->watch, send, recv, count,
					 dtype, divisor);
	} else {
		rc = dpt__shm_reduce(c->shm, &c->watch, send, recv, count,
				     dtype, 1, 0);
		if (!rc && c->local_rank == 0)
			rc = dpt__ring_allreduce(&c->ring, &c->watch, recv,
						 recv, count, dtype, divisor);
		if (!rc)
			rc = dpt__shm_bcast(c->shm, &c->watch, recv,
					    count * dpt_dtype_size(dtype), 0);
	}
	return leave(c, rc);
}

int dpt__cpu_broadcast(struct dpt__cpu_comm *c, void *buf, size_t count,
		       enum dpt_dtype dtype, int root)
{
	size_t bytes;
	int rc, root_pos;

	if (!c || check_count(count, dtype, 1) || (count && !buf) || root < 0 ||
	    root >= c->world)
		return DPT_EINVAL;
	rc = enter(c);
	if (rc || !count)
		return rc;
	bytes = count * dpt_dtype_size(dtype);
	root_pos = c->pos_of_rank[root];
	/* On the root's node the data reaches the leader through shared
	 * memory before the ring; elsewhere it arrives by the ring first. */
	if (c->pos == root_pos && c->local_world > 1)
		rc = dpt__shm_bcast(c->shm, &c->watch, buf, bytes,
				    c->local_of_rank[root]);
	if (!rc && c->nodes > 1 && c->local_rank == 0)
		rc = dpt__ring_bcast(&c->ring, &c->watch, buf, bytes, root_pos);
	if (!rc && c->pos != root_pos && c->local_world > 1)
		rc = dpt__shm_bcast(c->shm, &c->watch, buf, bytes, 0);
	return leave(c, rc);
}

int dpt__cpu_allgather(struct dpt__cpu_comm *c, const void *send, void *recv,
		       size_t count, enum dpt_dtype dtype)
{
	size_t block;
	unsigned char *mine;
	int rc;

	if (!c || check_count(count, dtype, (size_t)c->world) ||
	    (count && (!send || !recv)))
		return DPT_EINVAL;
	rc = enter(c);
	if (rc || !count)
		return rc;
	block = count * dpt_dtype_size(dtype);
	mine = (unsigned char *)recv + (size_t)c->rank * block;
	/* In place is either SEND == RECV (my block first in RECV) or, as
	 * in MPI, SEND already at my place in RECV. */
	if ((const unsigned char *)send != mine)
		memmove(mine, send, block);
	if (c->local_world > 1) {
		for (int j = 0; j < c->local_world; j++)
			c->gather_offsets[j] =
				(size_t)c->members[c->first[c->pos] + j] *
				block;
		rc = dpt__shm_gather(c->shm, &c->watch, mine, recv, block,
				     c->gather_offsets, c->nodes == 1 ? -1 : 0);
	}
	if (!rc && c->nodes > 1 && c->local_rank == 0)
		rc = dpt__ring_allgather(&c->ring, &c->watch, recv, block,
					 c->first, c->members);
	if (!rc && c->nodes > 1 && c->local_world > 1)
		rc = dpt__shm_bcast(c->shm, &c->watch, recv,
				    block * (size_t)c->world, 0);
	return leave(c, rc);
}

int dpt__cpu_barrier(struct dpt__cpu_comm *c)
{
	/* An allreduce cannot finish anywhere before every rank has
	 * contributed: a one-byte one is a barrier. */
	uint8_t in = 0, out;

	return dpt__cpu_allreduce(c, &in, &out, 1, DPT_UINT8, DPT_SUM);
}

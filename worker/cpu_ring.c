#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <dptrain/error.h>

#include "assertion.h"
#include "clock.h"
#include "cpu_reduce.h"
#include "cpu_ring.h"

/* Large enough that a reduction runs on a good share of a socket buffer
 * per call, small enough to stay in L2 with the operand it is added to. */
#define STAGE_BYTES (256u * 1024u)
/* How long a stuck ring keeps retrying its sockets before it sleeps in
 * poll(): a wake-up from poll() costs tens of microseconds here, about
 * what a whole small collective should. */
#define SPIN_NS 20000u

/*
 * A contiguous part of a stream. Sent: LEN bytes at SRC. Received: LEN
 * bytes that end at DST, copied (DIVISOR 0) or added to the local operand
 * at SRC (which may be DST) and divided by DIVISOR.
 */
struct dpt__ring_piece {
	unsigned char *dst;
	const unsigned char *src;
	size_t len;
	unsigned divisor;
};

int dpt__ring_init(struct dpt__ring *r, int send_fd, int recv_fd, int pos,
		   int nodes, int world)
{
	/* An allreduce has 2 (NODES - 1) pieces each way, an allgather one
	 * per rank at most. */
	size_t npieces = (size_t)(2 * nodes > world ? 2 * nodes : world);

	memset(r, 0, sizeof(*r));
	r->send_fd = send_fd;
	r->recv_fd = recv_fd;
	r->pos = pos;
	r->nodes = nodes;
	r->stage_bytes = STAGE_BYTES;
	r->stage = malloc(r->stage_bytes);
	r->send = calloc(npieces, sizeof(*r->send));
	r->recv = calloc(npieces, sizeof(*r->recv));
	if (!r->stage || !r->send || !r->recv) {
		dpt__ring_release(r);
		return DPT_ENOMEM;
	}
	/* Warm it now rather than in the first collective. */
	memset(r->stage, 0, r->stage_bytes);
	return 0;
}

void dpt__ring_release(struct dpt__ring *r)
{
	free(r->stage);
	free(r->send);
	free(r->recv);
	r->stage = NULL;
	r->send = NULL;
	r->recv = NULL;
}

static size_t stream_bytes(const struct dpt__ring_piece *p, int n)
{
	size_t total = 0;

	for (int i = 0; i < n; i++)
		total += p[i].len;
	return total;
}

static int would_block(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK;
}

/* One collective's progress through the streams of run(). */
struct ring_run {
	struct dpt__ring *r;
	size_t own; /* run()'s OWN */
	size_t send_total, recv_total;
	size_t sent, done; /* bytes sent; bytes received and processed */
	size_t staged;	   /* received bytes in r->stage, not yet reduced */
	size_t soff, roff; /* the offsets in the current pieces */
	int si, ri;	   /* the current pieces */
	enum dpt_dtype dtype;
	size_t es;
};

/* Send what the credit rule allows until the socket is full. Returns 0,
 * or DPT_EPEERLOST. */
static int pump_send(struct ring_run *s, int *moved)
{
	struct dpt__ring *r = s->r;

	while (s->sent < s->send_total && s->own + s->done > s->sent) {
		const struct dpt__ring_piece *p;
		size_t n;
		ssize_t k;

		while (s->soff == r->send[s->si].len) {
			s->si++;
			s->soff = 0;
		}
		p = &r->send[s->si];
		n = p->len - s->soff;
		if (n > s->own + s->done - s->sent)
			n = s->own + s->done - s->sent;
		k = send(r->send_fd, p->src + s->soff, n,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0 && would_block())
			break;
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return DPT_EPEERLOST;
		s->sent += (size_t)k;
		s->soff += (size_t)k;
		*moved = 1;
	}
	/* The credit rule (cpu_ring.h): past OWN, only bytes already
	 * received and processed are sent on. */
	DPT_ASSERT(s->sent <= s->own + s->done);
	return 0;
}

/* One recv into piece P: copied, or added to the local operand. Returns
 * recv's result (errno as recv left it). */
static ssize_t recv_piece(struct ring_run *s, const struct dpt__ring_piece *p)
{
	struct dpt__ring *r = s->r;
	const void *srcs[2];
	size_t room, whole;
	ssize_t k;

	if (!p->divisor) {
		k = recv(r->recv_fd, p->dst + s->roff, p->len - s->roff,
			 MSG_DONTWAIT);
		if (k > 0) {
			s->roff += (size_t)k;
			s->done += (size_t)k;
		}
		return k;
	}
	room = p->len - s->roff - s->staged;
	if (room > r->stage_bytes - s->staged)
		room = r->stage_bytes - s->staged;
	k = recv(r->recv_fd, r->stage + s->staged, room, MSG_DONTWAIT);
	if (k <= 0)
		return k;
	/* Reduce the whole elements now, while they are in cache; keep a
	 * split one. */
	s->staged += (size_t)k;
	whole = s->staged / s->es * s->es;
	srcs[0] = p->src + s->roff;
	srcs[1] = r->stage;
	dpt__reduce(s->dtype, p->dst + s->roff, NULL, srcs, 2, whole / s->es,
		    p->divisor);
	memmove(r->stage, r->stage + whole, s->staged - whole);
	s->staged -= whole;
	/* At most a split element is kept: the next recv has room for the
	 * rest. */
	DPT_ASSERT(s->staged < s->es);
	s->roff += whole;
	s->done += whole;
	return k;
}

/* Receive and process until the socket is empty. Returns 0, or
 * DPT_EPEERLOST. */
static int pump_recv(struct ring_run *s, int *moved)
{
	struct dpt__ring *r = s->r;

	while (s->done < s->recv_total) {
		ssize_t k;

		while (s->roff == r->recv[s->ri].len) {
			s->ri++;
			s->roff = 0;
		}
		k = recv_piece(s, &r->recv[s->ri]);
		if (k < 0 && would_block())
			break;
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return DPT_EPEERLOST;
		*moved = 1;
	}
	return 0;
}

/*
 * Stuck: sleep until a socket is ready. The next node never sends
 * anything back, so its socket becoming readable means that it closed or
 * reset the connection: a failure while it still needs bytes from us, and
 * otherwise a node that finished the collective and went on (or exited).
 */
static int wait_sockets(const struct ring_run *s, struct dpt__cpu_watch *w)
{
	struct pollfd fds[2];
	int rc;

	fds[0] = (struct pollfd){
		.fd = s->sent < s->send_total ? s->r->send_fd : -1,
		.events = POLLIN | (s->own + s->done > s->sent ? POLLOUT : 0),
	};
	fds[1] = (struct pollfd){
		.fd = s->r->recv_fd,
		.events = s->done < s->recv_total ? POLLIN : 0,
	};
	rc = dpt__cpu_watch_poll(w, fds, 2,
				 w->timeout_ms > 0 ? w->timeout_ms : -1);
	if (rc)
		return rc;
	if (fds[0].revents & (POLLIN | POLLERR | POLLHUP))
		return DPT_EPEERLOST;
	if (!fds[0].revents && !fds[1].revents)
		return DPT_EPEERLOST; /* a whole timeout without a byte */
	return 0;
}

/*
 * Run the streams r->send[0..NSEND) and r->recv[0..NRECV): OWN is how
 * far the send stream may go before it needs received bytes; past that,
 * byte OWN + x of the send stream is byte x of the receive stream, once
 * processed. ES is the element size of the reductions.
 */
static int run(struct dpt__ring *r, struct dpt__cpu_watch *w, int nsend,
	       int nrecv, size_t own, enum dpt_dtype dtype, size_t es)
{
	struct ring_run s = {
		.r = r,
		.own = own,
		.send_total = stream_bytes(r->send, nsend),
		.recv_total = stream_bytes(r->recv, nrecv),
		.dtype = dtype,
		.es = es,
	};
	uint64_t stuck = 0; /* when the streams last stopped moving */
	int rc;

	while (s.sent < s.send_total || s.done < s.recv_total) {
		int moved = 0;

		if (atomic_load_explicit(&w->aborted, memory_order_relaxed))
			return DPT_EGENERATION;
		rc = pump_send(&s, &moved);
		if (!rc)
			rc = pump_recv(&s, &moved);
		if (rc)
			return rc;
		if (moved) {
			stuck = 0;
			continue;
		}
		if (!stuck)
			stuck = dpt__now_ns();
		if (dpt__now_ns() - stuck < SPIN_NS)
			continue;
		rc = wait_sockets(&s, w);
		if (rc)
			return rc;
	}
	return 0;
}

static int ring_mod(int a, int n)
{
	return ((a % n) + n) % n;
}

int dpt__ring_allreduce(struct dpt__ring *r, struct dpt__cpu_watch *w,
			const void *send, void *recv, size_t count,
			enum dpt_dtype dtype, unsigned divisor)
{
	const size_t es = dpt_dtype_size(dtype);
	const int n = r->nodes, me = r->pos;
	const size_t per = (count + (size_t)n - 1) / (size_t)n;
	const unsigned char *in = send;
	unsigned char *out = recv;
	int k = 0;

	/* Segment j is [j * per, (j + 1) * per) clipped to COUNT. In
	 * reduce-scatter step s a node sends segment me - s and adds its own
	 * operand to segment me - s - 1; it then owns segment me + 1 in
	 * full, and all-gather step t passes on segment me + 1 - t and
	 * receives segment me - t. Every segment of RECV is written once
	 * before it is sent from RECV, so SEND is only read. */
	for (int step = 0; step < 2 * (n - 1); step++, k++) {
		int rs = step < n - 1;
		int sj = rs ? ring_mod(me - step, n)
			    : ring_mod(me + 1 - (step - (n - 1)), n);
		int rj = rs ? ring_mod(me - step - 1, n)
			    : ring_mod(me - (step - (n - 1)), n);
		size_t sb = (size_t)sj * per, rb = (size_t)rj * per;
		size_t se = sb + per, re = rb + per;

		sb = sb < count ? sb : count;
		se = se < count ? se : count;
		rb = rb < count ? rb : count;
		re = re < count ? re : count;
		r->send[k] = (struct dpt__ring_piece){
			.src = (step == 0 ? in : out) + sb * es,
			.len = (se - sb) * es,
		};
		r->recv[k] = (struct dpt__ring_piece){
			.dst = out + rb * es,
			.src = in + rb * es,
			.len = (re - rb) * es,
			.divisor = !rs		   ? 0
				   : step == n - 2 ? divisor
						   : 1,
		};
	}
	return run(r, w, k, k, r->send[0].len, dtype, es);
}

int dpt__ring_bcast(struct dpt__ring *r, struct dpt__cpu_watch *w, void *buf,
		    size_t bytes, int root)
{
	int dist = ring_mod(r->pos - root, r->nodes);
	int nsend = dist != r->nodes - 1, nrecv = dist != 0;

	r->send[0] = (struct dpt__ring_piece){.src = buf, .len = bytes};
	r->recv[0] = (struct dpt__ring_piece){.dst = buf, .len = bytes};
	return run(r, w, nsend, nrecv, dist == 0 ? bytes : 0, DPT_UINT8, 1);
}

int dpt__ring_allgather(struct dpt__ring *r, struct dpt__cpu_watch *w,
			void *recv, size_t block, const int *first,
			const int *members)
{
	unsigned char *out = recv;
	const int n = r->nodes, me = r->pos;
	int nsend = 0, nrecv = 0;

	for (int step = 0; step < n - 1; step++) {
		int sn = ring_mod(me - step, n),
		    rn = ring_mod(me - step - 1, n);

		for (int i = first[sn]; i < first[sn + 1]; i++)
			r->send[nsend++] = (struct dpt__ring_piece){
				.src = out + (size_t)members[i] * block,
				.len = block,
			};
		for (int i = first[rn]; i < first[rn + 1]; i++)
			r->recv[nrecv++] = (struct dpt__ring_piece){
				.dst = out + (size_t)members[i] * block,
				.len = block,
			};
	}
	return run(r, w, nsend, nrecv,
		   (size_t)(first[me + 1] - first[me]) * block, DPT_UINT8, 1);
}

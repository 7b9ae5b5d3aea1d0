#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "assertion.h"
#include "clock.h"
#include "cpu_reduce.h"
#include "cpu_shm.h"

#define SHM_MAGIC   0x44505453u /* "DPTS" */
#define SHM_VERSION 1u

/*
 * How long a waiter keeps the CPU before it sleeps on the futex. A futex
 * round trip costs tens of microseconds here, a chunk's phases follow
 * each other within tens of microseconds, so waiting awake pays. With a
 * CPU per local rank, spin (with the pause hint) for SPIN_NS. With more
 * ranks than CPUs a spinner would steal the CPU from the rank it waits
 * for: yield it instead, for up to YIELD_NS (4 ranks on 2 CPUs: 1 KiB in
 * 20 us instead of 120 us with straight sleeps; bench/allreduce).
 */
#define SPIN_NS	 50000u
#define YIELD_NS 100000u
/* Sleepers wake this often to look at their watch (dead peers, timeout). */
#define NAP_NS 10000000u

/* Sequence words sit 128 bytes apart: adjacent-line prefetchers pull
 * pairs of 64-byte lines, and two ranks' words must not share either. */
struct shm_rank_word {
	_Alignas(128) _Atomic uint64_t seq;
};

struct shm_header {
	uint32_t magic;
	uint32_t version;
	uint32_t local_world;
	uint32_t reserved;
	uint64_t slot_bytes;
	uint64_t map_bytes;
	_Alignas(128) atomic_uint futex; /* bumped by every wake-up */
	atomic_uint waiters;		 /* ranks asleep (or about to be) */
	atomic_uint dead;		 /* some rank gave up: all must */
	struct shm_rank_word rank[];
};

struct dpt__shm {
	struct shm_header *h;
	unsigned char *data; /* two buffers of WORLD slots */
	size_t map_bytes;
	size_t slot;
	int world;
	int me;
	uint64_t chunk;	    /* chunks this rank has run, all operations */
	uint64_t all_at;    /* every other rank's sequence is known >= this */
	uint64_t spin_ns;   /* how long to wait awake */
	int yield;	    /* more local ranks than CPUs: yield, don't spin */
	const void **srcs;  /* WORLD reduction inputs */
	const int *peer_fd; /* WORLD sockets whose end means death, or -1 */
	struct pollfd *polled; /* WORLD entries */
};

static size_t header_bytes(int local_world)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t n = sizeof(struct shm_header) +
		   (size_t)local_world * sizeof(struct shm_rank_word);
	return (n + page - 1) / page * page;
}

static int init_local(struct dpt__shm **out, void *map, size_t map_bytes,
		      int local_world, int local_rank)
{
	struct dpt__shm *s = calloc(1, sizeof(*s));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	if (!s)
		return DPT_ENOMEM;
	s->srcs = calloc((size_t)local_world, sizeof(*s->srcs));
	s->polled = calloc((size_t)local_world, sizeof(*s->polled));
	if (!s->srcs || !s->polled) {
		free(s->srcs);
		free(s->polled);
		free(s);
		return DPT_ENOMEM;
	}
	s->h = map;
	s->data = (unsigned char *)map + header_bytes(local_world);
	s->map_bytes = map_bytes;
	s->slot = (size_t)s->h->slot_bytes;
	s->world = local_world;
	s->me = local_rank;
	s->yield = ncpu > 0 && local_world > ncpu;
	s->spin_ns = s->yield ? YIELD_NS : SPIN_NS;
	*out = s;
	return 0;
}

int dpt__shm_create(struct dpt__shm **out, const char *name, int local_world,
		    size_t slot_bytes)
{
	size_t hdr = header_bytes(local_world);
	size_t map_bytes = hdr + 2 * (size_t)local_world * slot_bytes;
	struct shm_header *h;
	void *map = MAP_FAILED;
	int fd, rc;

	/* A name that exists is someone else's (names are random): never
	 * removed, never used. */
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EEXIST ? DPT_EEXIST : DPT_ESYS;
	rc = DPT_ESYS;
	if (ftruncate(fd, (off_t)map_bytes) < 0)
		goto out;
	map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto out;
	/* Touch every page now: a first touch in a collective costs as
	 * much as the copy it interrupts (memory freshly mapped copies at
	 * a tenth of the speed of warm memory here). */
	memset(map, 0, map_bytes);
	h = map;
	h->magic = SHM_MAGIC;
	h->version = SHM_VERSION;
	h->local_world = (uint32_t)local_world;
	h->slot_bytes = slot_bytes;
	h->map_bytes = map_bytes;
	rc = init_local(out, map, map_bytes, local_world, 0);
out:
	if (rc) {
		if (map != MAP_FAILED)
			munmap(map, map_bytes);
		shm_unlink(name);
	}
	close(fd);
	return rc;
}

int dpt__shm_attach(struct dpt__shm **out, const char *name, int local_world,
		    int local_rank)
{
	const struct shm_header *h;
	void *map = MAP_FAILED;
	struct stat st;
	int fd, rc;

	fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0)
		return DPT_ESYS;
	rc = DPT_ESYS;
	if (fstat(fd, &st) < 0)
		goto out;
	/* Only a segment that this user alone can open: one that another
	 * user made could be read or changed behind the collectives. */
	rc = DPT_EAUTH;
	if (st.st_uid != geteuid() || (st.st_mode & 077))
		goto out;
	rc = DPT_EPROTO;
	if ((size_t)st.st_size < header_bytes(local_world))
		goto out;
	rc = DPT_ESYS;
	map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_POPULATE, fd, 0);
	if (map == MAP_FAILED)
		goto out;
	h = map;
	rc = DPT_EPROTO;
	if (h->magic != SHM_MAGIC || h->version != SHM_VERSION ||
	    h->local_world != (uint32_t)local_world ||
	    h->map_bytes != (uint64_t)st.st_size ||
	    h->map_bytes != header_bytes(local_world) +
				    2 * (uint64_t)local_world * h->slot_bytes)
		goto out;
	rc = init_local(out, map, (size_t)st.st_size, local_world, local_rank);
out:
	if (rc && map != MAP_FAILED)
		munmap(map, (size_t)st.st_size);
	close(fd);
	return rc;
}

void dpt__shm_unlink(const char *name)
{
	shm_unlink(name);
}

void dpt__shm_destroy(struct dpt__shm **sp)
{
	struct dpt__shm *s = *sp;

	if (!s)
		return;
	munmap(s->h, s->map_bytes);
	free(s->srcs);
	free(s->polled);
	free(s);
	*sp = NULL;
}

/* ------------------------------------------------------------------ sync */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static void futex_wake(atomic_uint *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void dpt__shm_wake(struct dpt__shm *s)
{
	if (!s)
		return;
	atomic_fetch_add(&s->h->futex, 1);
	futex_wake(&s->h->futex);
}

void dpt__shm_fail(struct dpt__shm *s)
{
	if (!s)
		return;
	atomic_store(&s->h->dead, 1);
	dpt__shm_wake(s);
}

/*
 * Publishing is a sequentially consistent store followed by a load of the
 * sleeper count, and a sleeper increments that count before it rechecks
 * the sequences (Dekker's pattern): either the publisher sees the sleeper
 * and wakes it, or the sleeper sees the new value and does not sleep.
 */
static void publish(struct dpt__shm *s, uint64_t v)
{
	/* Only this rank writes its word, one phase after the other: a
	 * value that is not above the last means that its numbering of the
	 * chunks slipped, and the other ranks' "reached at least" waits
	 * would pair phases that are not the same. */
	DPT_ASSERT(v > atomic_load_explicit(&s->h->rank[s->me].seq,
					    memory_order_relaxed));
	atomic_store(&s->h->rank[s->me].seq, v);
	if (atomic_load(&s->h->waiters))
		dpt__shm_wake(s);
}

/* Whether rank WHO (every other rank when -1) has reached TARGET; *LEAST
 * receives the smallest sequence seen, to tell progress from silence. */
static int reached(const struct dpt__shm *s, int who, uint64_t target,
		   uint64_t *least)
{
	uint64_t lo = UINT64_MAX;

	if (who >= 0) {
		lo = atomic_load_explicit(&s->h->rank[who].seq,
					  memory_order_acquire);
	} else {
		for (int j = 0; j < s->world; j++) {
			uint64_t v;
			if (j == s->me)
				continue;
			v = atomic_load_explicit(&s->h->rank[j].seq,
						 memory_order_acquire);
			if (v < lo)
				lo = v;
		}
	}
	*least = lo;
	return lo >= target;
}

static int trouble(const struct dpt__shm *s, struct dpt__cpu_watch *w)
{
	if (atomic_load_explicit(&w->aborted, memory_order_relaxed))
		return DPT_EGENERATION;
	if (atomic_load_explicit(&s->h->dead, memory_order_relaxed))
		return DPT_EPEERLOST;
	return 0;
}

void dpt__shm_watch_peers(struct dpt__shm *s, const int *fds)
{
	s->peer_fd = fds;
}

/*
 * A peer killed outright cannot mark the segment dead: the end of its
 * socket is the only sign. It counts only for ranks that still owe the
 * awaited phase; one that published it and then exited (it finished the
 * collective before this rank did) is no failure.
 */
static int peers_gone(struct dpt__shm *s, int who, uint64_t target)
{
	nfds_t n = 0;
	int rc;

	for (int j = 0; s->peer_fd && j < s->world; j++) {
		if (j == s->me || s->peer_fd[j] < 0 || (who >= 0 && who != j) ||
		    atomic_load(&s->h->rank[j].seq) >= target)
			continue;
		s->polled[n++] =
			(struct pollfd){.fd = s->peer_fd[j], .events = POLLIN};
	}
	if (!n)
		return 0;
	do {
		rc = poll(s->polled, n, 0);
	} while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return DPT_ESYS;
	return rc > 0 ? DPT_EPEERLOST : 0;
}

static int sleep_until(struct dpt__shm *s, struct dpt__cpu_watch *w, int who,
		       uint64_t target, uint64_t *least)
{
	uint64_t now = dpt__now_ns(), last = *least;
	uint64_t limit = w->timeout_ms > 0 ? (uint64_t)w->timeout_ms * 1000000u
					   : UINT64_MAX;
	uint64_t deadline = limit == UINT64_MAX ? UINT64_MAX : now + limit;
	int rc;

	for (;;) {
		struct timespec nap = {.tv_nsec = NAP_NS};
		unsigned word = atomic_load(&s->h->futex);
		int ok;

		atomic_fetch_add(&s->h->waiters, 1);
		ok = reached(s, who, target, least);
		rc = ok ? 0 : trouble(s, w);
		if (!ok && !rc)
			syscall(SYS_futex, &s->h->futex, FUTEX_WAIT, word, &nap,
				NULL, 0);
		atomic_fetch_sub(&s->h->waiters, 1);
		if (ok || rc)
			return rc;
		if (reached(s, who, target, least))
			return 0;
		rc = trouble(s, w);
		if (!rc)
			rc = peers_gone(s, who, target);
		if (rc)
			return rc;
		now = dpt__now_ns();
		if (*least > last) {
			last = *least;
			if (deadline != UINT64_MAX)
				deadline = now + limit;
		} else if (now >= deadline) {
			return DPT_EPEERLOST;
		}
	}
}

/* Wait until rank WHO (every other rank when -1) has published TARGET. */
static int wait_for(struct dpt__shm *s, struct dpt__cpu_watch *w, int who,
		    uint64_t target)
{
	uint64_t least, start;
	int rc = 0;

	if (who < 0 && target <= s->all_at)
		return 0;
	if (reached(s, who, target, &least))
		goto done;
	start = dpt__now_ns();
	for (;;) {
		if (s->yield) {
			sched_yield();
			if (reached(s, who, target, &least))
				goto done;
		} else {
			for (int i = 0; i < 64; i++) {
				cpu_relax();
				if (reached(s, who, target, &least))
					goto done;
			}
		}
		rc = trouble(s, w);
		if (rc)
			return rc;
		if (dpt__now_ns() - start >= s->spin_ns)
			break;
	}
	rc = sleep_until(s, w, who, target, &least);
	if (rc)
		return rc;
done:
	if (who < 0 && least > s->all_at)
		s->all_at = least;
	return trouble(s, w);
}

/*
 * Chunk k's phases are 3k+1 (my input is in my slot), 3k+2 (my result is
 * in my slot) and 3k+3 (I have finished reading chunk k). Chunk k uses
 * the buffer that chunk k-2 used, so a rank may write it once every rank
 * has finished reading chunk k-2, whatever operation that chunk was.
 */
static int before_write(struct dpt__shm *s, struct dpt__cpu_watch *w)
{
	if (s->chunk < 2)
		return trouble(s, w);
	return wait_for(s, w, -1, 3 * (s->chunk - 2) + 3);
}

static unsigned char *slot(const struct dpt__shm *s, int rank)
{
	DPT_ASSERT(rank >= 0 && rank < s->world);
	return s->data +
	       ((s->chunk & 1) * (size_t)s->world + (size_t)rank) * s->slot;
}

/* ------------------------------------------------------------ operations */

/*
 * Split M elements into WORLD slices of whole cache lines (the last ones
 * shorter or empty), so that no two ranks write the same line of a
 * result. Slice j is [*begin, *end).
 */
static void slice(size_t m, int world, size_t es, int j, size_t *begin,
		  size_t *end)
{
	size_t line = 64 / es;
	size_t per = (m + (size_t)world - 1) / (size_t)world;
	size_t b, e;

	per = (per + line - 1) / line * line;
	b = (size_t)j * per;
	e = b + per;
	*begin = b < m ? b : m;
	*end = e < m ? e : m;
}

/*
 * A reduction of up to SMALL_BYTES is latency, not bandwidth: every rank
 * puts its whole input in its slot and the readers reduce all of it, so a
 * chunk waits for the other ranks once instead of twice (input, then
 * result). Each reader adds the same inputs in the same order, rank
 * order, so that all get the same bits.
 */
#define SMALL_BYTES 4096u

static int reduce_small(struct dpt__shm *s, struct dpt__cpu_watch *w,
			const void *send, void *recv, size_t count,
			enum dpt_dtype dtype, unsigned divisor, int root)
{
	const uint64_t base = 3 * s->chunk;
	const int reader = root < 0 || root == s->me;
	int rc = before_write(s, w);

	/* The whole input fits in one slot (dpt__shm_reduce's choice). */
	DPT_ASSERT(count * dpt_dtype_size(dtype) <= s->slot);
	if (rc)
		return rc;
	/* The root's own input is read by nobody else. */
	if (root != s->me)
		memcpy(slot(s, s->me), send, count * dpt_dtype_size(dtype));
	publish(s, base + 1);
	if (reader) {
		rc = wait_for(s, w, -1, base + 1);
		if (rc)
			return rc;
		for (int j = 0; j < s->world; j++)
			s->srcs[j] = j == s->me ? send : slot(s, j);
		dpt__reduce(dtype, recv, NULL, s->srcs, s->world, count,
			    divisor);
	}
	publish(s, base + 3);
	s->chunk++;
	return 0;
}

/* Every other rank's slice of a chunk of M elements of ES bytes, from
 * FROM to TO, each at the slice's offset: NULL is that rank's slot. */
static void move_slices(const struct dpt__shm *s, size_t m, size_t es,
			unsigned char *to, const unsigned char *from)
{
	size_t b, e;

	for (int j = 0; j < s->world; j++) {
		if (j == s->me)
			continue;
		slice(m, s->world, es, j, &b, &e);
		memcpy((to ? to : slot(s, j)) + b * es,
		       (from ? from : slot(s, j)) + b * es, (e - b) * es);
	}
}

int dpt__shm_reduce(struct dpt__shm *s, struct dpt__cpu_watch *w,
		    const void *send, void *recv, size_t count,
		    enum dpt_dtype dtype, unsigned divisor, int root)
{
	const size_t es = dpt_dtype_size(dtype);
	const size_t per_chunk = s->slot / es;
	const unsigned char *in = send;
	unsigned char *out = recv;
	const int me = s->me;
	const int reader = root < 0 || root == me;
	/* Others read my result when all get it, or when I am not root. */
	const int shared = root < 0 || root != me;
	int rc = 0;

	if (count * es <= SMALL_BYTES && count * es <= s->slot)
		return reduce_small(s, w, send, recv, count, dtype, divisor,
				    root);
	for (size_t at = 0; at < count; at += per_chunk) {
		size_t m = count - at < per_chunk ? count - at : per_chunk;
		uint64_t base = 3 * s->chunk;
		unsigned char *mine = slot(s, me);
		size_t b, e;

		rc = before_write(s, w);
		if (rc)
			goto out;
		/* My own slice never goes to my slot: I read it from SEND. */
		move_slices(s, m, es, mine, in + at * es);
		publish(s, base + 1);
		rc = wait_for(s, w, -1, base + 1);
		if (rc)
			goto out;
		slice(m, s->world, es, me, &b, &e);
		if (e > b) {
			void *to_out = reader ? out + (at + b) * es : NULL;
			void *to_slot = shared ? mine + b * es : NULL;
			int n = 0;

			s->srcs[n++] = in + (at + b) * es;
			for (int j = 0; j < s->world; j++)
				if (j != me)
					s->srcs[n++] = slot(s, j) + b * es;
			dpt__reduce(dtype, to_out ? to_out : to_slot,
				    to_out ? to_slot : NULL, s->srcs, n, e - b,
				    divisor);
		}
		if (reader) {
			publish(s, base + 2);
			rc = wait_for(s, w, -1, base + 2);
			if (rc)
				goto out;
			move_slices(s, m, es, out + at * es, NULL);
		}
		publish(s, base + 3);
		s->chunk++;
	}
out:
	return rc;
}

int dpt__shm_bcast(struct dpt__shm *s, struct dpt__cpu_watch *w, void *buf,
		   size_t bytes, int root)
{
	/* Only the root writes, so a chunk may fill all slots of a buffer. */
	const size_t per_chunk = (size_t)s->world * s->slot;
	unsigned char *p = buf;
	int rc = 0;

	for (size_t at = 0; at < bytes; at += per_chunk) {
		size_t m = bytes - at < per_chunk ? bytes - at : per_chunk;
		uint64_t base = 3 * s->chunk;

		if (s->me == root) {
			rc = before_write(s, w);
			if (rc)
				goto out;
			memcpy(slot(s, 0), p + at, m);
		} else {
			rc = wait_for(s, w, root, base + 1);
			if (rc)
				goto out;
			memcpy(p + at, slot(s, 0), m);
		}
		publish(s, base + 3);
		s->chunk++;
	}
out:
	return rc;
}

int dpt__shm_gather(struct dpt__shm *s, struct dpt__cpu_watch *w,
		    const void *send, void *recv, size_t bytes,
		    const size_t *offsets, int root)
{
	const unsigned char *in = send;
	unsigned char *out = recv;
	const int reader = root < 0 || root == s->me;
	int rc = 0;

	for (size_t at = 0; at < bytes; at += s->slot) {
		size_t m = bytes - at < s->slot ? bytes - at : s->slot;
		uint64_t base = 3 * s->chunk;

		rc = before_write(s, w);
		if (rc)
			goto out;
		if (root != s->me)
			memcpy(slot(s, s->me), in + at, m);
		if (reader) {
			publish(s, base + 1);
			rc = wait_for(s, w, -1, base + 1);
			if (rc)
				goto out;
			for (int j = 0; j < s->world; j++)
				if (j != s->me)
					memcpy(out + offsets[j] + at,
					       slot(s, j), m);
		}
		publish(s, base + 3);
		s->chunk++;
	}
out:
	return rc;
}

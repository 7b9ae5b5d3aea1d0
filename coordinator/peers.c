/*
 * The coordinator's peer table (peers.h): O(1) lookup by routing id and
 * by descriptor, O(1) refresh on traffic, whatever the number of peers.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "assertion.h"
#include "hash.h"
#include "peers.h"

static uint64_t id_hash(const uint8_t *id, size_t len)
{
	return dpt__fnv1a(id, len, DPT_FNV1A_INIT);
}

int dpt__peer_table_init(struct dpt__peer_table *t, size_t expected)
{
	memset(t, 0, sizeof(*t));
	t->nbuckets = 64;
	while (t->nbuckets < expected * 2)
		t->nbuckets *= 2;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	t->lru.newer = t->lru.older = &t->lru;
	return t->buckets ? 0 : DPT_ENOMEM;
}

void dpt__peer_table_release(struct dpt__peer_table *t)
{
	free(t->buckets);
	free(t->by_fd);
	t->buckets = NULL;
	t->by_fd = NULL;
	t->by_fd_len = 0;
}

struct dpt__peer_entry *dpt__peer_table_find(struct dpt__peer_table *t,
					     const uint8_t *id, size_t len)
{
	struct dpt__peer_entry *e =
		t->buckets[id_hash(id, len) & (t->nbuckets - 1)];

	for (; e; e = e->hash_next)
		if (e->id_len == len && memcmp(e->id, id, len) == 0)
			return e;
	return NULL;
}

static int grow_buckets(struct dpt__peer_table *t)
{
	size_t n = t->nbuckets * 2;
	struct dpt__peer_entry **b = calloc(n, sizeof(*b));

	if (!b)
		return DPT_ENOMEM;
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct dpt__peer_entry *e = t->buckets[i], *next;
		for (; e; e = next) {
			size_t k = id_hash(e->id, e->id_len) & (n - 1);
			next = e->hash_next;
			e->hash_next = b[k];
			b[k] = e;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = n;
	return 0;
}

static void lru_unlink(struct dpt__peer_entry *e)
{
	e->older->newer = e->newer;
	e->newer->older = e->older;
}

static void lru_append(struct dpt__peer_table *t, struct dpt__peer_entry *e)
{
	e->newer = &t->lru;
	e->older = t->lru.older;
	t->lru.older->newer = e;
	t->lru.older = e;
}

int dpt__peer_table_add(struct dpt__peer_table *t, struct dpt__peer_entry *e,
			const uint8_t *id, size_t len, int64_t now)
{
	size_t k;

	if (len == 0 || len > DPT_PEER_ID_MAX)
		return DPT_EINVAL;
	/* At most 3/4 full, so that chains stay short. */
	if ((t->count + 1) * 4 > t->nbuckets * 3 && grow_buckets(t) != 0)
		return DPT_ENOMEM;
	memcpy(e->id, id, len);
	e->id_len = (uint8_t)len;
	e->last_heard = now;
	e->fd = -1;
	k = id_hash(id, len) & (t->nbuckets - 1);
	e->hash_next = t->buckets[k];
	t->buckets[k] = e;
	lru_append(t, e);
	t->count++;
	return 0;
}

void dpt__peer_table_remove(struct dpt__peer_table *t,
			    struct dpt__peer_entry *e)
{
	struct dpt__peer_entry **pp =
		&t->buckets[id_hash(e->id, e->id_len) & (t->nbuckets - 1)];

	/* E is in the table (the caller added it and has not removed it):
	 * its chain leads to it before it ends. */
	while (*pp != e) {
		DPT_ASSERT(*pp != NULL);
		pp = &(*pp)->hash_next;
	}
	*pp = e->hash_next;
	lru_unlink(e);
	/* An entry's descriptor was given to set_fd, which grew BY_FD past
	 * it. */
	DPT_ASSERT(e->fd < 0 || (size_t)e->fd < t->by_fd_len);
	if (e->fd >= 0 && t->by_fd[e->fd] == e)
		t->by_fd[e->fd] = NULL;
	DPT_ASSERT(t->count > 0);
	t->count--;
}

void dpt__peer_table_heard(struct dpt__peer_table *t, struct dpt__peer_entry *e,
			   int64_t now)
{
	e->last_heard = now;
	lru_unlink(e);
	lru_append(t, e);
}

void dpt__peer_table_set_fd(struct dpt__peer_table *t,
			    struct dpt__peer_entry *e, int fd)
{
	if (fd < 0 || e->fd == fd)
		return;
	if ((size_t)fd >= t->by_fd_len) {
		size_t n = t->by_fd_len ? t->by_fd_len : 64;
		struct dpt__peer_entry **a;
		while (n <= (size_t)fd)
			n *= 2;
		a = realloc(t->by_fd, n * sizeof(*a));
		if (!a)
			return;
		memset(a + t->by_fd_len, 0, (n - t->by_fd_len) * sizeof(*a));
		t->by_fd = a;
		t->by_fd_len = n;
	}
	if (e->fd >= 0 && t->by_fd[e->fd] == e)
		t->by_fd[e->fd] = NULL;
	if (t->by_fd[fd])
		t->by_fd[fd]->fd = -1;
	t->by_fd[fd] = e;
	e->fd = fd;
}

struct dpt__peer_entry *dpt__peer_table_take_fd(struct dpt__peer_table *t,
						int fd)
{
	struct dpt__peer_entry *e;

	if (fd < 0 || (size_t)fd >= t->by_fd_len || !(e = t->by_fd[fd]))
		return NULL;
	t->by_fd[fd] = NULL;
	e->fd = -1;
	return e;
}

struct dpt__peer_entry *dpt__peer_table_oldest(const struct dpt__peer_table *t)
{
	return t->lru.newer == &t->lru ? NULL : t->lru.newer;
}

struct dpt__peer_entry *dpt__peer_table_newer(const struct dpt__peer_table *t,
					      const struct dpt__peer_entry *e)
{
	return e->newer == &t->lru ? NULL : e->newer;
}

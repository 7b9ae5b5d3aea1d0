/*
 * The coordinator's peer table: who is connected, found by routing
 * identity (a hash table), by connection descriptor (an array), and in
 * the order they were last heard from (a list: the least recently heard
 * first, so that only its head can have expired). It knows nothing of
 * roles, ranks or generations: coordinator/coord.c embeds a struct
 * dpt__peer_entry as the first member of its own peer, and owns it.
 */
#ifndef DPT_COORDINATOR_PEERS_H
#define DPT_COORDINATOR_PEERS_H

#include <stddef.h>
#include <stdint.h>

#define DPT_PEER_ID_MAX 255 /* a ZeroMQ routing id is at most 255 bytes */

struct dpt__peer_entry {
	struct dpt__peer_entry *hash_next;
	struct dpt__peer_entry *older, *newer; /* by last contact */
	int64_t last_heard;
	int fd; /* the descriptor its messages came from, or -1 */
	uint8_t id_len;
	uint8_t id[DPT_PEER_ID_MAX];
};

struct dpt__peer_table {
	struct dpt__peer_entry **buckets;
	size_t nbuckets; /* a power of two */
	size_t count;
	struct dpt__peer_entry lru; /* sentinel of the list by last contact */
	struct dpt__peer_entry **by_fd;
	size_t by_fd_len;
};

/* An empty table sized for about EXPECTED peers (it grows). Returns 0 or
 * DPT_ENOMEM. */
int dpt__peer_table_init(struct dpt__peer_table *t, size_t expected);
/* Frees the table's own memory; the entries stay their owner's (remove
 * them first). */
void dpt__peer_table_release(struct dpt__peer_table *t);

/* The entry of routing id ID (LEN bytes), or NULL. */
struct dpt__peer_entry *dpt__peer_table_find(struct dpt__peer_table *t,
					     const uint8_t *id, size_t len);
/*
 * Add E (the caller's, not in the table) under routing id ID (LEN bytes,
 * 1..DPT_PEER_ID_MAX), heard at NOW, with no descriptor. Returns 0,
 * DPT_EINVAL for a bad length, or DPT_ENOMEM (E is then not added).
 */
int dpt__peer_table_add(struct dpt__peer_table *t, struct dpt__peer_entry *e,
			const uint8_t *id, size_t len, int64_t now);
/* Take E out of the table; it stays the caller's. */
void dpt__peer_table_remove(struct dpt__peer_table *t,
			    struct dpt__peer_entry *e);

/* E was heard from at NOW: it moves to the end of the list. O(1). */
void dpt__peer_table_heard(struct dpt__peer_table *t, struct dpt__peer_entry *e,
			   int64_t now);
/*
 * E's messages come from descriptor FD (-1: unknown, nothing changes). An
 * entry that held FD before lost its connection (the descriptor was
 * closed and reused): it is no longer matched by descriptor. Out of
 * memory, E is left unmatched (the timeout still finds it).
 */
void dpt__peer_table_set_fd(struct dpt__peer_table *t,
			    struct dpt__peer_entry *e, int fd);
/* The connection on FD closed: its entry, now matched by no descriptor,
 * or NULL if no entry had it. */
struct dpt__peer_entry *dpt__peer_table_take_fd(struct dpt__peer_table *t,
						int fd);

/* The least recently heard entry, or NULL when the table is empty. */
struct dpt__peer_entry *dpt__peer_table_oldest(const struct dpt__peer_table *t);
/* The entry heard after E, or NULL. */
struct dpt__peer_entry *dpt__peer_table_newer(const struct dpt__peer_table *t,
					      const struct dpt__peer_entry *e);

#endif

/*
 * The coordinator's event loop (doc/architecture.md, "The coordinator's
 * loop"): one zmq_poll over what every registered source waits on, then
 * each source that is ready, due, or runs every turn, in the order they
 * were added.
 */
#ifndef DPT_COORDINATOR_LOOP_H
#define DPT_COORDINATOR_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#define DPT_LOOP_SOURCES_MAX 12
#define DPT_LOOP_ITEMS_MAX   80

struct dpt__loop_source {
	const char *name;
	/* A source that waits on one socket or descriptor, always: that
	 * (dpt__loop_item), and no prepare. */
	zmq_pollitem_t item;
	/*
	 * Before each poll: the sockets and descriptors to wait on, into
	 * ITEMS (MAX entries free), and how many; *DEADLINE (monotonic ms,
	 * INT64_MAX on entry) lowered when the source wants a turn by then.
	 * NULL: ITEM only.
	 */
	size_t (*prepare)(void *arg, zmq_pollitem_t *items, size_t max,
			  int64_t now, int64_t *deadline);
	/* After the poll: ITEMS as prepared, with their revents (N). */
	void (*ready)(void *arg, const zmq_pollitem_t *items, size_t n,
		      int64_t now);
	void *arg;
	bool every_turn; /* ready() after every poll, ready or not */
};

struct dpt__loop {
	struct dpt__loop_source sources[DPT_LOOP_SOURCES_MAX];
	size_t nsources;
};

/* Append S; sources run in the order they were added. Returns 0
 * or DPT_ETOOBIG. */
int dpt__loop_add(struct dpt__loop *l, struct dpt__loop_source s);

/*
 * Turn until DONE(ARG) is true (asked before each turn). Returns 0, or
 * DPT_ESYS after logging a poll that failed for another reason than a
 * signal.
 */
int dpt__loop_run(struct dpt__loop *l, bool (*done)(void *arg), void *arg);

/* One poll item: a ZeroMQ SOCKET, or a descriptor FD (-1: none) when
 * SOCKET is NULL; EVENTS 0 when there is nothing to wait on. */
static inline zmq_pollitem_t dpt__loop_item(void *socket, int fd, short events)
{
	return (zmq_pollitem_t){
		.socket = socket,
		.fd = socket ? 0 : fd,
		.events = (socket || fd >= 0) ? events : 0,
	};
}

/* Lower *DEADLINE to AT. */
static inline void dpt__loop_deadline(int64_t *deadline, int64_t at)
{
	if (at < *deadline)
		*deadline = at;
}

#endif

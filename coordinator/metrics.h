/*
 * The coordinator's optional metrics endpoint (doc/protocol.md, "Metrics"):
 * the step's state in Prometheus' text exposition format (version 0.0.4),
 * served over plain HTTP to GET /metrics from the coordinator's own event
 * loop. Nothing here blocks: every socket is non-blocking, a request is
 * read into a small bounded buffer, connections are few and short-lived
 * and a slow client is dropped after METRICS_CLIENT_TIMEOUT_MS.
 */
#ifndef DPT_COORDINATOR_METRICS_H
#define DPT_COORDINATOR_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "loop.h"

#include "buf.h"
#include "wire.h"

/* At most this many scrapes are served at once; more wait in the listen
 * queue. */
#define DPT_METRICS_MAX_CLIENTS 8
/* A client that has not sent its request, or read the answer, by then is
 * dropped. */
#define DPT_METRICS_CLIENT_TIMEOUT_MS 2000
/* The longest request (request line and headers) read. */
#define DPT_METRICS_REQUEST_MAX 2048
/* The largest answer: the page is about 3 KiB. */
#define DPT_METRICS_PAGE_MAX 16384

/* The counters the event loop keeps for the page. */
struct dpt__metrics_counters {
	uint64_t saves;		  /* "save" events: checkpoints written */
	uint64_t saved_bytes;	  /* their bytes, as the library reported */
	uint64_t commits;	  /* "commit" events */
	uint64_t evictions;	  /* "evict" events */
	uint64_t generations;	  /* "generation" events: formed */
	uint64_t status_answered; /* STATUS requests answered */
	uint64_t scrapes;	  /* GET /metrics answered, this one included */
};

/* One snapshot of what the page shows. ST is what a STATUS_REPLY would
 * carry (dpt__coord_status); the strings are borrowed. */
struct dpt__metrics {
	const struct dpt__msg_status *st;
	uint32_t generation; /* being formed or live */
	uint32_t joined;     /* workers joined to it */
	int64_t stop_at;     /* Unix s of the walltime stop, 0: none */
	uint64_t now_ms;     /* Unix ms */
	struct dpt__metrics_counters counters;
};

/*
 * Render M into OUT (appended) as Prometheus text: every family with its
 * HELP and TYPE lines, every sample labelled job="ID" (empty without a
 * job) and run="NAME" (the last component of the run's URI; empty while
 * the library has not reported it), label values escaped as the format
 * requires. A fact not known yet (no committed step, no end time) has no
 * family at all rather than a made-up value. Returns 0, or DPT_ETOOBIG /
 * DPT_ENOMEM from the buffer.
 */
int dpt__metrics_render(const struct dpt__metrics *m, struct dpt__buf *out);

/* Writes the page into OUT (reset by the caller); returns 0 or an error. */
typedef int dpt__metrics_page_fn(void *arg, struct dpt__buf *out);

struct dpt__metrics_server;

/*
 * Listen on HOST (NULL or "*": every address) and PORT (0: any free one)
 * for HTTP; *BOUND receives the port. Returns 0 and *OUT (the caller's,
 * freed with dpt__metrics_server_destroy), or DPT_ESYS after logging why.
 */
int dpt__metrics_server_new(struct dpt__metrics_server **out, const char *host,
			    long port, int *bound, dpt__metrics_page_fn *page,
			    void *arg);
/*
 * The coordinator's metrics endpoint: dpt__metrics_server_new on the host
 * of BIND (the coordinator's --bind endpoint) and PORT, and the URL of
 * ENDPOINT's host logged. A failure is logged and leaves *OUT NULL: the
 * step goes on without metrics.
 */
void dpt__metrics_start(struct dpt__metrics_server **out, const char *bind,
			const char *endpoint, long port, int *bound,
			dpt__metrics_page_fn *page, void *arg);
/* Closes every socket and frees *S; NULL is fine; *S becomes NULL. */
void dpt__metrics_server_destroy(struct dpt__metrics_server **s);

/*
 * The descriptors to poll and the poll(2) events for each, into FDS and
 * EVENTS (MAX entries at least DPT_METRICS_MAX_CLIENTS + 1). The listening
 * socket is left out while every client slot is taken. Returns how many.
 */
size_t dpt__metrics_server_fds(const struct dpt__metrics_server *s, int *fds,
			       short *events, size_t max);
/*
 * Do what can be done without blocking: accept, read requests, answer
 * complete ones (the page is rendered then), write, close finished and
 * timed-out clients. NOW is a monotonic time in ms. Call it when one of
 * the descriptors is ready, and at the deadline below.
 */
void dpt__metrics_server_serve(struct dpt__metrics_server *s, int64_t now);
/* The earliest client timeout (monotonic ms), or 0 with no client. */
int64_t dpt__metrics_server_deadline(const struct dpt__metrics_server *s);

/* The coordinator loop's source that serves M (coordinator/loop.h). */
struct dpt__loop_source dpt__metrics_source(struct dpt__metrics_server *m);

#endif

/*
 * The coordinator's ZAP handler (RFC 27): which CURVE clients may connect.
 */
#ifndef DPT_COORDINATOR_ZAP_H
#define DPT_COORDINATOR_ZAP_H

#include <stdint.h>

#include "loop.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"

/* The user ids of accepted connections (6 bytes each). */
#define DPT_ZAP_USER_WORKER "worker"
#define DPT_ZAP_USER_STATUS "status"

/*
 * Answer the ZAP requests waiting on ZAP (a REP socket bound to
 * ZAP_ENDPOINT), 64 at most: accept the client keys WORKER_KEY and
 * STATUS_KEY (32 bytes each, derived from the step secret; STATUS_KEY may
 * be NULL) with the user ids above, refuse anything else, logging
 * refusals at most once a second (NOW, in ms).
 */
void dpt__zap_serve(void *zap, const uint8_t *worker_key,
		    const uint8_t *status_key, int64_t now);

/* The handler: its REP socket and the client keys it accepts (the Z85
 * keys decoded; a zero STATUS_KEY accepts no status client). */
struct dpt__zap {
	void *sock;
	uint8_t worker_key[32];
	uint8_t status_key[32];
};

/* The loop's source that serves Z (the caller's, alive while the loop
 * runs). */
struct dpt__loop_source dpt__zap_source(struct dpt__zap *z);

#endif

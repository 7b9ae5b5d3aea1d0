/*
 * The coordinator's ZAP handler (RFC 27): which CURVE clients may connect.
 */
#ifndef DPT_COORDINATOR_ZAP_H
#define DPT_COORDINATOR_ZAP_H

#include <stdint.h>

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"

/*
 * Answer the ZAP requests waiting on ZAP (a REP socket bound to
 * ZAP_ENDPOINT), 64 at most: accept the client key WORKER_KEY (32 bytes,
 * derived from the step secret), refuse anything else, logging refusals
 * at most once a second (NOW, in ms).
 */
void dpt__zap_serve(void *zap, const uint8_t *worker_key, int64_t now);

#endif

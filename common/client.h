/*
 * One request, one reply: the coordinator client of short-lived callers
 * that are not members of a generation (the SPANK plugin's task-exit
 * report and its MASTER_ADDR/MASTER_PORT exchange, libdptrain's reports to
 * the requeue guard). doc/protocol.md has the messages; members use
 * worker/agent.c instead.
 */
#ifndef DPT_COMMON_CLIENT_H
#define DPT_COMMON_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* The largest reply a request of this client takes: STATUS_REPLY, the
 * largest, is at most 16 + 87 + 3 x 255 = 868 bytes (doc/protocol.md). */
#define DPT_CLIENT_MSG_MAX DPT_WIRE_IN_MAX

/*
 * Bound what a peer can make a client socket SOCK (a DEALER that connects)
 * do: a frame announcing more than MAX_MSG bytes drops the connection
 * before anything is allocated for it (ZMQ_MAXMSGSIZE; without it libzmq
 * allocates whatever size the header announces, gigabytes included), and a
 * TCP connect gives up after CONNECT_MS (ZMQ_CONNECT_TIMEOUT, > 0; ZeroMQ
 * then retries as its reconnect interval says). Every socket that connects
 * to a coordinator sets both, before zmq_connect. Returns 0, or DPT_EINVAL
 * (bad argument) or DPT_ESYS (errno set).
 */
int dpt__client_limit(void *sock, int64_t max_msg, int connect_ms);

/*
 * Report to the coordinator at ENDPOINT that task TASK_ID exited with
 * STATUS (a wait(2) status), authenticated with SECRET_HEX. Blocks at most
 * TIMEOUT_MS for the coordinator's ACK. Returns 0, DPT_ETIMEDOUT,
 * DPT_EINVAL, DPT_EPROTO (a reply of another type, released), or another
 * dpt_error. Meant for the SPANK plugin's
 * slurm_spank_task_exit: it never aborts and owns nothing on return.
 */
int dpt__client_report_exit(const char *endpoint, const char *secret_hex,
			    uint32_t task_id, int32_t status, int timeout_ms);

/*
 * The step's key-value store (doc/protocol.md), like the exit report. kv_put
 * stores VALUE under KEY: 0 once the coordinator acknowledged it, DPT_EBUSY
 * when KEY already holds another value. kv_get waits up to TIMEOUT_MS for KEY
 * to be stored and copies its value into VALUE (SIZE bytes): 0, DPT_ETIMEDOUT,
 * DPT_ETOOBIG, or another dpt_error.
 */
int dpt__client_kv_put(const char *endpoint, const char *secret_hex,
		       const char *key, const char *value, int timeout_ms);
int dpt__client_kv_get(const char *endpoint, const char *secret_hex,
		       const char *key, char *value, size_t size,
		       int timeout_ms);

/*
 * Ask the coordinator at ENDPOINT for its STATUS (doc/protocol.md,
 * "Status requests"), authenticated with the status key pair (Z85,
 * 40 characters each), not the step secret. Waits up to TIMEOUT_MS.
 * Returns 0 with the reply in *OUT, DPT_ETIMEDOUT (no coordinator, wrong
 * keys, or one that predates STATUS), DPT_EBUSY (too many requests), or
 * another dpt_error.
 */
struct dpt__msg_status;
int dpt__client_status(const char *endpoint, const char *coord_public,
		       const char *status_public, const char *status_secret,
		       int timeout_ms, struct dpt__msg_status *out);

#endif

/*
 * libdptrain's internal API for its other parts (ckpt/): what they need of
 * the coordinator, reached through the context's connection. A barrier
 * that also counts failures (VOTE and VOTE_DONE, doc/protocol.md: the
 * checkpoint commit's decision), a poll for what the coordinator asks of
 * every rank, and the reports of what the run did. Not installed; the
 * checkpoint code reaches the coordinator only through these.
 */
#ifndef DPT_WORKER_INTERNAL_H
#define DPT_WORKER_INTERNAL_H

#include <stdint.h>

#include <dptrain/dptrain.h>

/*
 * Every member calls it with CODE (0, or the dpt_error that failed it);
 * returns once all have, with *FAILED the number of members whose code was
 * not 0 and *FIRST (FIRST may be NULL) the code of the lowest such rank (0
 * when none). Returns 0, or the error that broke the barrier
 * (DPT_EPEERLOST when a member was lost before voting, DPT_ECOORDLOST,
 * ...), like dpt_barrier.
 */
int dpt__vote(struct dpt_ctx *ctx, int code, uint32_t *failed, int *first);

/*
 * A vote of 0 with flags MINE (0 or DPT_VOTE_BUSY; DPT_VOTE_STOP is added
 * once dpt_request_stop was called) that asks the coordinator: *FLAGS receives
 * the VOTE_DONE flags (DPT_VOTE_STOP, DPT_VOTE_SAVE, DPT_VOTE_BUSY;
 * common/wire.h), the same on every member. Collective. Returns as dpt_barrier.
 */
int dpt__poll(struct dpt_ctx *ctx, uint32_t mine, uint32_t *flags);

/*
 * Put KEY=VALUE in the step's key-value store (DPT_KV_RESUMED,
 * DPT_KV_COMMITTED: what the run did, read by the coordinator's requeue
 * guard, doc/walltime.md). Not collective; rank 0 reports. A failure is
 * logged as a warning, never returned: training does not depend on it.
 */
void dpt__report(struct dpt_ctx *ctx, const char *key, const char *value);

/* worker/logger.c: how often rank 0's logged scalars are sent at most. */
#define DPT__LOG_EVERY_MS 2000
/* Ask the logger to send what is buffered now (at a commit); does not
 * wait. Accepts a NULL context or one that never logged. */
void dpt__log_flush(struct dpt_ctx *ctx);
/* Send what is buffered, stop the logger's thread and free it (from
 * dpt_finalize); waits for the sends (each at most 2 s). */
void dpt__log_stop(struct dpt_ctx *ctx);

#endif

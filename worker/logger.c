/*
 * dpt_log and dpt_set_total_steps (<dptrain/dptrain.h>): rank 0's logged
 * scalars, buffered here and sent to the coordinator in batches by a
 * thread of their own (doc/checkpoint-format.md, "Events"; doc/protocol.md,
 * "Key-value store"). A call appends one record under a lock and returns:
 * no message, no system call. The thread sends what is buffered every
 * DPT__LOG_EVERY_MS, at each commit (dpt__log_flush) and at dpt_finalize,
 * as whole records packed into DPT_KV_LOG puts over one connection.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dptrain/dptrain.h>
#include <dptrain/error.h>

#include "buf.h"
#include "client.h"
#include "ctx.h"
#include "internal.h"
#include "log.h"
#include "scalars.h"
#include "wire.h"

/* Records kept while the coordinator does not take them: past this the
 * newest are dropped (and counted), never the training slowed. */
#define PENDING_MAX    (4u << 20)
#define PUT_TIMEOUT_MS 2000

struct dpt__logger {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	/* Under LOCK. */
	struct dpt__buf pending; /* records not sent yet */
	bool flush, quit;
	uint64_t dropped;
	/* Copied at creation: the thread never touches the context. */
	char endpoint[ENDPOINT_MAX];
	char secret_hex[DPT_SECRET_HEX_LEN + 1];
	bool warned;
};

/* Send TEXT (whole records) as DPT_KV_LOG puts. Returns 0 or the error
 * of the first put that failed (what was not sent is lost: a log, not a
 * checkpoint). */
static int send_records(struct dpt__logger *lg, const char *text, size_t len)
{
	char value[DPT_KV_VALUE_MAX + 1];
	size_t off = 0;
	int rc = 0;

	while (!rc && dpt__scalars_pack(text, len, &off, value, sizeof(value)))
		rc = dpt__client_kv_put(lg->endpoint, lg->secret_hex,
					DPT_KV_LOG, value, PUT_TIMEOUT_MS);
	return rc;
}

static void *logger_main(void *arg)
{
	struct dpt__logger *lg = arg;

	pthread_mutex_lock(&lg->lock);
	for (;;) {
		struct dpt__buf batch;
		struct timespec until;
		int rc;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += DPT__LOG_EVERY_MS / 1000;
		while (!lg->flush && !lg->quit)
			if (pthread_cond_timedwait(&lg->wake, &lg->lock,
						   &until) != 0)
				break;
		lg->flush = false;
		batch = lg->pending;
		dpt__buf_init(&lg->pending, PENDING_MAX);
		pthread_mutex_unlock(&lg->lock);

		rc = batch.len ? send_records(lg, batch.data, batch.len) : 0;
		if (rc && !lg->warned) {
			lg->warned = true;
			dpt__warn("cannot send the logged scalars to the "
				  "coordinator: %s (training goes on; these "
				  "values are missing from the run's events)",
				  dpt_strerror(rc));
		}
		dpt__buf_release(&batch);

		pthread_mutex_lock(&lg->lock);
		if (lg->quit && lg->pending.len == 0)
			break;
	}
	pthread_mutex_unlock(&lg->lock);
	return NULL;
}

/* The logger of CTX, started on first use; NULL when there is no
 * coordinator to send to or the thread cannot start (logged once). */
static struct dpt__logger *logger_of(struct dpt_ctx *ctx)
{
	struct dpt__logger *lg = ctx->logger;

	if (lg || ctx->logger_failed)
		return lg;
	if (!ctx->secret_hex[0]) {
		ctx->logger_failed = true;
		return NULL;
	}
	lg = calloc(1, sizeof(*lg));
	if (!lg) {
		ctx->logger_failed = true;
		return NULL;
	}
	pthread_mutex_init(&lg->lock, NULL);
	pthread_cond_init(&lg->wake, NULL);
	dpt__buf_init(&lg->pending, PENDING_MAX);
	snprintf(lg->endpoint, sizeof(lg->endpoint), "%s", ctx->endpoint);
	snprintf(lg->secret_hex, sizeof(lg->secret_hex), "%s", ctx->secret_hex);
	if (pthread_create(&lg->thread, NULL, logger_main, lg) != 0) {
		dpt__warn("cannot start the thread that sends logged scalars: "
			  "they are not recorded");
		pthread_cond_destroy(&lg->wake);
		pthread_mutex_destroy(&lg->lock);
		explicit_bzero(lg->secret_hex, sizeof(lg->secret_hex));
		free(lg);
		ctx->logger_failed = true;
		return NULL;
	}
	ctx->logger = lg;
	return lg;
}

int dpt_log(struct dpt_ctx *ctx, uint64_t step, size_t n,
	    const char *const names[], const double values[])
{
	struct dpt__logger *lg;
	struct dpt__buf probe;
	int rc;

	if (!ctx)
		return DPT_EINVAL;
	/* The same checks on every rank: a program that is wrong is told
	 * on each, not only where rank 0 happens to be. */
	dpt__buf_init(&probe, DPT_KV_VALUE_MAX + 2);
	rc = dpt__scalars_record(&probe, step, n, names, values);
	if (rc) {
		dpt__buf_release(&probe);
		return rc;
	}
	if (ctx->rank != 0 || !(lg = logger_of(ctx))) {
		dpt__buf_release(&probe);
		return 0;
	}
	pthread_mutex_lock(&lg->lock);
	if (dpt__buf_append(&lg->pending, probe.data, probe.len))
		lg->dropped++;
	pthread_mutex_unlock(&lg->lock);
	dpt__buf_release(&probe);
	return 0;
}

/* Rank 0 reports KEY = VALUE, unless *SENT is VALUE already. */
static int declare(struct dpt_ctx *ctx, const char *key, uint64_t value,
		   uint64_t *sent)
{
	char v[32];

	if (value == 0)
		return DPT_EINVAL;
	if (ctx->rank != 0 || *sent == value)
		return 0;
	*sent = value;
	snprintf(v, sizeof(v), "%" PRIu64, value);
	dpt__report(ctx, key, v);
	return 0;
}

int dpt_set_total_steps(struct dpt_ctx *ctx, uint64_t total)
{
	return ctx ? declare(ctx, DPT_KV_TOTAL_STEPS, total,
			     &ctx->total_steps_sent)
		   : DPT_EINVAL;
}

int dpt_set_global_batch(struct dpt_ctx *ctx, uint64_t batch)
{
	return ctx ? declare(ctx, DPT_KV_GLOBAL_BATCH, batch,
			     &ctx->global_batch_sent)
		   : DPT_EINVAL;
}

void dpt__log_flush(struct dpt_ctx *ctx)
{
	struct dpt__logger *lg = ctx ? ctx->logger : NULL;

	if (!lg)
		return;
	pthread_mutex_lock(&lg->lock);
	lg->flush = true;
	pthread_cond_signal(&lg->wake);
	pthread_mutex_unlock(&lg->lock);
}

void dpt__log_stop(struct dpt_ctx *ctx)
{
	struct dpt__logger *lg = ctx->logger;

	if (!lg)
		return;
	/* The thread sends what is left, once, then exits. */
	pthread_mutex_lock(&lg->lock);
	lg->quit = true;
	pthread_cond_signal(&lg->wake);
	pthread_mutex_unlock(&lg->lock);
	pthread_join(lg->thread, NULL);
	if (lg->dropped)
		dpt__warn("%" PRIu64 " logged record(s) were dropped: more "
			  "than %u bytes waited for the coordinator",
			  lg->dropped, PENDING_MAX);
	dpt__buf_release(&lg->pending);
	pthread_cond_destroy(&lg->wake);
	pthread_mutex_destroy(&lg->lock);
	explicit_bzero(lg->secret_hex, sizeof(lg->secret_hex));
	free(lg);
	ctx->logger = NULL;
}

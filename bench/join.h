/*
 * How a benchmark's worker process joins the coordinator it started: task
 * TASK of node 0, dptrain's CPU backend (bench/ckpt, bench/rendezvous).
 */
#ifndef DPT_BENCH_JOIN_H
#define DPT_BENCH_JOIN_H

#include <dptrain/dptrain.h>

/* dpt_init's result: 0 and *CTX, or the error. */
static inline int bench_join(struct dpt_ctx **ctx, const char *endpoint,
			     const char *secret, int task)
{
	struct dpt_init_opts o;

	dpt_init_opts_default(&o);
	o.coordinator = endpoint;
	o.secret = secret;
	o.backend = "cpu";
	o.node = 0;
	o.local_rank = task;
	o.task_id = task;
	return dpt_init(ctx, &o);
}

#endif

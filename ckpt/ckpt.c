/*
 * libdptrain's checkpoint API (include/dptrain/ckpt.h): the checkpoint
 * object and its options from the environment, registration, the
 * periodic decision (dpt_ckpt_poll, dpt_ckpt_step: when a save is due),
 * and the public entry points with their struct sizes. Of the rest, the
 * save is ckpt/save.c's, the commit ckpt/commit.c's and the load
 * ckpt/load.c's; what they share is ckpt/ckpt_priv.h.
 * The format and the commit protocol are doc/checkpoint-format.md's.
 * The copies of device tensors are ckpt/cuda.c's (built with CUDA only):
 * without CUDA, tensor_device() refuses device tensors, the only place
 * that knows.
 */
#include "config.h"

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>

#include "ckpt_int.h"
#include "ckpt_priv.h"
#include "clock.h"
#include "log.h"
#include "parse.h"
#include "wire.h"
#include "worker/abi.h"
#include "worker/internal.h"
#include "setting_names.h"

#define DEFAULT_KEEP_LAST 3

static void opts_default(struct dpt_ckpt_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
}

/* DPTRAIN_PRIVATE (srun --dp-private, the site's private=): a private run,
 * its directories 0700 and files 0600 whatever the umask. */
static int private_from_env(bool *out)
{
	const char *v = getenv(DPT_ENV(PRIVATE));

	*out = false;
	if (!v || !*v)
		return 0;
	if (dpt__parse_bool(v, out)) {
		dpt__error("DPTRAIN_PRIVATE='%s': expected 1 or 0 (srun "
			   "--dp-private=yes|no)",
			   v);
		return DPT_ECONFIG;
	}
	return 0;
}

/* What the step's environment says of the checkpoints (srun --dp-keep,
 * --dp-ckpt-every, the site's MTBF and shortest interval, --dp-private),
 * OPTS's keep_last first. */
struct env_policy {
	int keep;
	long every_steps, mtbf, min_interval;
	bool auto_every, private_run;
};

static int policy_from_env(const struct dpt_ckpt_opts *opts,
			   struct env_policy *p)
{
	const char *v;
	long secs;

	*p = (struct env_policy){.mtbf = DPT_CKPT_NODE_MTBF_S};
	p->keep = opts->keep_last;
	if (p->keep == 0 && (v = dpt__opt_or_env(NULL, DPT_ENV(KEEP)))) {
		long k;
		if (dpt__parse_long(v, 1, INT_MAX, &k)) {
			dpt__error("DPTRAIN_KEEP='%s': expected the number of "
				   "committed steps to keep, at least 1 (srun "
				   "--dp-keep=N)",
				   v);
			return DPT_ECONFIG;
		}
		p->keep = (int)k;
	}
	if ((v = dpt__opt_or_env(NULL, DPT_ENV(CKPT_EVERY))) &&
	    dpt__parse_ckpt_every(v, &secs, &p->every_steps)) {
		dpt__error("DPTRAIN_CKPT_EVERY='%s': expected auto, a duration "
			   "or Nsteps (srun --dp-ckpt-every)",
			   v);
		return DPT_ECONFIG;
	}
	p->auto_every = v && strcmp(v, "auto") == 0;
	if (p->auto_every && (v = dpt__opt_or_env(NULL, DPT_ENV(MTBF))) &&
	    dpt__parse_long(v, 1, LONG_MAX, &p->mtbf)) {
		dpt__error("DPTRAIN_MTBF='%s': expected the job's mean time "
			   "between failures in seconds, at least 1 (the "
			   "site's mtbf= in dptrain.conf)",
			   v);
		return DPT_ECONFIG;
	}
	if (p->auto_every &&
	    (v = dpt__opt_or_env(NULL, DPT_ENV(MIN_CKPT_INTERVAL))) &&
	    dpt__parse_long(v, 0, LONG_MAX, &p->min_interval)) {
		dpt__error("DPTRAIN_MIN_CKPT_INTERVAL='%s': expected seconds "
			   "(the site's min_ckpt_interval= in dptrain.conf)",
			   v);
		return DPT_ECONFIG;
	}
	return private_from_env(&p->private_run) ? DPT_ECONFIG : 0;
}

static int ckpt_new(struct dpt_ckpt **out, struct dpt_ctx *ctx,
		    const struct dpt_ckpt_opts *opts)
{
	struct dpt_ckpt_opts def;
	struct dpt__storage_opts so;
	const char *uri, *run, *buffered;
	struct env_policy pol;
	struct dpt_ckpt *ck = NULL;
	char full[4096];
	int rc, n;

	*out = NULL;
	if (!opts) {
		opts_default(&def);
		opts = &def;
	}
	uri = dpt__opt_or_env(opts->uri, DPT_ENV(CKPT_URI));
	run = dpt__opt_or_env(opts->run, DPT_ENV(RUN));
	if (!uri) {
		dpt__error("no checkpoint URI: set DPTRAIN_CKPT_URI (or "
			   "srun --dp-ckpt=URI) to file:///path or "
			   "s3://bucket/prefix");
		return DPT_ECONFIG;
	}
	/* "." and ".." would name the root or its parent: the run's
	 * checkpoints would leave the directory the site allowed. */
	if (run && (!strcmp(run, ".") || !strcmp(run, ".."))) {
		dpt__error("run name '%s' names a directory, not a run: give "
			   "the run a name (srun --dp-train=NAME, DPTRAIN_RUN)",
			   run);
		return DPT_EINVAL;
	}
	if (run && (dpt__storage_key_check(run, false) || strchr(run, '/'))) {
		dpt__error("run name '%s' must be one component of "
			   "[A-Za-z0-9._~-]",
			   run);
		return DPT_EINVAL;
	}
	if (opts->keep_last < 0 ||
	    (opts->block_size && (opts->block_size < 4096 ||
				  opts->block_size > DPT__CKPT_READ_MAX))) {
		dpt__error("checkpoint options: keep_last must be >= 0 and "
			   "block_size from 4096 to %u bytes",
			   DPT__CKPT_READ_MAX);
		return DPT_EINVAL;
	}
	rc = policy_from_env(opts, &pol);
	if (rc)
		return rc;
	n = snprintf(full, sizeof(full), "%s%s%s", uri,
		     run && uri[strlen(uri) - 1] != '/' ? "/" : "",
		     run ? run : "");
	if (n < 0 || (size_t)n >= sizeof(full)) {
		dpt__error("checkpoint URI '%s' is too long", uri);
		return DPT_EINVAL;
	}
	ck = calloc(1, sizeof(*ck));
	if (!ck)
		return DPT_ENOMEM;
	pthread_mutex_init(&ck->mu, NULL);
	pthread_cond_init(&ck->cv, NULL);
	ck->ctx = ctx;
	ck->device = -1;
	ck->committed = -1;
	ck->cuda_stream = opts->cuda_stream;
	ck->keep_last = pol.keep ? pol.keep : DEFAULT_KEEP_LAST;
	ck->every_steps = (uint64_t)pol.every_steps;
	ck->auto_every = pol.auto_every;
	ck->mtbf_s = (double)pol.mtbf;
	ck->min_s = (double)pol.min_interval;
	ck->last_save_ns = dpt__now_ns();
	ck->keep_every = opts->keep_every;
	ck->busy = opts->busy;
	ck->block =
		opts->block_size ? opts->block_size : DPT__CKPT_DEFAULT_BLOCK;
	dpt__storage_opts_init(&so);
	so.part_size = opts->part_size;
	so.max_inflight = opts->max_inflight;
	buffered = getenv("DPTRAIN_CKPT_BUFFERED");
	so.direct_io = !(opts->buffered_io ||
			 (buffered && strcmp(buffered, "1") == 0));
	so.private_mode = pol.private_run;
	ck->so = so;
	rc = dpt__storage_open(full, &so, &ck->st);
	if (rc) {
		pthread_cond_destroy(&ck->cv);
		pthread_mutex_destroy(&ck->mu);
		free(ck);
		return rc;
	}
	/* Where the coordinator writes the run's events
	 * (doc/checkpoint-format.md, "Events"). */
	if (ctx && dpt_rank(ctx) == 0)
		dpt__report(ctx, DPT_KV_RUN, dpt__storage_uri(ck->st));
	*out = ck;
	return 0;
}

int dpt_ckpt_set_cuda_stream(struct dpt_ckpt *ck, void *stream)
{
	if (!ck)
		return DPT_EINVAL;
	ck->cuda_stream = stream;
	return 0;
}

void dpt_ckpt_destroy(struct dpt_ckpt **ckp)
{
	struct dpt_ckpt *ck = ckp ? *ckp : NULL;

	if (!ck)
		return;
	dpt__ckpt_join_writer(ck);
	dpt__ckpt_stop_writer(ck);
	dpt__ckpt_join_retention(ck);
	if (ck->pending)
		dpt__warn("checkpoint of step %" PRIu64 " destroyed before "
			  "dpt_ckpt_wait: it is not committed",
			  ck->frag.step);
	ck->pending = false;
	dpt_ckpt_clear(ck);
	dpt__manifest_release(&ck->frag);
	dpt__manifest_release(&ck->loaded);
	dpt__manifest_release(&ck->inspected);
	free(ck->entries);
	dpt__ckpt_free_snapshot(ck);
	dpt__storage_destroy(&ck->st);
	dpt__storage_destroy(&ck->gc_st);
	pthread_cond_destroy(&ck->cv);
	pthread_mutex_destroy(&ck->mu);
	free(ck);
	*ckp = NULL;
}

/* The CUDA device of the device tensor T, or why it is refused. */
static int tensor_device(const struct dpt_ckpt *ck,
			 const struct dpt_ckpt_tensor *t, int *device)
{
#ifdef HAVE_CUDA
	int rc = dpt__cuda_device_of(t->name, t->data, device);

	if (!rc && ck->device >= 0 && *device != ck->device) {
		dpt__error("checkpoint tensor '%s' is on cuda device %d, the "
			   "device tensors registered before on device %d: "
			   "one checkpoint object holds the tensors of one "
			   "device",
			   t->name, *device, ck->device);
		rc = DPT_EINVAL;
	}
	return rc;
#else
	(void)ck;
	(void)device;
	dpt__error("checkpoint tensor '%s' is in device memory, but this "
		   "libdptrain is built without CUDA: register a host copy "
		   "(.memory = DPT_CKPT_HOST), or use a libdptrain configured "
		   "--with-cuda",
		   t->name);
	return DPT_ENOTSUP;
#endif
}

static int ckpt_register(struct dpt_ckpt *ck, const struct dpt_ckpt_tensor *t)
{
	struct dpt__ckpt_reg *r, *regs;
	int device = -1, rc;

	if (ck->pending)
		return DPT_EBUSY;
	if (!t->name || !*t->name || dpt__dtype_name(t->dtype) == NULL ||
	    t->ndim < 0 || t->ndim > DPT__CKPT_MAXDIM ||
	    (t->ndim > 0 && !t->shape) || (!t->offset != !t->count) ||
	    (t->kind != DPT_CKPT_REPLICATED && t->kind != DPT_CKPT_SHARDED) ||
	    (t->memory != DPT_CKPT_HOST && t->memory != DPT_CKPT_DEVICE)) {
		dpt__error("checkpoint tensor '%s': bad name, dtype, kind, "
			   "dimensions, box or memory",
			   t->name ? t->name : "");
		return DPT_EINVAL;
	}
	if (t->kind == DPT_CKPT_REPLICATED && t->offset) {
		for (int d = 0; d < t->ndim; d++)
			if (t->offset[d] != 0 || t->count[d] != t->shape[d]) {
				dpt__error(
					"checkpoint tensor '%s' is replicated: "
					"its box must be the whole tensor",
					t->name);
				return DPT_EINVAL;
			}
	}
	for (size_t i = 0; i < ck->nregs; i++)
		if (strcmp(ck->regs[i].name, t->name) == 0) {
			dpt__error("checkpoint tensor '%s' is registered twice",
				   t->name);
			return DPT_EINVAL;
		}
	if (t->memory == DPT_CKPT_DEVICE) {
		rc = tensor_device(ck, t, &device);
		if (rc)
			return rc;
	}
	regs = realloc(ck->regs, (ck->nregs + 1) * sizeof(*regs));
	if (!regs)
		return DPT_ENOMEM;
	ck->regs = regs;
	r = &regs[ck->nregs];
	memset(r, 0, sizeof(*r));
	r->name = strdup(t->name);
	if (!r->name)
		return DPT_ENOMEM;
	r->dtype = t->dtype;
	r->kind = t->kind;
	r->ndim = t->ndim;
	r->local.ndim = t->ndim;
	for (int d = 0; d < t->ndim; d++) {
		r->shape[d] = t->shape[d];
		r->local.off[d] = t->offset ? t->offset[d] : 0;
		r->local.len[d] = t->count ? t->count[d] : t->shape[d];
		if (r->local.off[d] > r->shape[d] ||
		    r->local.len[d] > r->shape[d] - r->local.off[d]) {
			dpt__error(
				"checkpoint tensor '%s': its box lies outside "
				"its shape in dimension %d",
				t->name, d);
			free(r->name);
			return DPT_EINVAL;
		}
	}
	if (!t->data && dpt__box_volume(&r->local) > 0) {
		dpt__error("checkpoint tensor '%s' has no data", t->name);
		free(r->name);
		return DPT_EINVAL;
	}
	r->data = t->data;
	r->device = device;
	if (device >= 0)
		ck->device = device;
	ck->nregs++;
	return 0;
}

int dpt_ckpt_clear(struct dpt_ckpt *ck)
{
	if (ck->pending)
		return DPT_EBUSY;
	for (size_t i = 0; i < ck->nregs; i++)
		free(ck->regs[i].name);
	free(ck->regs);
	ck->regs = NULL;
	ck->nregs = 0;
	ck->device = -1;
	return 0;
}

/* ------------------------------------------------------------ periodic */

/* Rank 0 under --dp-ckpt-every=auto, no save pending: whether the auto
 * interval has passed since the last save started. Says so in the log:
 * the interval and what it was computed from. */
static bool auto_save_due(struct dpt_ckpt *ck)
{
	double since = (double)(dpt__now_ns() - ck->last_save_ns) / 1e9;
	double every =
		dpt__ckpt_auto_interval(ck->cost_s, ck->mtbf_s, ck->min_s);

	if (since < every)
		return false;
	if (ck->cost_s > 0)
		dpt__info("auto checkpoint due: %.2f s since the last save, "
			  "interval %.2f s (save cost %.3f s, MTBF %.0f s)",
			  since, every, ck->cost_s, ck->mtbf_s);
	else
		dpt__info("auto checkpoint due: %.2f s since the start, "
			  "interval %.2f s (no save measured yet, MTBF %.0f s)",
			  since, every, ck->mtbf_s);
	return true;
}

int dpt_ckpt_poll(struct dpt_ckpt *ck, uint64_t step, unsigned *due)
{
	uint32_t flags, mine;
	bool busy;
	int rc;

	if (!due)
		return DPT_EINVAL;
	*due = 0;
	if (!ck)
		return DPT_EINVAL;
	/* A save in flight is committed as soon as every rank's shard is
	 * written (no rank then waits in dpt_ckpt_wait), not at the next save:
	 * each rank says whether its writer is still at work. */
	pthread_mutex_lock(&ck->mu);
	busy = ck->pending && ck->work;
	pthread_mutex_unlock(&ck->mu);
	mine = busy ? DPT_VOTE_BUSY : 0;
	/* One clock decides, rank 0's, and the coordinator hands its
	 * request to every rank in the answer to this same vote. */
	if (ck->auto_every && ck->ctx && !ck->pending &&
	    dpt_rank(ck->ctx) == 0 && auto_save_due(ck))
		mine |= DPT_VOTE_SAVE;
	rc = dpt__poll(ck->ctx, mine, &flags);
	if (rc)
		return rc;
	/* The same decisions on every rank: the flags come from one vote,
	 * every rank is at the same step and has the same save pending. A
	 * failed commit does not keep the next save or the stop from
	 * happening: the caller still learns what is due. */
	if ((flags & (DPT_VOTE_SAVE | DPT_VOTE_STOP)) ||
	    (ck->every_steps && step % ck->every_steps == 0))
		*due |= DPT_CKPT_DUE_SAVE;
	if (flags & DPT_VOTE_STOP)
		*due |= DPT_CKPT_DUE_STOP;
	/* The save in flight is settled once every writer is done, or now
	 * when a save is due, which would wait for it anyway (BUSY_WAIT):
	 * here, its failure is one of a periodic save, which training
	 * survives, and not the error of the save that follows. */
	if (ck->pending &&
	    (!(flags & DPT_VOTE_BUSY) ||
	     ((*due & DPT_CKPT_DUE_SAVE) && ck->busy == DPT_CKPT_BUSY_WAIT)))
		rc = dpt__ckpt_settle(ck);
	return rc;
}

int dpt_ckpt_step_error(const struct dpt_ckpt *ck, unsigned due, int rc)
{
	/* A periodic save that failed on this rank (its snapshot) stays
	 * pending as failed: every rank gives it up at the next commit,
	 * which says so (dpt__ckpt_settle). DPT_EBUSY is the save before
	 * it, still pending: this one never started. */
	if (rc && rc != DPT_EBUSY && ck && ck->pending &&
	    (due & DPT_CKPT_DUE_SAVE) && !(due & DPT_CKPT_DUE_STOP))
		return 0;
	return rc;
}

static int ckpt_step(struct dpt_ckpt *ck, const struct dpt_ckpt_meta *meta,
		     int *stop, int *saved)
{
	unsigned due = 0;
	int rc;

	if (saved)
		*saved = 0;
	if (!stop)
		return DPT_EINVAL;
	*stop = 0;
	if (!ck || !meta)
		return DPT_EINVAL;
	rc = dpt_ckpt_poll(ck, meta->step, &due);
	if (rc && !due)
		return rc;
	/* The first error is returned; the save and the stop happen. */
	if (due & DPT_CKPT_DUE_SAVE) {
		int src = dpt__ckpt_save(ck, meta);

		if (saved)
			*saved = src == 0;
		src = dpt_ckpt_step_error(ck, due, src);
		rc = rc ? rc : src;
	}
	if (due & DPT_CKPT_DUE_STOP) {
		int wrc = dpt_ckpt_wait(ck);

		*stop = 1;
		rc = rc ? rc : wrc;
	}
	return rc;
}

static void ckpt_stats(const struct dpt_ckpt *ck, struct dpt_ckpt_stats *out)
{
	*out = ck->stats;
}

/* ------------------------------------------------------------ the ABI */

/* The first version of each struct (<dptrain/dptrain.h>, "the ABI"): its
 * size ends at the last field it had. */
#define OPTS_V1	    DPT__SIZE_THROUGH(struct dpt_ckpt_opts, cuda_stream)
#define TENSOR_V1   DPT__SIZE_THROUGH(struct dpt_ckpt_tensor, memory)
#define META_V1	    DPT__SIZE_THROUGH(struct dpt_ckpt_meta, user_len)
#define CONTENTS_V1 DPT__SIZE_THROUGH(struct dpt_ckpt_contents, user_len)
#define INFO_V1	    DPT__SIZE_THROUGH(struct dpt_ckpt_info, user_len)
#define STATS_V1    DPT__SIZE_THROUGH(struct dpt_ckpt_stats, bytes_read)

int dpt_ckpt_opts_default_sized(struct dpt_ckpt_opts *opts, size_t size)
{
	struct dpt_ckpt_opts o;

	opts_default(&o);
	return dpt__struct_out(opts, size, &o, sizeof(o), OPTS_V1,
			       "dpt_ckpt_opts");
}

int dpt_ckpt_new_sized(struct dpt_ckpt **out, struct dpt_ctx *ctx,
		       const struct dpt_ckpt_opts *opts, size_t size)
{
	struct dpt_ckpt_opts o;
	int rc;

	if (!out)
		return DPT_EINVAL;
	*out = NULL;
	opts_default(&o);
	rc = dpt__struct_in(&o, sizeof(o), opts, size, OPTS_V1,
			    "dpt_ckpt_opts");
	return rc ? rc : ckpt_new(out, ctx, opts ? &o : NULL);
}

int dpt_ckpt_register_sized(struct dpt_ckpt *ck,
			    const struct dpt_ckpt_tensor *t, size_t size)
{
	struct dpt_ckpt_tensor v = {0};
	int rc;

	if (!ck || !t)
		return DPT_EINVAL;
	rc = dpt__struct_in(&v, sizeof(v), t, size, TENSOR_V1,
			    "dpt_ckpt_tensor");
	return rc ? rc : ckpt_register(ck, &v);
}

int dpt_ckpt_save_sized(struct dpt_ckpt *ck, const struct dpt_ckpt_meta *meta,
			size_t size)
{
	struct dpt_ckpt_meta m = {0};
	int rc;

	if (!ck || !meta)
		return DPT_EINVAL;
	rc = dpt__struct_in(&m, sizeof(m), meta, size, META_V1,
			    "dpt_ckpt_meta");
	return rc ? rc : dpt__ckpt_save(ck, &m);
}

int dpt_ckpt_step_sized(struct dpt_ckpt *ck, const struct dpt_ckpt_meta *meta,
			size_t size, int *stop, int *saved)
{
	struct dpt_ckpt_meta m = {0};
	int rc;

	rc = dpt__struct_in(&m, sizeof(m), meta, size, META_V1,
			    "dpt_ckpt_meta");
	if (rc) {
		if (saved)
			*saved = 0;
		if (stop)
			*stop = 0;
		return rc;
	}
	return ckpt_step(ck, meta ? &m : NULL, stop, saved);
}

int dpt_ckpt_inspect_sized(struct dpt_ckpt *ck, uint64_t step,
			   struct dpt_ckpt_contents *out, size_t size)
{
	struct dpt_ckpt_contents c = {0};
	int rc;

	if (!out)
		return DPT_EINVAL;
	rc = dpt__struct_out(NULL, size, &c, sizeof(c), CONTENTS_V1,
			     "dpt_ckpt_contents");
	if (rc)
		return rc;
	rc = dpt__ckpt_inspect(ck, step, &c);
	(void)dpt__struct_out(out, size, &c, sizeof(c), CONTENTS_V1,
			      "dpt_ckpt_contents");
	return rc;
}

int dpt_ckpt_load_sized(struct dpt_ckpt *ck, uint64_t step,
			struct dpt_ckpt_info *info, size_t size)
{
	struct dpt_ckpt_info i = {0};
	int rc;

	if (info) {
		rc = dpt__struct_out(NULL, size, &i, sizeof(i), INFO_V1,
				     "dpt_ckpt_info");
		if (rc)
			return rc;
	}
	rc = dpt__ckpt_load(ck, step, info ? &i : NULL);
	if (info)
		(void)dpt__struct_out(info, size, &i, sizeof(i), INFO_V1,
				      "dpt_ckpt_info");
	return rc;
}

int dpt_ckpt_stats_sized(const struct dpt_ckpt *ck, struct dpt_ckpt_stats *out,
			 size_t size)
{
	struct dpt_ckpt_stats s;

	if (!ck || !out)
		return DPT_EINVAL;
	ckpt_stats(ck, &s);
	return dpt__struct_out(out, size, &s, sizeof(s), STATS_V1,
			       "dpt_ckpt_stats");
}

/*
 * The load of a checkpoint (dpt_ckpt_load, dpt_ckpt_inspect): the
 * resharding load of the newest committed step that every rank can read,
 * planned into pieces that a few threads read, verify and copy; the
 * fall-back to older steps and the quarantine of damaged ones; the
 * manifest that rank 0 reads and broadcasts for dpt_ckpt_inspect.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>

#include "ckpt_int.h"
#include "ckpt_priv.h"
#include "clock.h"
#include "log.h"
#include "wire.h"
#include "worker/internal.h"

/* Threads of a load, each with a staging buffer of DPT__CKPT_READ_MAX. */
#define DPT__CKPT_LOAD_THREADS 3

/* A piece of a load: blocks B0..B1 of one chunk, read in one request,
 * verified, then copied to the runs RUNS[0..NRUNS) that overlap them. */
struct piece {
	const struct dpt__tensor_desc *t;
	const struct dpt__chunk *c;
	uint64_t b0, b1;
	const struct dpt__plan_run *runs;
	size_t nruns;
	char *dst;
	int device; /* the CUDA device of DST; -1: host memory */
};

struct loader {
	struct dpt_ckpt *ck;
	const struct dpt__manifest *m;
	struct piece *pieces;
	size_t n, cap;
	atomic_size_t next;
	atomic_int error;
	atomic_uint_fast64_t bytes_read;
};

static int add_piece(struct loader *l, const struct piece *p)
{
	if (dpt__array_room(&l->pieces, l->n, &l->cap, sizeof(*l->pieces)))
		return DPT_ENOMEM;
	l->pieces[l->n++] = *p;
	return 0;
}

/* Cuts the runs PR[0..N) (one chunk, ascending source offsets) into
 * pieces: contiguous block ranges, no block between two runs read for
 * nothing, at most PER_READ blocks each. */
static int plan_pieces(struct loader *l, const struct dpt__tensor_desc *t,
		       const struct dpt__plan_run *pr, size_t n, char *dst,
		       int device, uint64_t per_read)
{
	const struct dpt__chunk *c = &t->chunks[pr[0].chunk];
	const uint64_t bs = l->m->block_size;
	size_t i = 0, sweep = 0;
	int rc;

	while (i < n) {
		uint64_t b0 = pr[i].run.src / bs;
		uint64_t b1 = (pr[i].run.src + pr[i].run.len - 1) / bs + 1;

		while (i + 1 < n && pr[i + 1].run.src / bs <= b1) {
			uint64_t e = (pr[i + 1].run.src + pr[i + 1].run.len -
				      1) / bs +
				     1;
			if (e > b1)
				b1 = e;
			i++;
		}
		i++;
		for (uint64_t p = b0; p < b1; p += per_read) {
			uint64_t q = p + per_read < b1 ? p + per_read : b1;
			uint64_t lo = p * bs, hi = q * bs;
			struct piece pc = {.t = t,
					   .c = c,
					   .b0 = p,
					   .b1 = q,
					   .dst = dst,
					   .device = device};
			size_t k;

			while (sweep < n &&
			       pr[sweep].run.src + pr[sweep].run.len <= lo)
				sweep++;
			for (k = sweep; k < n && pr[k].run.src < hi; k++)
				;
			pc.runs = &pr[sweep];
			pc.nruns = k - sweep;
			rc = add_piece(l, &pc);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static void *load_main(void *arg)
{
	struct loader *l = arg;
	const uint64_t bs = l->m->block_size;
	uint64_t per_read =
		DPT__CKPT_READ_MAX / bs ? DPT__CKPT_READ_MAX / bs : 1;
	char *staging = NULL;
	size_t i;
	int rc = 0, zero = 0;
#ifdef HAVE_CUDA
	struct dpt__cuda_copy cc;
	bool pinned = false;
#endif

	/* Page-aligned, as cudaHostRegister pins whole pages. */
	if (posix_memalign((void **)&staging, 4096, per_read * bs)) {
		atomic_store(&l->error, DPT_ENOMEM);
		return NULL;
	}
#ifdef HAVE_CUDA
	/* Copies into device tensors: from pinned staging (cheap next to a
	 * read of 32 MiB), on a stream of this thread that waits for the
	 * work queued on the caller's stream (which may still write the
	 * tensors) when the load began. */
	dpt__cuda_copy_begin(&cc, l->ck->device, true, l->ck->cuda_stream,
			     true);
	if (l->ck->device >= 0)
		pinned = dpt__cuda_pin(staging, per_read * bs,
				       "checkpoint staging buffer") == 0;
#endif
	while (!rc && (i = atomic_fetch_add(&l->next, 1)) < l->n &&
	       atomic_load(&l->error) == 0) {
		const struct piece *p = &l->pieces[i];
		uint64_t lo = p->b0 * bs;
		uint64_t hi =
			p->b1 * bs < p->c->length ? p->b1 * bs : p->c->length;

		rc = dpt__ckpt_read_blocks(l->ck->st, l->m, p->t, p->c, p->b0,
					   p->b1, staging);
		if (rc)
			break;
		atomic_fetch_add(&l->bytes_read, hi - lo);
#ifdef HAVE_CUDA
		if (p->device >= 0)
			dpt__cuda_copy_target(&cc, p->dst, staging);
#endif
		for (size_t k = 0; k < p->nruns && !rc; k++) {
			const struct dpt__run *r = &p->runs[k].run;
			uint64_t a = r->src > lo ? r->src : lo;
			uint64_t b =
				r->src + r->len < hi ? r->src + r->len : hi;
			struct dpt__run part = {.src = a - lo,
						.dst = r->dst + (a - r->src),
						.len = b - a};

			if (a >= b)
				continue;
#ifdef HAVE_CUDA
			if (p->device >= 0) {
				rc = dpt__cuda_copy_run(&cc, &part);
				continue;
			}
#endif
			memcpy(p->dst + part.dst, staging + part.src, part.len);
		}
#ifdef HAVE_CUDA
		/* The next piece is read into the same staging buffer. */
		if (p->device >= 0 && dpt__cuda_copy_sync(&cc))
			rc = cc.rc;
#endif
	}
	if (rc)
		atomic_compare_exchange_strong(&l->error, &zero, rc);
#ifdef HAVE_CUDA
	(void)dpt__cuda_copy_end(&cc);
	if (pinned)
		dpt__cuda_unpin(staging);
#endif
	free(staging);
	return NULL;
}

static void shape_text(const uint64_t *shape, int ndim, char *buf, size_t size)
{
	size_t n = 0;

	n += (size_t)snprintf(buf, size, "[");
	for (int d = 0; d < ndim && n < size; d++)
		n += (size_t)snprintf(buf + n, size - n, "%s%" PRIu64,
				      d ? ", " : "", shape[d]);
	if (n < size)
		snprintf(buf + n, size - n, "]");
}

/* Whether T (NULL: absent) of STEP can fill registered tensor R. A
 * mismatch is not damage: the caller does not try older steps for it. */
static int check_registered(const struct dpt_ckpt *ck, uint64_t step,
			    const struct dpt__ckpt_reg *r,
			    const struct dpt__tensor_desc *t)
{
	char stored[256], wanted[256];
	bool same;

	if (!t) {
		dpt__error(
			"step %" PRIu64 " of '%s' has no tensor '%s': the "
			"registered tensors are not the checkpoint's (was the "
			"run name used by another program?)",
			step, dpt__storage_uri(ck->st), r->name);
		return DPT_EMISMATCH;
	}
	same = t->dtype == r->dtype && t->ndim == r->ndim;
	for (int d = 0; same && d < r->ndim; d++)
		same = t->shape[d] == r->shape[d];
	if (same)
		return 0;
	shape_text(t->shape, t->ndim, stored, sizeof(stored));
	shape_text(r->shape, r->ndim, wanted, sizeof(wanted));
	dpt__error("step %" PRIu64 " of '%s': tensor '%s' is stored as %s %s, "
		   "registered as %s %s",
		   step, dpt__storage_uri(ck->st), r->name,
		   dpt__dtype_name(t->dtype), stored, dpt__dtype_name(r->dtype),
		   wanted);
	return DPT_EMISMATCH;
}

static int load_step(struct dpt_ckpt *ck, uint64_t step,
		     struct dpt__manifest *m)
{
	struct dpt__plan *plans = NULL;
	struct loader l = {.ck = ck, .m = m};
	pthread_t threads[DPT__CKPT_LOAD_THREADS];
	uint64_t per_read, t0 = dpt__now_ns(), t1;
	int nthreads = 0, rc;

	rc = dpt__ckpt_read_manifest(ck->st, step, m);
	if (rc) {
		if (rc == DPT_ENOENT)
			dpt__error("step %" PRIu64
				   ": manifest of '%s' vanished",
				   step, dpt__storage_uri(ck->st));
		return rc;
	}
	per_read = DPT__CKPT_READ_MAX / m->block_size;
	if (per_read == 0)
		per_read = 1;
	plans = calloc(ck->nregs + 1, sizeof(*plans));
	if (!plans)
		return DPT_ENOMEM;
	for (size_t i = 0; i < ck->nregs && !rc; i++) {
		const struct dpt__ckpt_reg *r = &ck->regs[i];
		const struct dpt__tensor_desc *t =
			dpt__manifest_find(m, r->name);

		rc = check_registered(ck, step, r, t);
		if (rc)
			break;
		rc = dpt__plan_tensor(t, &r->local, &plans[i]);
		for (size_t a = 0, b; !rc && a < plans[i].n; a = b) {
			const struct dpt__plan_run *pr = plans[i].runs;
			for (b = a;
			     b < plans[i].n && pr[b].chunk == pr[a].chunk; b++)
				ck->stats.bytes_needed += pr[b].run.len;
			rc = plan_pieces(&l, t, &pr[a], b - a, r->data,
					 r->device, per_read);
		}
	}
	t1 = dpt__now_ns();
	/* Pieces are read, verified and copied by a few threads at once:
	 * the reads of one overlap the checksums and copies of another, and
	 * every piece writes bytes of the tensors that no other piece
	 * writes. */
	for (;
	     !rc && nthreads < DPT__CKPT_LOAD_THREADS && (size_t)nthreads < l.n;
	     nthreads++)
		if (pthread_create(&threads[nthreads], NULL, load_main, &l)) {
			dpt__error("cannot start a checkpoint reader thread");
			atomic_store(&l.error, DPT_ESYS);
			break;
		}
	for (int i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	if (!rc)
		rc = atomic_load(&l.error);
	ck->stats.bytes_read += atomic_load(&l.bytes_read);
	dpt__debug("step %" PRIu64 ": manifest and plan %.3f s, %zu pieces "
		   "(%" PRIu64 " bytes) read and verified in %.3f s",
		   step, (t1 - t0) / 1e9, l.n,
		   (uint64_t)atomic_load(&l.bytes_read),
		   (dpt__now_ns() - t1) / 1e9);
	for (size_t i = 0; i < ck->nregs; i++)
		dpt__plan_release(&plans[i]);
	free(plans);
	free(l.pieces);
	return rc;
}

#define AUTH_HINT                                                              \
	"fix AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and "                \
	"AWS_SESSION_TOKEN), or the profile AWS_PROFILE of the credentials "   \
	"file (AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials)"

/* Rank 0 could not list the run's steps (ERR): it has logged why (the
 * storage's message, S3's answer); the other ranks say where to look.
 * Nothing is said to be unusable: no step was even looked at. */
static void listing_failed(const struct dpt_ckpt *ck, int rank, int err)
{
	char cause[512], both[1024];

	if (rank == 0 && err == DPT_EAUTH) {
		/* The caller's dpt_last_error() (a Python exception) gets
		 * both what S3 answered and what to fix; the log has the
		 * answer already. */
		snprintf(cause, sizeof(cause), "%s", dpt_last_error());
		dpt__error("cannot load from '%s': the storage refused the "
			   "credentials (see above): %s",
			   dpt__storage_uri(ck->st), AUTH_HINT);
		if (cause[0]) {
			snprintf(both, sizeof(both), "%s: %s", cause,
				 AUTH_HINT);
			dpt__set_last_error(both);
		}
	} else if (rank != 0)
		dpt__error("cannot load from '%s': rank 0 cannot list its "
			   "steps: %s (rank 0's log says why)%s%s",
			   dpt__storage_uri(ck->st), dpt_strerror(err),
			   err == DPT_EAUTH ? ": " : "",
			   err == DPT_EAUTH ? AUTH_HINT : "");
}

/* Rank 0, once: the run has no committed step, so it starts from step 0.
 * Said at the default log level, because a mistyped checkpoint path or
 * run name looks exactly like this: the storage has just created an empty
 * directory for it, and without this line training would silently start
 * over there. */
static void note_fresh(struct dpt_ckpt *ck)
{
	const char *uri = dpt__storage_uri(ck->st), *run = strrchr(uri, '/');

	if (ck->told_fresh)
		return;
	ck->told_fresh = true;
	dpt__report(ck->ctx, DPT_KV_RESUMED, "none");
	if (run && run[1])
		dpt__info(
			"no checkpoint at '%s': starting run '%s' from step 0",
			uri, run + 1);
	else
		dpt__info("no checkpoint at '%s': starting from step 0", uri);
}

/*
 * The steps of DAMAGED (N of them, newer than the step just loaded; FOUND
 * were found, the same number on every rank) stop counting as committed, so
 * that the run saves those step numbers again when it gets there
 * (doc/checkpoint-format.md, "Damaged steps"). Rank 0 quarantines, once, only
 * after an older step loaded on every rank: the last good step is never
 * touched. Every rank waits for it, so that no save can start before. A step
 * that cannot be quarantined stays committed (logged): the load itself
 * succeeded.
 */
static int quarantine(struct dpt_ckpt *ck, const uint64_t *damaged, size_t n,
		      size_t found)
{
	int rank = ck->ctx ? dpt_rank(ck->ctx) : 0;

	if (found == 0)
		return 0;
	for (size_t i = 0; rank == 0 && i < n; i++)
		(void)dpt__ckpt_quarantine(ck->st, damaged[i], true);
	return ck->ctx ? dpt_barrier(ck->ctx) : 0;
}

/* No step left to try: why (the first step's failure, the listing's
 * LISTING_RC, or none committed at or below STEP), said once. */
static int nothing_loaded(struct dpt_ckpt *ck, int rank, uint64_t step,
			  int first, int listing_rc, size_t ncommitted)
{
	/* A run's first start has nothing to load: not an error of the
	 * storage, the caller decides. */
	if (!first && !listing_rc && rank == 0 && ncommitted == 0) {
		note_fresh(ck);
	} else if (!first && !listing_rc && rank == 0) {
		dpt__info("no committed step at or below %" PRIu64 " in '%s'",
			  step, dpt__storage_uri(ck->st));
		dpt__report(ck->ctx, DPT_KV_RESUMED, "none");
	} else if (listing_rc) {
		listing_failed(ck, rank, listing_rc);
	} else if (first) {
		dpt__error("no usable committed step in '%s'",
			   dpt__storage_uri(ck->st));
	}
	return first ? first : listing_rc ? listing_rc : DPT_ENOENT;
}

/* ck->loaded, read on every rank: into INFO, the run's committed step,
 * and rank 0's report. */
static void loaded(struct dpt_ckpt *ck, int rank, struct dpt_ckpt_info *info)
{
	char s[24];

	if (info) {
		info->step = ck->loaded.step;
		info->sample_cursor = ck->loaded.sample_cursor;
		info->world_size = ck->loaded.world_size;
		info->rng = ck->loaded.rng;
		info->rng_len = ck->loaded.rng_len;
		info->user = ck->loaded.user;
		info->user_len = ck->loaded.user_len;
	}
	ck->committed = (int64_t)ck->loaded.step;
	if (rank != 0)
		return;
	dpt__info("loaded step %" PRIu64 " (written by %u ranks) from '%s'",
		  ck->loaded.step, ck->loaded.world_size,
		  dpt__storage_uri(ck->st));
	snprintf(s, sizeof(s), "%" PRIu64, ck->loaded.step);
	dpt__report(ck->ctx, DPT_KV_RESUMED, s);
}

/* A failure that every older step would meet too (AGREED, the ranks'
 * common error): its code, said once, or 0 to try the step before. */
static int final_failure(struct dpt_ckpt *ck, int rank, int64_t step,
			 int agreed)
{
	/* Tensors the step does not hold are not in an older step either:
	 * say so once, not for each. */
	if (agreed == DPT_EMISMATCH)
		return DPT_EMISMATCH;
	/* Refused credentials refuse the older steps too: say what to fix,
	 * do not call the steps unusable. */
	if (agreed != DPT_EAUTH)
		return 0;
	if (rank == 0)
		dpt__error("cannot read step %" PRId64 " of '%s': the storage "
			   "refused the credentials (see above): %s",
			   step, dpt__storage_uri(ck->st), AUTH_HINT);
	return DPT_EAUTH;
}

int dpt__ckpt_load(struct dpt_ckpt *ck, uint64_t step,
		   struct dpt_ckpt_info *info)
{
	struct dpt__step_list l = {0};
	int64_t pick[2] = {-1, 0}; /* the step to try, the listing's error */
	/* Steps found damaged on every rank that failed them, kept by rank
	 * 0; how many, counted by every rank from the same votes. */
	uint64_t *damaged = NULL;
	size_t next = 0, ndamaged = 0, damaged_cap = 0, found = 0;
	int rank = ck->ctx ? dpt_rank(ck->ctx) : 0;
	int first = 0, rc;

	if (ck->pending) {
		dpt__error("dpt_ckpt_load while a save is in flight: call "
			   "dpt_ckpt_wait first");
		return DPT_EBUSY;
	}
	/* What it deletes is gone before the listing. */
	dpt__ckpt_join_retention(ck);
	ck->stats.loads++;
	if (rank == 0) {
		rc = dpt__ckpt_list(ck->st, "", &l);
		if (rc)
			pick[1] = rc;
		next = l.ncommitted;
		while (next > 0 && l.committed[next - 1] > step)
			next--;
	}
	for (;;) {
		uint32_t failed;

		if (rank == 0) {
			pick[0] = next > 0 && !pick[1]
					  ? (int64_t)l.committed[--next]
					  : -1;
		}
		if (ck->ctx) {
			rc = dpt_broadcast(ck->ctx, pick, sizeof(pick),
					   DPT_UINT8, 0);
			if (rc)
				break;
		}
		if (pick[0] < 0) {
			rc = nothing_loaded(ck, rank, step, first, (int)pick[1],
					    l.ncommitted);
			break;
		}
		dpt__manifest_release(&ck->loaded);
		ck->stats.bytes_needed = ck->stats.bytes_read = 0;
		rc = load_step(ck, (uint64_t)pick[0], &ck->loaded);
		{
			int agreed;
			int rc2 = dpt__ckpt_vote(ck, rc, &failed, &agreed);
			if (rc2) {
				rc = rc2;
				break;
			}
			rc2 = failed ? final_failure(ck, rank, pick[0], agreed)
				     : 0;
			if (rc2) {
				rc = rc2;
				break;
			}
		}
		if (failed == 0) {
			rc = quarantine(ck, damaged, ndamaged, found);
			if (rc)
				break;
			loaded(ck, rank, info);
			break;
		}
		if (!first)
			first = rc ? rc : DPT_ECORRUPT;
		if (rank == 0)
			dpt__warn("step %" PRId64 " is unusable on %" PRIu32
				  " rank(s) (see "
				  "above): trying the previous committed step",
				  pick[0], failed);
		/* Damage is what every failed rank verified: a checksum,
		 * a cut shard or a manifest that breaks the rules. An I/O
		 * error, a missing shard, a timeout or a newer format
		 * version may pass, and such a step is left committed. */
		rc = dpt__ckpt_vote(ck, rc && rc != DPT_ECORRUPT ? rc : 0,
				    &failed, NULL);
		if (rc)
			break;
		if (failed == 0)
			found++;
		/* Out of memory, the step merely stays committed. */
		if (failed == 0 && rank == 0 &&
		    dpt__array_room(&damaged, ndamaged, &damaged_cap,
				    sizeof(*damaged)) == 0)
			damaged[ndamaged++] = (uint64_t)pick[0];
	}
	if (rc)
		dpt__manifest_release(&ck->loaded);
	dpt__step_list_release(&l);
	free(damaged);
	return rc;
}

/* Rank 0: the manifest of the newest committed step at or below STEP that
 * reads and checks, encoded into *JSON, and the bytes its files hold in
 * *STORED. DPT_ENOENT: none. */
static int newest_manifest(struct dpt_ckpt *ck, uint64_t step, char **json,
			   size_t *len, uint64_t *stored)
{
	struct dpt__step_list l = {0};
	struct dpt__manifest m = {0};
	size_t next;
	int rc;

	rc = dpt__ckpt_list(ck->st, "", &l);
	if (rc)
		goto out;
	if (l.ncommitted == 0)
		note_fresh(ck);
	next = l.ncommitted;
	while (next > 0 && l.committed[next - 1] > step)
		next--;
	for (rc = DPT_ENOENT; next > 0 && rc; next--) {
		dpt__manifest_release(&m);
		rc = dpt__ckpt_read_manifest(ck->st, l.committed[next - 1], &m);
		if (rc == DPT_ENOMEM)
			break;
	}
	if (!rc)
		rc = dpt__ckpt_stored_bytes(ck->st, &m, stored);
	if (!rc)
		rc = dpt__manifest_encode(&m, json, len);
out:
	dpt__manifest_release(&m);
	dpt__step_list_release(&l);
	return rc;
}

int dpt__ckpt_inspect(struct dpt_ckpt *ck, uint64_t step,
		      struct dpt_ckpt_contents *out)
{
	/* The manifest's length, rank 0's error, the bytes of its files. */
	int64_t head[3] = {0, 0, 0};
	uint64_t stored = 0;
	char *json = NULL, err[256];
	size_t len = 0;
	int rank, rc;

	if (!ck || !out)
		return DPT_EINVAL;
	memset(out, 0, sizeof(*out));
	rank = ck->ctx ? dpt_rank(ck->ctx) : 0;
	dpt__ckpt_join_retention(ck);
	dpt__manifest_release(&ck->inspected);
	free(ck->entries);
	ck->entries = NULL;
	if (rank == 0) {
		head[1] = newest_manifest(ck, step, &json, &len, &stored);
		head[0] = (int64_t)len;
		head[2] = stored > INT64_MAX ? INT64_MAX : (int64_t)stored;
	}
	if (ck->ctx) {
		rc = dpt_broadcast(ck->ctx, head, sizeof(head), DPT_UINT8, 0);
		if (rc)
			goto out;
	}
	rc = (int)head[1];
	if (rc)
		goto out;
	if (rank != 0) {
		json = malloc((size_t)head[0]);
		if (!json) {
			/* The others then wait in the broadcast until the
			 * communicator's bound: a manifest is a few KiB. */
			rc = DPT_ENOMEM;
			goto out;
		}
	}
	if (ck->ctx) {
		rc = dpt_broadcast(ck->ctx, json, (size_t)head[0], DPT_UINT8,
				   0);
		if (rc)
			goto out;
	}
	rc = dpt__manifest_decode(json, (size_t)head[0], &ck->inspected, err,
				  sizeof(err));
	if (rc) {
		dpt__error("cannot decode the manifest rank 0 sent: %s", err);
		goto out;
	}
	ck->entries = calloc(ck->inspected.ntensors + 1, sizeof(*ck->entries));
	if (!ck->entries) {
		rc = DPT_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < ck->inspected.ntensors; i++) {
		const struct dpt__tensor_desc *t = &ck->inspected.tensors[i];

		ck->entries[i] = (struct dpt_ckpt_entry){
			.name = t->name,
			.dtype = t->dtype,
			.ndim = t->ndim,
			.shape = t->shape,
		};
	}
	*out = (struct dpt_ckpt_contents){
		.step = ck->inspected.step,
		.sample_cursor = ck->inspected.sample_cursor,
		.world_size = ck->inspected.world_size,
		.ntensors = ck->inspected.ntensors,
		.tensors = ck->entries,
		.rng = ck->inspected.rng,
		.rng_len = ck->inspected.rng_len,
		.user = ck->inspected.user,
		.user_len = ck->inspected.user_len,
		.stored_bytes = (uint64_t)head[2],
	};
out:
	free(json);
	if (rc) {
		dpt__manifest_release(&ck->inspected);
		free(ck->entries);
		ck->entries = NULL;
	}
	return rc;
}

/*
 * The commit of a checkpoint (dpt_ckpt_wait, and dpt__ckpt_settle for the
 * periodic saves): every rank votes on its shard through the coordinator,
 * rank 0 merges the ranks' fragments into the manifest and writes it if
 * absent, the commit point (doc/checkpoint-format.md); a step given up is
 * removed and reported; retention runs in a thread of its own on rank 0.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>

#include "ckpt_int.h"
#include "ckpt_priv.h"
#include "clock.h"
#include "log.h"
#include "wire.h"
#include "worker/internal.h"

/* Leftovers of the storage (temporary files, multipart uploads) older
 * than this are removed after a commit: no save takes an hour per file. */
#define GC_AGE_S 3600

/* Waits for the retention thread, if this process started one. */
void dpt__ckpt_join_retention(struct dpt_ckpt *ck)
{
	if (ck->gc_pid != getpid())
		return;
	pthread_join(ck->gc_thread, NULL);
	ck->gc_pid = 0;
}

static void retain(struct dpt_ckpt *ck, struct dpt__storage *st)
{
	if (dpt__ckpt_retain(st, ck->keep_last, ck->keep_every, GC_AGE_S, true,
			     NULL))
		dpt__warn("retention in '%s' failed (see above): the new step "
			  "is committed all the same",
			  dpt__storage_uri(st));
}

static void *retention_main(void *arg)
{
	struct dpt_ckpt *ck = arg;

	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid),
			  DPT__CKPT_WRITER_NICE);
	retain(ck, ck->gc_st);
	return NULL;
}

/* Applies retention in the background (here, if its storage handle or
 * thread cannot be had), after the one before it is over. */
static void start_retention(struct dpt_ckpt *ck)
{
	dpt__ckpt_join_retention(ck);
	if (!ck->gc_st &&
	    dpt__storage_open(dpt__storage_uri(ck->st), &ck->so, &ck->gc_st)) {
		retain(ck, ck->st);
		return;
	}
	if (pthread_create(&ck->gc_thread, NULL, retention_main, ck) == 0) {
		ck->gc_pid = getpid();
		return;
	}
	retain(ck, ck->gc_st);
}

/* Every rank's result (0 or a dpt_error) counted by the coordinator, which
 * knows the members (doc/protocol.md, VOTE): *FAILED is the number of
 * ranks whose result is an error. A rank lost before it voted fails the
 * vote itself (DPT_EPEERLOST on the others). */
int dpt__ckpt_vote(struct dpt_ckpt *ck, int mine, uint32_t *failed, int *first)
{
	*failed = mine != 0;
	if (first)
		*first = mine;
	if (!ck->ctx)
		return 0;
	return dpt__vote(ck->ctx, mine, failed, first);
}

/* Rank 0: the manifest of the step from every rank's fragment. */
static int merge(struct dpt_ckpt *ck, const char *frags, uint64_t stride,
		 const uint64_t *lens, struct dpt__manifest *m)
{
	char err[512];
	int rc = DPT_ENOMEM;

	memset(m, 0, sizeof(*m));
	m->version = DPT__CKPT_VERSION;
	m->step = ck->frag.step;
	m->world_size = (uint32_t)ck->world;
	m->sample_cursor = ck->frag.sample_cursor;
	m->block_size = ck->block;
	m->rng = malloc(ck->frag.rng_len + 1);
	m->user = malloc(ck->frag.user_len + 1);
	if (!m->rng || !m->user)
		return rc;
	memcpy(m->rng, ck->frag.rng, ck->frag.rng_len);
	memcpy(m->user, ck->frag.user, ck->frag.user_len);
	m->rng_len = ck->frag.rng_len;
	m->user_len = ck->frag.user_len;
	for (size_t i = 0; i < ck->nregs; i++) {
		const struct dpt__ckpt_reg *r = &ck->regs[i];
		if (!dpt__manifest_add_tensor(m, r->name, r->dtype, r->kind,
					      r->ndim, r->shape))
			return rc;
	}
	for (int rank = 0; rank < ck->world; rank++) {
		struct dpt__manifest f;
		uint32_t file = (uint32_t)m->nfiles;

		rc = dpt__manifest_decode(frags + (uint64_t)rank * stride,
					  lens[rank], &f, err, sizeof(err));
		if (rc) {
			dpt__error("step %" PRIu64 ": the part of rank %d is "
				   "unreadable: %s",
				   m->step, rank, err);
			dpt__manifest_release(&f);
			return rc;
		}
		if (f.nfiles) {
			struct dpt__shard_file *files = realloc(
				m->files, (m->nfiles + 1) * sizeof(*files));
			if (!files) {
				dpt__manifest_release(&f);
				return DPT_ENOMEM;
			}
			m->files = files;
			m->files[m->nfiles++] = f.files[0];
			f.files[0].name = NULL;
		}
		for (size_t i = 0; i < f.ntensors; i++) {
			struct dpt__tensor_desc *ft = &f.tensors[i];
			struct dpt__tensor_desc *t =
				dpt__manifest_find(m, ft->name);
			bool same = t && t->dtype == ft->dtype &&
				    t->ndim == ft->ndim && t->kind == ft->kind;

			for (int d = 0; same && d < t->ndim; d++)
				same = t->shape[d] == ft->shape[d];
			if (!same) {
				dpt__error("step %" PRIu64
					   ": rank %d registered "
					   "tensor '%s' unlike rank 0 (name, "
					   "dtype, kind or shape): every rank "
					   "registers the same tensors",
					   m->step, rank, ft->name);
				dpt__manifest_release(&f);
				return DPT_EINVAL;
			}
			for (size_t j = 0; j < ft->nchunks; j++) {
				struct dpt__chunk *c = dpt__tensor_add_chunk(t);
				if (!c) {
					dpt__manifest_release(&f);
					return DPT_ENOMEM;
				}
				*c = ft->chunks[j];
				c->file = file;
				ft->chunks[j].xxh3 = NULL;
			}
		}
		dpt__manifest_release(&f);
	}
	rc = dpt__manifest_check(m, false, err, sizeof(err));
	if (rc) {
		dpt__error("step %" PRIu64 " cannot be committed: %s (sharded "
			   "boxes must be disjoint and cover their tensor)",
			   m->step, err);
		return DPT_EINVAL;
	}
	return 0;
}

/* Rank 0: commits the step of M by putting its manifest. */
static int put_manifest(struct dpt_ckpt *ck, const struct dpt__manifest *m)
{
	char *json = NULL, dir[32], key[64];
	size_t len = 0, nchunks = 0;
	int rc;

	rc = dpt__manifest_encode(m, &json, &len);
	if (rc)
		return rc;
	/* A manifest that no reader would read is not committed: the step
	 * would look saved and never load. */
	if (len > DPT__CKPT_MANIFEST_MAX) {
		for (size_t i = 0; i < m->ntensors; i++)
			nchunks += m->tensors[i].nchunks;
		dpt__error("step %" PRIu64 " cannot be committed: its manifest "
			   "would be %zu bytes (%zu tensors in %zu chunks), "
			   "more than the %u that readers accept: save fewer, "
			   "larger tensors (flatten parameters) or use fewer "
			   "ranks",
			   m->step, len, m->ntensors, nchunks,
			   DPT__CKPT_MANIFEST_MAX);
		free(json);
		return DPT_ETOOBIG;
	}
	dpt__step_dir(m->step, dir, sizeof(dir));
	snprintf(key, sizeof(key), "%s/%s", dir, DPT__CKPT_MANIFEST);
	rc = dpt__storage_put_if_absent(ck->st, key, json, len);
	if (rc == DPT_EEXIST)
		dpt__error("step %" PRIu64 " was committed by someone else "
			   "meanwhile in '%s'",
			   m->step, dpt__storage_uri(ck->st));
	free(json);
	return rc;
}

static int commit(struct dpt_ckpt *ck)
{
	char *mine = NULL, *all = NULL;
	uint64_t len = 0, *lens = NULL, stride = 0;
	struct dpt__manifest m = {0};
	int32_t result = 0;
	int rc;

	/* A rank that cannot encode its part still takes part in the
	 * collectives, with an empty part: rank 0 then refuses the commit. */
	if (dpt__manifest_encode(&ck->frag, &mine, &len))
		len = 0;
	lens = calloc((size_t)ck->world, sizeof(*lens));
	if (!lens) {
		rc = DPT_ENOMEM;
		goto out;
	}
	lens[ck->rank] = len;
	if (ck->ctx) {
		rc = dpt_allgather(ck->ctx, &len, lens, sizeof(len), DPT_UINT8);
		if (rc)
			goto out;
	}
	for (int r = 0; r < ck->world; r++)
		if (lens[r] > stride)
			stride = lens[r];
	all = calloc((size_t)ck->world, stride ? stride : 1);
	if (!all) {
		rc = DPT_ENOMEM;
		goto out;
	}
	if (len)
		memcpy(all + (uint64_t)ck->rank * stride, mine, len);
	if (ck->ctx && stride) {
		rc = dpt_allgather(ck->ctx, all + (uint64_t)ck->rank * stride,
				   all, stride, DPT_UINT8);
		if (rc)
			goto out;
	}
	if (ck->rank == 0) {
		result = merge(ck, all, stride, lens, &m);
		if (!result)
			result = put_manifest(ck, &m);
	}
	if (ck->ctx) {
		rc = dpt_broadcast(ck->ctx, &result, 1, DPT_INT32, 0);
		if (rc)
			goto out;
	}
	rc = result;
	if (rc) {
		/* Every rank has rank 0's verdict: the step is given up
		 * by all alike. */
		ck->abandoned = true;
		ck->failed_ranks = 1;
		ck->failed_first = rc;
		if (ck->rank == 0)
			snprintf(ck->io_msg, sizeof(ck->io_msg), "%s",
				 dpt_last_error());
	} else {
		ck->committed = (int64_t)ck->frag.step;
	}
	if (!rc && ck->rank == 0) {
		char step[72];

		dpt__info("committed step %" PRIu64 " of %d ranks in '%s'",
			  ck->frag.step, ck->world, dpt__storage_uri(ck->st));
		start_retention(ck);
		/* After the manifest: the coordinator writes the run's
		 * "save" and "commit" events from this report, so neither
		 * can name a step that is not committed. */
		uint64_t bytes = 0,
			 ms = (dpt__now_ns() - ck->last_save_ns) / 1000000;

		for (size_t i = 0; i < m.nfiles; i++)
			bytes += m.files[i].size;
		snprintf(step, sizeof(step), "%" PRIu64 " %" PRIu64 " %" PRIu64,
			 ck->frag.step, bytes, ms);
		dpt__report(ck->ctx, DPT_KV_COMMITTED, step);
		dpt__log_flush(ck->ctx);
	}
out:
	dpt__manifest_release(&m);
	free(all);
	free(lens);
	free(mine);
	return rc;
}

/* Every rank's writer has finished: commit if every rank's shard is
 * durable. QUIET: a rank whose own shard is fine does not log that
 * another's failed (the caller reports the step given up). */
static int agree_and_commit(struct dpt_ckpt *ck, bool quiet)
{
	uint32_t failed;
	int first, rc;

	ck->abandoned = false;
	rc = dpt__ckpt_vote(ck, ck->io_rc, &failed, &first);
	if (rc) {
		dpt__error("step %" PRIu64 " not committed: %s", ck->frag.step,
			   dpt_strerror(rc));
		return rc;
	}
	if (failed) {
		ck->abandoned = true;
		ck->failed_ranks = failed;
		ck->failed_first = first;
		if (ck->io_rc) {
			/* The cause, for the caller's dpt_last_error(). */
			if (ck->io_msg[0])
				dpt__set_last_error(ck->io_msg);
			return ck->io_rc;
		}
		if (!quiet)
			dpt__error("step %" PRIu64 " not committed: %" PRIu32
				   " of %d ranks failed to write their shard "
				   "(their logs say why)",
				   ck->frag.step, failed, ck->world);
		return DPT_EIO;
	}
	return commit(ck);
}

/* Writes a byte of every page of the snapshot buffer, whose bytes are no
 * longer needed: the next save's copy writes it too. */
static void retouch(unsigned char *p, uint64_t len)
{
	volatile unsigned char *v = p;

	for (uint64_t off = 0; off < len; off += 4096)
		v[off] = 0;
}

/* Rank 0 of a step that every rank gave up: its files go, unless the
 * step is committed after all (a step committed before, DPT_EEXIST): a
 * full file system keeps none of the space that the next save needs. */
static void remove_abandoned(struct dpt_ckpt *ck)
{
	char dir[32], prefix[40];

	if (ck->rank != 0 ||
	    dpt__ckpt_manifest_exists(ck->st, ck->frag.step) != DPT_ENOENT)
		return;
	dpt__step_dir(ck->frag.step, dir, sizeof(dir));
	snprintf(prefix, sizeof(prefix), "%s/", dir);
	if (dpt__ckpt_delete_prefix(ck->st, prefix))
		dpt__warn("the files of step %" PRIu64 " are left for gc (see "
			  "above)",
			  ck->frag.step);
}

/* dpt_ckpt_wait; PERIODIC: dpt__ckpt_settle()'s, which reports a step
 * given up. */
static int finish_save(struct dpt_ckpt *ck, bool periodic)
{
	uint64_t t0;
	int rc;

	if (!ck->pending)
		return 0;
	dpt__ckpt_join_writer(ck);
	/* What the training waits for from here on (the vote, rank 0's
	 * manifest, the retouch) is part of the save's cost; the wait for
	 * the writer above is not: auto never asks for a save before the
	 * previous one has committed. */
	t0 = dpt__now_ns();
	ck->pending = false;
	rc = agree_and_commit(ck, periodic);
	if (rc && ck->abandoned)
		remove_abandoned(ck);
	/* In a virtual machine (measured in a Firecracker guest), after
	 * direct I/O by any process the first access to each page of memory
	 * not touched since costs several times the next: 3-10 ms per 512
	 * MiB against 1.9 ms (doc/PERFORMANCE.md). The next snapshot, the
	 * only part of a save that stalls training, would pay for it; this
	 * call, which waits anyway, pays instead, once every rank's I/O is
	 * over, with a write (what the copy does; it left the stall lower
	 * than a read in the benchmark). Only what the buffer holds: a save
	 * that could not allocate it is pending all the same. */
	retouch(ck->snap,
		ck->data_len < ck->snap_cap ? ck->data_len : ck->snap_cap);
	if (!rc)
		ck->cost_s = dpt__ckpt_cost_update(
			ck->cost_s,
			(double)(ck->save_stall_ns + (dpt__now_ns() - t0)) /
				1e9);
	return rc;
}

int dpt_ckpt_wait(struct dpt_ckpt *ck)
{
	return finish_save(ck, false);
}

/*
 * The commit of a periodic save (dpt_ckpt_poll, dpt_ckpt_step): as
 * dpt_ckpt_wait, but a step that every rank gave up alike (a disk full on
 * one rank, a manifest rank 0 could not write) is not an error of
 * training: the previous committed step is intact, so rank 0 says so
 * loudly, once, with the cause, and every rank returns 0; the next due
 * save tries again. What breaks the collective (a lost rank) is returned.
 */
int dpt__ckpt_settle(struct dpt_ckpt *ck)
{
	char failed_on[64] = "", last[96], cause[600];
	int rc;

	if (!ck->pending)
		return 0;
	rc = finish_save(ck, true);
	if (!rc || !ck->abandoned)
		return rc;
	if (ck->rank != 0)
		return 0;
	if (ck->world > 1)
		snprintf(failed_on, sizeof(failed_on),
			 " on %" PRIu32 " of %d ranks", ck->failed_ranks,
			 ck->world);
	if (ck->committed >= 0)
		snprintf(last, sizeof(last), "the last committed step %" PRId64,
			 ck->committed);
	else
		snprintf(last, sizeof(last), "what was committed before");
	if (ck->io_msg[0] && (ck->io_rc || ck->failed_ranks == 1))
		snprintf(cause, sizeof(cause), "%s", ck->io_msg);
	else
		snprintf(cause, sizeof(cause),
			 "%s (the failing rank's log says "
			 "why)",
			 dpt_strerror(ck->failed_first));
	dpt__warn("checkpoint of step %" PRIu64 " failed%s: %s; %s is intact; "
		  "training goes on and the next save is tried at the next "
		  "interval",
		  ck->frag.step, failed_on, cause, last);
	return 0;
}

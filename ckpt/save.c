/*
 * The save of a checkpoint (dpt_ckpt_prepare, dpt_ckpt_save): this rank's
 * part of the step (its fragment of the manifest), the snapshot of the
 * registered tensors into a buffer kept from one save to the next, and the
 * writer thread that checksums the snapshot and writes it as this rank's
 * shard, durably, while training goes on. The commit is ckpt/commit.c's.
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

void dpt__ckpt_free_snapshot(struct dpt_ckpt *ck)
{
#ifdef HAVE_CUDA
	if (ck->snap_pinned)
		dpt__cuda_unpin(ck->snap);
#endif
	ck->snap_pinned = ck->snap_pin_tried = false;
	free(ck->snap);
	ck->snap = NULL;
	ck->snap_cap = 0;
}

/* Waits until the writer has finished the shard of the save in flight. */
void dpt__ckpt_join_writer(struct dpt_ckpt *ck)
{
	pthread_mutex_lock(&ck->mu);
	while (ck->work)
		pthread_cond_wait(&ck->cv, &ck->mu);
	pthread_mutex_unlock(&ck->mu);
}

void dpt__ckpt_stop_writer(struct dpt_ckpt *ck)
{
	if (ck->writer_pid != getpid())
		return;
	pthread_mutex_lock(&ck->mu);
	ck->quit = true;
	pthread_cond_broadcast(&ck->cv);
	pthread_mutex_unlock(&ck->mu);
	pthread_join(ck->thread, NULL);
	ck->writer_pid = 0;
}

static int copy_run(void *ctx, const struct dpt__run *r)
{
	void **bufs = ctx; /* {src, dst} */
	memcpy((char *)bufs[1] + r->dst, (const char *)bufs[0] + r->src,
	       r->len);
	return 0;
}

int dpt__ckpt_manifest_exists(struct dpt__storage *st, uint64_t step)
{
	char dir[32], key[64];
	uint64_t size;

	dpt__step_dir(step, dir, sizeof(dir));
	snprintf(key, sizeof(key), "%s/%s", dir, DPT__CKPT_MANIFEST);
	return dpt__storage_stat(st, key, &size);
}

/* The background part of a save: checksums, the shard file, durable. */
static int write_shard(struct dpt_ckpt *ck)
{
	struct dpt__manifest *f = &ck->frag;
	struct dpt__storage_writer *w = NULL;
	char dir[32], key[DPT__STORAGE_KEY_MAX];
	uint64_t data_start = 0, t0 = dpt__now_ns(), t1, t2;
	char *hdr = NULL;
	int rc;

	rc = dpt__ckpt_manifest_exists(ck->st, f->step);
	if (rc == 0) {
		dpt__error("step %" PRIu64 " is already committed in '%s': a "
			   "committed step is never overwritten",
			   f->step, dpt__storage_uri(ck->st));
		rc = DPT_EEXIST;
		goto out;
	}
	if (rc != DPT_ENOENT)
		goto out;
	rc = 0;
	if (f->nfiles == 0)
		goto out; /* this rank writes nothing */
	for (size_t i = 0; i < f->ntensors; i++) {
		struct dpt__chunk *c = &f->tensors[i].chunks[0];
		dpt__ckpt_checksum(ck->snap + c->begin, c->length,
				   f->block_size, c->xxh3);
	}
	t1 = dpt__now_ns();
	rc = dpt__shard_header(f, 0, &hdr, &data_start);
	if (rc)
		goto out;
	for (size_t i = 0; i < f->ntensors; i++)
		f->tensors[i].chunks[0].begin += data_start;
	f->files[0].size = data_start + ck->data_len;
	dpt__step_dir(f->step, dir, sizeof(dir));
	snprintf(key, sizeof(key), "%s/%s", dir, f->files[0].name);
	rc = dpt__storage_writer_new(ck->st, key, &w);
	if (!rc)
		rc = dpt__storage_writer_write_at(w, hdr, data_start, 0);
	if (!rc)
		rc = dpt__storage_writer_write_at(w, ck->snap, ck->data_len,
						  data_start);
	t2 = dpt__now_ns();
	if (rc)
		dpt__storage_writer_abort(&w);
	else
		rc = dpt__storage_writer_finish(&w);
	if (!rc)
		dpt__debug("step %" PRIu64 ": rank %d: %" PRIu64 " bytes, "
			   "checksums %.3f s, writes %.3f s, durable %.3f s",
			   f->step, ck->rank, ck->data_len, (t1 - t0) / 1e9,
			   (t2 - t1) / 1e9, (dpt__now_ns() - t2) / 1e9);
out:
	free(hdr);
	return rc;
}

static void *writer_main(void *arg)
{
	struct dpt_ckpt *ck = arg;

	/* Training goes first: where ranks share cores, the checksums of
	 * one rank's writer must not slow another rank's snapshot or its
	 * next steps. A lower priority is always allowed; failure to get it
	 * changes nothing else. */
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid),
			  DPT__CKPT_WRITER_NICE);
	pthread_mutex_lock(&ck->mu);
	for (;;) {
		if (ck->work) {
			pthread_mutex_unlock(&ck->mu);
			ck->io_rc = write_shard(ck);
			if (ck->io_rc)
				snprintf(ck->io_msg, sizeof(ck->io_msg), "%s",
					 dpt_last_error());
			pthread_mutex_lock(&ck->mu);
			ck->work = false;
			pthread_cond_broadcast(&ck->cv);
		} else if (ck->quit) {
			break;
		} else {
			pthread_cond_wait(&ck->cv, &ck->mu);
		}
	}
	pthread_mutex_unlock(&ck->mu);
	return NULL;
}

/* Starts the writer thread if it is not running. */
static int start_writer(struct dpt_ckpt *ck)
{
	int rc;

	if (ck->writer_pid == getpid())
		return 0;
	ck->quit = false;
	rc = pthread_create(&ck->thread, NULL, writer_main, ck);
	if (rc) {
		dpt__error("cannot start the checkpoint writer thread: %s",
			   strerror(rc));
		return DPT_ESYS;
	}
	ck->writer_pid = getpid();
	return 0;
}

/* This rank's part of the step: one chunk per tensor it writes, laid out
 * back to back in the snapshot (offsets relative to the data section). */
static int build_fragment(struct dpt_ckpt *ck, const struct dpt_ckpt_meta *meta)
{
	struct dpt__manifest *f = &ck->frag;
	uint64_t off = 0;
	char name[64];

	dpt__manifest_release(f);
	f->version = DPT__CKPT_VERSION;
	f->step = meta->step;
	f->world_size = (uint32_t)ck->world;
	f->sample_cursor = meta->sample_cursor;
	f->block_size = ck->block;
	f->rng = malloc(meta->rng_len + 1);
	f->user = malloc(meta->user_len + 1);
	if (!f->rng || !f->user)
		return DPT_ENOMEM;
	if (meta->rng_len)
		memcpy(f->rng, meta->rng, meta->rng_len);
	if (meta->user_len)
		memcpy(f->user, meta->user, meta->user_len);
	f->rng_len = meta->rng_len;
	f->user_len = meta->user_len;
	for (size_t i = 0; i < ck->nregs; i++) {
		const struct dpt__ckpt_reg *r = &ck->regs[i];
		struct dpt__tensor_desc *t;
		struct dpt__chunk *c;
		struct dpt__box box;

		if (r->kind == DPT_CKPT_REPLICATED) {
			if (!dpt__box_split(r->ndim, r->shape, ck->world,
					    ck->rank, &box))
				continue;
		} else {
			box = r->local;
			if (dpt__box_volume(&box) == 0)
				continue;
		}
		t = dpt__manifest_add_tensor(f, r->name, r->dtype, r->kind,
					     r->ndim, r->shape);
		c = t ? dpt__tensor_add_chunk(t) : NULL;
		if (!c)
			return DPT_ENOMEM;
		c->box = box;
		c->file = 0;
		c->begin = off;
		c->length = dpt__box_volume(&box) * dpt_dtype_size(r->dtype);
		c->nblocks = (c->length + ck->block - 1) / ck->block;
		c->xxh3 = calloc(c->nblocks, sizeof(uint64_t));
		if (!c->xxh3)
			return DPT_ENOMEM;
		off += c->length;
	}
	ck->data_len = off;
	if (off > 0) {
		f->files = calloc(1, sizeof(*f->files));
		dpt__shard_name((uint32_t)ck->rank, (uint32_t)ck->world, name,
				sizeof(name));
		if (!f->files || !(f->files[0].name = strdup(name)))
			return DPT_ENOMEM;
		f->nfiles = 1;
		f->files[0].rank = (uint32_t)ck->rank;
	}
	return 0;
}

/* The snapshot buffer holds at least SIZE bytes, every page mapped, and
 * pinned when device tensors are registered. */
static int ensure_snapshot(struct dpt_ckpt *ck, uint64_t size)
{
	void *p = NULL;

	if (size > ck->snap_cap) {
		dpt__ckpt_free_snapshot(ck);
		if (posix_memalign(&p, 4096, size))
			return DPT_ENOMEM;
		/* Touch every page now: copying into freshly mapped memory
		 * is ten times slower than into memory already mapped. */
		memset(p, 0, size);
		ck->snap = p;
		ck->snap_cap = size;
	}
#ifdef HAVE_CUDA
	/* Copies from the GPU into pageable memory go through a bounce
	 * buffer of the driver, a fraction of PCIe speed. Pinning takes
	 * time too: once per buffer, tried once. */
	if (ck->device >= 0 && ck->snap && !ck->snap_pin_tried) {
		ck->snap_pin_tried = true;
		ck->snap_pinned =
			dpt__cuda_pin(ck->snap, ck->snap_cap,
				      "checkpoint snapshot buffer") == 0;
	}
#endif
	return 0;
}

/* The bytes this rank snapshots in a world of WORLD. */
static uint64_t snapshot_size(const struct dpt_ckpt *ck, int world, int rank)
{
	uint64_t n = 0;

	for (size_t i = 0; i < ck->nregs; i++) {
		const struct dpt__ckpt_reg *r = &ck->regs[i];
		struct dpt__box box = r->local;

		if (r->kind == DPT_CKPT_REPLICATED &&
		    !dpt__box_split(r->ndim, r->shape, world, rank, &box))
			continue;
		n += dpt__box_volume(&box) * dpt_dtype_size(r->dtype);
	}
	return n;
}

/* The chunk of the fragment with what this rank writes of tensor I, or
 * NULL; *K walks the fragment's tensors, which are in registration
 * order: call it for I = 0, 1, ... */
static const struct dpt__chunk *own_chunk(const struct dpt_ckpt *ck, size_t i,
					  size_t *k)
{
	if (*k >= ck->frag.ntensors ||
	    strcmp(ck->frag.tensors[*k].name, ck->regs[i].name))
		return NULL; /* this rank writes nothing of it */
	return &ck->frag.tensors[(*k)++].chunks[0];
}

/* Copies what this rank writes into the snapshot. The copies of device
 * tensors are queued first, the host tensors are copied while they run,
 * then the device copies are waited for: training may change any tensor
 * once the save returns. */
static int snapshot(struct dpt_ckpt *ck)
{
	int rc = 0;
#ifdef HAVE_CUDA
	struct dpt__cuda_copy cc;

	/* No CUDA call before the first device copy, nor without one. */
	dpt__cuda_copy_begin(&cc, ck->device, false, ck->cuda_stream, false);
	if (ck->device >= 0) {
		for (size_t i = 0, k = 0; i < ck->nregs && !cc.rc; i++) {
			const struct dpt__ckpt_reg *r = &ck->regs[i];
			const struct dpt__chunk *c = own_chunk(ck, i, &k);

			if (!c || r->device < 0)
				continue;
			dpt__cuda_copy_target(&cc, ck->snap + c->begin,
					      r->data);
			dpt__box_runs(&r->local, &c->box,
				      dpt_dtype_size(r->dtype),
				      dpt__cuda_copy_run, &cc);
		}
	}
#endif
	for (size_t i = 0, k = 0; i < ck->nregs; i++) {
		const struct dpt__ckpt_reg *r = &ck->regs[i];
		const struct dpt__chunk *c = own_chunk(ck, i, &k);
		void *bufs[2];

		if (!c || r->device >= 0)
			continue;
		bufs[0] = r->data;
		bufs[1] = ck->snap + c->begin;
		dpt__box_runs(&r->local, &c->box, dpt_dtype_size(r->dtype),
			      copy_run, bufs);
	}
#ifdef HAVE_CUDA
	rc = dpt__cuda_copy_end(&cc);
	if (rc)
		dpt__error("step %" PRIu64 ": the snapshot of the device "
			   "tensors failed (see above)",
			   ck->frag.step);
#endif
	return rc;
}

int dpt_ckpt_prepare(struct dpt_ckpt *ck)
{
	int world = ck->ctx ? dpt_world_size(ck->ctx) : 1;
	int rank = ck->ctx ? dpt_rank(ck->ctx) : 0;

	uint64_t size = snapshot_size(ck, world, rank);
	int rc;

	if (ck->pending)
		return DPT_EBUSY;
	rc = start_writer(ck);
	if (!rc)
		rc = ensure_snapshot(ck, size);
	/* And the storage's buffers for the shard (s3: its parts), with
	 * room for the shard's header (a few KiB of JSON). */
	if (!rc && size)
		rc = dpt__storage_reserve(ck->st, size + (1u << 20));
	return rc;
}

int dpt__ckpt_save(struct dpt_ckpt *ck, const struct dpt_ckpt_meta *meta)
{
	uint64_t t0 = dpt__now_ns();
	int rc;

	if (ck->pending) {
		if (ck->busy == DPT_CKPT_BUSY_REFUSE)
			return DPT_EBUSY;
		rc = dpt_ckpt_wait(ck);
		if (rc)
			return rc;
		t0 = dpt__now_ns(); /* the wait is not the stall of this save */
	}
	if (ck->nregs == 0) {
		dpt__error("dpt_ckpt_save: no tensor is registered");
		return DPT_EINVAL;
	}
	/* From here on, a failure of this rank alone still leaves a save
	 * pending, failed: the next dpt_ckpt_wait takes part in the commit's
	 * collectives like every other rank's, and nobody commits. */
	ck->pending = true;
	ck->last_save_ns = t0;
	ck->save_stall_ns = 0;
	ck->rank = ck->ctx ? dpt_rank(ck->ctx) : 0;
	ck->world = ck->ctx ? dpt_world_size(ck->ctx) : 1;
	rc = build_fragment(ck, meta);
	if (rc)
		goto failed;
	rc = start_writer(ck);
	if (!rc)
		rc = ensure_snapshot(ck, ck->data_len);
	if (!rc)
		rc = snapshot(ck);
	if (rc)
		goto failed;
	ck->io_rc = 0;
	ck->io_msg[0] = '\0';
	pthread_mutex_lock(&ck->mu);
	ck->work = true;
	pthread_cond_signal(&ck->cv);
	pthread_mutex_unlock(&ck->mu);
	ck->stats.saves++;
	ck->stats.bytes_written = ck->data_len;
	ck->stats.stall_ns = dpt__now_ns() - t0;
	ck->save_stall_ns = ck->stats.stall_ns;
	return 0;
failed:
	if (rc == DPT_ENOMEM)
		dpt__error("step %" PRIu64
			   ": out of memory for the snapshot of "
			   "this rank's %" PRIu64 " bytes",
			   meta->step, ck->data_len);
	ck->io_rc = rc;
	snprintf(ck->io_msg, sizeof(ck->io_msg), "%s", dpt_last_error());
	return rc;
}

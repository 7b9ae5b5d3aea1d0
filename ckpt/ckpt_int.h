/*
 * Internals of the checkpoint format (doc/checkpoint-format.md): the
 * manifest in memory and its JSON codec, boxes and the resharding planner,
 * the safetensors header of shard files, and the operations on a run's
 * storage that need no collectives (listing committed steps, reading and
 * verifying chunks, retention). Shared by libdptrain's dpt_ckpt_* API and
 * the `dptrain ckpt` tool.
 */
#ifndef DPT_CKPT_CKPT_INT_H
#define DPT_CKPT_CKPT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>

#include "buf.h"
#include "storage/storage.h"

#define DPT__CKPT_FORMAT	"dptrain-ckpt"
#define DPT__CKPT_VERSION	1
#define DPT__CKPT_MAXDIM	DPT_CKPT_MAX_DIMS
#define DPT__CKPT_HEADER_ALIGN	4096
#define DPT__CKPT_DEFAULT_BLOCK (1u << 20)
/* The largest read (and staging buffer) of a load. */
#define DPT__CKPT_READ_MAX (32u << 20)
#define DPT__CKPT_MANIFEST "manifest.json"
/*
 * The largest manifest that is written or read (doc/checkpoint-format.md,
 * "Size of a manifest"). A manifest holds about 110 bytes per chunk (one
 * chunk of each tensor per rank that writes part of it: tensors times
 * ranks), 19 per further checksum and 150 per tensor: the 900 tensors of
 * a 7B-parameter model with Adam saved by 512 ranks take 47 MiB,
 * ResNet-50 on 16 ranks less than 1 MiB; this bound holds 900 tensors on
 * about 2,600 ranks, what steps could hold before it was one constant.
 * Every rank that loads a step parses its manifest, with about 16 bytes of
 * memory per byte of JSON (jansson's tree, then ours): 4 GiB per rank at
 * this bound. A shared checkpoint root lets another user write the
 * manifest that a job reads, so that is all a planted one may cost (such a
 * user can deny the job its checkpoints anyway); a step whose manifest
 * would be larger is not committed (ckpt/commit.c), never written
 * unreadable.
 */
#define DPT__CKPT_MANIFEST_MAX (256u << 20)
/* A quarantined step's manifest (doc/checkpoint-format.md, "Damaged
 * steps"): the step is no longer committed, and `dptrain ckpt ls` shows it
 * as damaged until gc removes it. */
#define DPT__CKPT_DAMAGED "manifest.damaged.json"

/*
 * --dp-ckpt-every=auto (ckpt/interval.c). The interval in seconds between
 * periodic saves of a job that fails every MTBF_S seconds on average and
 * whose saves cost the training COST_S seconds each: sqrt(2 COST_S
 * MTBF_S), at most DPT_CKPT_EVERY_AUTO_S and MTBF_S, at least MIN_S (the
 * site's min_ckpt_interval, which wins over the cap). COST_S <= 0 (no
 * save measured yet): the cap. MTBF_S <= 0: no failure expected, the
 * cap of 30 minutes.
 */
double dpt__ckpt_auto_interval(double cost_s, double mtbf_s, double min_s);
/* The cost of a save averaged over the saves: AVG <= 0 (none yet) becomes
 * SAMPLE, otherwise the mean of AVG and SAMPLE (an exponentially weighted
 * average that halves the weight of a save at each newer one: the first
 * save, which maps its buffers, is forgotten within a few saves). A
 * negative SAMPLE changes nothing. */
double dpt__ckpt_cost_update(double avg, double sample);

/* A box of a tensor: off[d] .. off[d] + len[d] for each dimension. A
 * 0-dimensional box is a scalar (one element). */
struct dpt__box {
	int ndim;
	uint64_t off[DPT__CKPT_MAXDIM];
	uint64_t len[DPT__CKPT_MAXDIM];
};

struct dpt__chunk {
	struct dpt__box box;
	uint32_t file;	 /* index into the manifest's files */
	uint64_t begin;	 /* byte offset in the file */
	uint64_t length; /* bytes */
	uint64_t *xxh3;	 /* one per block; owned */
	size_t nblocks;
};

struct dpt__tensor_desc {
	char *name; /* owned */
	enum dpt_dtype dtype;
	enum dpt_ckpt_kind kind;
	int ndim;
	uint64_t shape[DPT__CKPT_MAXDIM];
	struct dpt__chunk *chunks; /* owned */
	size_t nchunks;
};

struct dpt__shard_file {
	char *name; /* "rank-00000-of-00004.safetensors"; owned */
	uint32_t rank;
	uint64_t size;
};

struct dpt__manifest {
	int version;
	uint64_t step;
	uint32_t world_size;
	uint64_t sample_cursor;
	unsigned char *rng; /* owned */
	size_t rng_len;
	unsigned char *user; /* owned */
	size_t user_len;
	uint64_t block_size;
	struct dpt__shard_file *files; /* owned */
	size_t nfiles;
	struct dpt__tensor_desc *tensors; /* owned */
	size_t ntensors;
};

/* ------------------------------------------------------------ dtypes */

/* "float32" etc. (manifest) and "F32" etc. (safetensors); NULL if unknown. */
const char *dpt__dtype_name(enum dpt_dtype dt);
const char *dpt__dtype_safetensors(enum dpt_dtype dt);
/* How many safetensors elements one element of DT is in a shard's header
 * (2 for complex128, described as float64 pairs; else 1); 0 if unknown. */
int dpt__dtype_safetensors_parts(enum dpt_dtype dt);
/* 0 and *OUT, or DPT_EINVAL for an unknown name. */
int dpt__dtype_parse(const char *name, enum dpt_dtype *out);

/* ------------------------------------------------------------ manifest */

/* Releases everything M owns and zeroes it; accepts a zeroed manifest. */
void dpt__manifest_release(struct dpt__manifest *m);

/* Appends a tensor (name copied, no chunks) and returns it, or NULL on
 * allocation failure. */
struct dpt__tensor_desc *
dpt__manifest_add_tensor(struct dpt__manifest *m, const char *name,
			 enum dpt_dtype dtype, enum dpt_ckpt_kind kind,
			 int ndim, const uint64_t *shape);
/* Appends a chunk to T (checksums not set) and returns it, or NULL. */
struct dpt__chunk *dpt__tensor_add_chunk(struct dpt__tensor_desc *t);
/* The tensor named NAME, or NULL. */
struct dpt__tensor_desc *dpt__manifest_find(const struct dpt__manifest *m,
					    const char *name);

/*
 * dpt__manifest_encode - M as JSON (keys sorted, compact). *OUT is a
 * NUL-terminated string the caller frees, *LEN its length.
 * Returns 0 or DPT_ENOMEM.
 */
int dpt__manifest_encode(const struct dpt__manifest *m, char **out,
			 size_t *len);

/*
 * dpt__manifest_decode - parse LEN bytes of JSON into *M (which the caller
 * releases with dpt__manifest_release, also on error). Checks the format
 * name, the version and the types and ranges of every field, not the
 * cross-field rules (dpt__manifest_check). ERR (ERRLEN bytes) receives a
 * message on failure. Returns 0, DPT_EVERSION for a newer format version,
 * or DPT_ECORRUPT.
 */
int dpt__manifest_decode(const char *buf, size_t len, struct dpt__manifest *m,
			 char *err, size_t errlen);

/*
 * dpt__manifest_check - the rules of doc/checkpoint-format.md: unique
 * tensor and file names, chunks inside their tensor and file, disjoint and
 * covering, at most one per rank of the world, the right length and number
 * of checksums; in O(n log n) time for n tensors, files or chunks of a
 * tensor (times 2^k for a tensor cut in k dimensions: dpt__chunks_cover).
 * With PARTIAL (a rank's fragment before the merge) coverage and file
 * sizes are not checked, and a tensor has at most one chunk (a rank writes
 * one chunk of each tensor). Returns 0, DPT_ENOMEM, or DPT_ECORRUPT with a
 * message in ERR.
 */
int dpt__manifest_check(const struct dpt__manifest *m, bool partial, char *err,
			size_t errlen);

/* ------------------------------------------------------------ boxes */

uint64_t dpt__box_volume(const struct dpt__box *b);
/* True and *OUT when A and B share at least one element. */
bool dpt__box_intersect(const struct dpt__box *a, const struct dpt__box *b,
			struct dpt__box *out);

/*
 * dpt__chunks_cover - whether the chunks of T cover it exactly, every
 * element in one chunk and none in two (*EXACT), in O(2^k n log n) time
 * for n chunks that cut T in k dimensions (ckpt/cover.c). Every chunk's
 * box must lie inside T. Returns 0, DPT_ENOMEM, or DPT_ERANGE for 2^32 - 1
 * chunks or more.
 */
int dpt__chunks_cover(const struct dpt__tensor_desc *t, bool *exact);

/*
 * dpt__box_split - the part of a replicated tensor of shape SHAPE that
 * RANK writes in a world of WORLD (doc: "Replicated and sharded
 * tensors"). Returns false when RANK writes nothing of it.
 */
bool dpt__box_split(int ndim, const uint64_t *shape, int world, int rank,
		    struct dpt__box *out);

/* A run of contiguous bytes: SRC in the source box's row-major buffer,
 * DST in the destination's. */
struct dpt__run {
	uint64_t src;
	uint64_t dst;
	uint64_t len;
};

typedef int (*dpt__run_fn)(void *ctx, const struct dpt__run *run);

/*
 * dpt__box_runs - calls FN for each run of bytes (elements of ESIZE bytes)
 * that copies the intersection of SRC and DST from a row-major buffer of
 * box SRC to one of box DST, in increasing SRC order, trailing dimensions
 * that both span fully merged into one run. Returns FN's first non-zero
 * return, or 0.
 */
int dpt__box_runs(const struct dpt__box *src, const struct dpt__box *dst,
		  size_t esize, dpt__run_fn fn, void *ctx);

/* Runs merged for a strided copy (cudaMemcpy2DAsync): COUNT rows of LEN
 * bytes, row i from SRC + i * SPITCH to DST + i * DPITCH. */
struct dpt__run2d {
	uint64_t src, dst, len;
	uint64_t spitch, dpitch;
	uint64_t count; /* 0: empty */
};

/*
 * dpt__run2d_add - merges run R into *ACC and returns true when R extends
 * its pattern: the first run of an empty ACC; a run contiguous with a
 * single-row ACC in both buffers (one longer row); the next row at
 * strides of at least LEN and at most MAX_PITCH. Otherwise returns false
 * and leaves ACC unchanged: the caller copies ACC, empties it and adds R
 * again.
 */
bool dpt__run2d_add(struct dpt__run2d *acc, const struct dpt__run *r,
		    uint64_t max_pitch);

/* A step of a load plan: bytes of chunk CHUNK of a tensor to a local
 * slice. */
struct dpt__plan_run {
	size_t chunk;
	struct dpt__run run;
};

struct dpt__plan {
	struct dpt__plan_run *runs;
	size_t n, cap;
};

/*
 * dpt__plan_tensor - appends to PLAN the runs that fill LOCAL (a box of T,
 * stored row-major) from T's chunks, by chunk then source offset.
 * Returns 0, DPT_ENOMEM, or DPT_EINVAL if LOCAL is not inside T.
 */
int dpt__plan_tensor(const struct dpt__tensor_desc *t,
		     const struct dpt__box *local, struct dpt__plan *plan);
void dpt__plan_release(struct dpt__plan *plan);

/* ------------------------------------------------------------ shard files */

/*
 * dpt__shard_header - the safetensors header of the shard file FILE of M,
 * whose chunks' begin offsets are, at the time of the call, relative to
 * the data section (back to back from 0). *OUT (freed by the caller)
 * receives the 8-byte length and the JSON padded with spaces to
 * *DATA_START bytes, a multiple of DPT__CKPT_HEADER_ALIGN; the caller
 * then adds *DATA_START to those begin offsets.
 * Returns 0 or DPT_ENOMEM.
 */
int dpt__shard_header(const struct dpt__manifest *m, uint32_t file, char **out,
		      uint64_t *data_start);

/* ------------------------------------------------------------ run storage */

/* "step-0000001200" into BUF (at least 32 bytes). */
void dpt__step_dir(uint64_t step, char *buf, size_t size);
/* "rank-00001-of-00004.safetensors" into BUF. */
void dpt__shard_name(uint32_t rank, uint32_t world, char *buf, size_t size);

/* What a listing found, each ascending: committed steps (with a
 * manifest), step directories without a manifest or a quarantined one
 * (uncommitted), and steps holding a quarantined manifest (damaged; a
 * step saved again after its quarantine is both committed and damaged). */
struct dpt__step_list {
	uint64_t *committed;
	size_t ncommitted;
	uint64_t *uncommitted;
	size_t nuncommitted;
	uint64_t *damaged;
	size_t ndamaged;
};
void dpt__step_list_release(struct dpt__step_list *l);

/* Lists the steps under PREFIX ("" or "run/"). */
int dpt__ckpt_list(struct dpt__storage *s, const char *prefix,
		   struct dpt__step_list *out);

/*
 * dpt__ckpt_read_manifest - read, decode and check the manifest of STEP.
 * Logs what is wrong, naming the manifest's URI. Returns 0, DPT_ENOENT
 * (not committed), DPT_ECORRUPT, DPT_EVERSION or the storage's error.
 */
int dpt__ckpt_read_manifest(struct dpt__storage *s, uint64_t step,
			    struct dpt__manifest *m);

/*
 * dpt__ckpt_stored_bytes - the bytes of the files of M (the manifest of
 * its step) as S reports their sizes, from one listing of the step: what
 * the step's tensors can hold, whatever M says (a file S lacks counts 0).
 * Returns 0 and *BYTES, DPT_ENOMEM or the storage's error.
 */
int dpt__ckpt_stored_bytes(struct dpt__storage *s,
			   const struct dpt__manifest *m, uint64_t *bytes);

/* "NAME" or "NAME@o0,o1" for chunk C of T, into BUF. */
void dpt__chunk_label(const struct dpt__tensor_desc *t,
		      const struct dpt__chunk *c, char *buf, size_t size);

/*
 * dpt__ckpt_read_blocks - read blocks B0..B1 (excluded) of chunk C of
 * tensor T of M (step STEP) into BUF and verify their checksums. Logs a
 * message naming the step, the shard's URI, the chunk and the block.
 * Returns 0, DPT_ECORRUPT (mismatch, or the shard is shorter than the
 * manifest says), DPT_ENOENT (missing shard) or the storage's error.
 */
int dpt__ckpt_read_blocks(struct dpt__storage *s, const struct dpt__manifest *m,
			  const struct dpt__tensor_desc *t,
			  const struct dpt__chunk *c, uint64_t b0, uint64_t b1,
			  void *buf);

/*
 * dpt__ckpt_verify - read every chunk of STEP and check every checksum.
 * *BAD (may be NULL) receives the number of damaged chunks. WHY (WHYLEN
 * bytes, may be NULL) receives a one-line cause when the step is refused
 * before any chunk is read (its manifest is unusable), else "". Returns 0
 * or the first error (DPT_ECORRUPT, ...), after trying every chunk.
 */
int dpt__ckpt_verify(struct dpt__storage *s, uint64_t step, size_t *bad,
		     char *why, size_t whylen);

/*
 * dpt__ckpt_quarantine - STEP was found damaged (a verified checksum or
 * manifest mismatch, never an I/O error): its manifest's bytes are put
 * under step-N/manifest.damaged.json, then its manifest is deleted (the
 * step is no longer committed: a save may commit the same step number
 * again) and then its other objects, recycled with RECYCLE
 * (dpt__storage_recycle). A step whose manifest is already gone is left
 * as it is. Logs a warning naming the step. Returns 0 or the storage's
 * error (logged): the step then stays committed, as it was.
 */
int dpt__ckpt_quarantine(struct dpt__storage *s, uint64_t step, bool recycle);

/*
 * dpt__ckpt_delete_prefix - delete every object of S whose key starts with
 * PREFIX ("" for all of them). Returns 0 or the first error.
 */
int dpt__ckpt_delete_prefix(struct dpt__storage *s, const char *prefix);

/*
 * dpt__ckpt_retain - retention and garbage collection (doc: "Retention and
 * garbage collection"): keep the KEEP_LAST newest committed steps and the
 * multiples of KEEP_EVERY (0: none), delete the quarantined manifests of
 * damaged steps, uncommitted step directories older than the newest
 * commit and the storage's leftovers older than GC_AGE_S. RECYCLE: the
 * shards of deleted committed steps are recycled for the next save's
 * writers (dpt__storage_recycle) rather than deleted.
 * *DELETED (may be NULL) counts the steps removed.
 */
int dpt__ckpt_retain(struct dpt__storage *s, int keep_last, uint64_t keep_every,
		     long gc_age_s, bool recycle, size_t *deleted);

/* XXH3_64bits of each BLOCK-byte block of BUF (LEN bytes) into OUT. */
void dpt__ckpt_checksum(const void *buf, uint64_t len, uint64_t block,
			uint64_t *out);

#ifdef HAVE_CUDA
/* ------------------------------------------------------------ CUDA */

/* ckpt/cuda.c, built with CUDA only: every CUDA call of the checkpoints
 * (doc/checkpoint-format.md, "Device memory"). Without CUDA nothing is
 * declared, and libdptrain refuses device tensors at registration. */

/*
 * dpt__cuda_device_of - the CUDA device of the tensor NAME whose data is at
 * PTR (NULL, for an empty box: the current device). Logs the reason of a
 * refusal, naming the tensor. Returns 0, DPT_ECUDA (no usable device) or
 * DPT_EINVAL (PTR is not device or managed memory).
 */
int dpt__cuda_device_of(const char *name, const void *ptr, int *device);

/* Pins LEN bytes at BUF (cudaHostRegister) so that copies to and from
 * devices run at full speed. Returns 0, or DPT_ECUDA after a warning that
 * names WHAT: the copies still work through pageable memory, slower. */
int dpt__cuda_pin(void *buf, size_t len, const char *what);
/* Unpins what dpt__cuda_pin pinned at BUF. */
void dpt__cuda_unpin(void *buf);

/* Copies of runs between host buffers and the memory of one device, on
 * one stream, merged into 2-D copies (dpt__run2d_add). */
struct dpt__cuda_copy {
	int device;
	bool to_device; /* host to device (load), else device to host */
	void *stream;	/* cudaStream_t: the caller's, or created */
	void *after;	/* with OWN_STREAM: the caller's, waited for */
	bool own_stream, started, queued;
	int pending;	 /* cudaPeekAtLastError at the first copy */
	int prev_device; /* the caller's current device, restored at the end */
	char *dst;	 /* the buffers of the runs */
	const char *src;
	struct dpt__run2d acc;
	int rc; /* the first error: later copies are skipped */
};

/*
 * dpt__cuda_copy_begin - prepares C for copies to (TO_DEVICE) or from
 * DEVICE on STREAM, the caller's (a cudaStream_t; NULL: the device's
 * legacy default stream), or, with OWN_STREAM, on a non-blocking stream
 * of its own that starts after the work queued on STREAM by then (an
 * event recorded there at the first copy and waited for: a loader thread
 * that copies into a tensor must come after the caller's kernels that
 * still write it). No CUDA call until the first run.
 */
void dpt__cuda_copy_begin(struct dpt__cuda_copy *c, int device, bool to_device,
			  void *stream, bool own_stream);
/* The next runs copy from SRC to DST (one of them device memory). */
void dpt__cuda_copy_target(struct dpt__cuda_copy *c, void *dst,
			   const void *src);
/* Queues the copy of run R (a dpt__run_fn; CTX is the copy). Returns 0 or
 * C's error. */
int dpt__cuda_copy_run(void *ctx, const struct dpt__run *r);
/* Queues what is merged and waits until every queued copy is complete.
 * Returns 0 or DPT_ECUDA (logged). */
int dpt__cuda_copy_sync(struct dpt__cuda_copy *c);
/* dpt__cuda_copy_sync, then releases the stream it created and restores
 * the caller's current device. Returns 0 or C's first error. */
int dpt__cuda_copy_end(struct dpt__cuda_copy *c);
#endif

#endif

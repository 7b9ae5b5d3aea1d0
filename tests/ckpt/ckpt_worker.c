/*
 * A training program's use of the checkpoint API, for the integration
 * tests in tests/ckpt/: it registers a state with every dtype, replicated
 * and sharded tensors (rows, a middle dimension, a scalar), fills it with
 * values that depend on the tensor, the element and the step, saves and
 * loads it through libdptrain with the world size of its job, and checks
 * every byte it loads.
 *
 *   ckpt_worker [options] save URI STEP...   save each step (and wait)
 *   ckpt_worker [options] load URI [STEP]    load the newest (or STEP), check
 *
 * Options: --solo (no coordinator: one process), --scale N (tensor sizes),
 * --run NAME (the run, default "run"),
 * --block BYTES (checksum block), --keep-last K, --keep-every N,
 * --reregister (clear the registrations and register again),
 * --hang-rank R (rank R saves the last step, prints "saving STEP" and
 * sleeps instead of waiting: the test kills it), --refuse (busy policy REFUSE,
 * and a second save without wait must be refused), --device (every tensor in
 * CUDA device memory, on device SLURM_LOCALID modulo the device count),
 * --device-some (every other tensor), --lie-device (host memory
 * registered as device memory: the library must refuse it), --foreign
 * (load: the step was written by another program from this one's
 * tensors, tests/python/torch.sh: check the tensors it holds, found
 * with dpt_ckpt_inspect, not the meta).
 *   ckpt_worker --cuda-probe   prints "cuda=none" (built without CUDA),
 *                              "cuda=built devices=N" or
 *                              "cuda=built devices=0 error=..."
 * Workers read the usual environment (DPTRAIN_COORDINATOR, ...).
 * Output, one line per event: "committed STEP rank=R", "loaded step=S
 * written_by=W rank=R world=N cursor=C user=U ok", "FAIL what: ERROR".
 */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>

#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define MAXT 24

struct tensor {
	const char *name;
	enum dpt_dtype dtype;
	enum dpt_ckpt_kind kind;
	int ndim;
	uint64_t shape[4];
	int split_dim; /* sharded: the dimension cut across ranks */
	uint64_t off[4], cnt[4];
	unsigned char *data; /* host memory: the values, checked */
	void *dev;	     /* device memory registered instead, or NULL */
	size_t bytes;
};

static struct tensor state[MAXT];
static int ntensors;
static bool foreign;

/* Which tensors are registered as device memory. */
enum { ON_HOST, ON_DEVICE, ON_DEVICE_SOME, LIE_DEVICE } placement;

static bool on_device(int i)
{
	return placement == ON_DEVICE || placement == LIE_DEVICE ||
	       (placement == ON_DEVICE_SOME && i % 2 == 0);
}

#ifdef HAVE_CUDA
static int cuda_check(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	printf("FAIL %s: %s\n", what, cudaGetErrorString(e));
	return -1;
}
#endif

/* Host to device (TO_DEV) or back, for the device tensors. */
static int sync_device(bool to_dev)
{
#ifdef HAVE_CUDA
	for (int i = 0; i < ntensors; i++) {
		struct tensor *t = &state[i];
		if (t->dev &&
		    cuda_check(cudaMemcpy(to_dev ? t->dev : t->data,
					  to_dev ? t->data : t->dev, t->bytes,
					  to_dev ? cudaMemcpyHostToDevice
						 : cudaMemcpyDeviceToHost),
			       "cudaMemcpy"))
			return -1;
	}
#else
	(void)to_dev;
#endif
	return 0;
}

static int cuda_probe(void)
{
#ifdef HAVE_CUDA
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess)
		printf("cuda=built devices=0 error=%s\n",
		       cudaGetErrorString(e));
	else
		printf("cuda=built devices=%d\n", n);
#else
	printf("cuda=none\n");
#endif
	return 0;
}

static void add(const char *name, enum dpt_dtype dt, enum dpt_ckpt_kind kind,
		int ndim, const uint64_t *shape, int split_dim)
{
	struct tensor *t = &state[ntensors++];

	t->name = name;
	t->dtype = dt;
	t->kind = kind;
	t->ndim = ndim;
	t->split_dim = split_dim;
	for (int d = 0; d < ndim; d++)
		t->shape[d] = shape[d];
}

static void define_state(uint64_t s)
{
	add("emb", DPT_FLOAT32, DPT_CKPT_REPLICATED, 2,
	    (uint64_t[]){37 * s, 16}, 0);
	add("w.f64", DPT_FLOAT64, DPT_CKPT_REPLICATED, 3, (uint64_t[]){5, 3, 7},
	    0);
	add("w.bf16", DPT_BFLOAT16, DPT_CKPT_REPLICATED, 1,
	    (uint64_t[]){1000 * s}, 0);
	add("w.f16", DPT_FLOAT16, DPT_CKPT_REPLICATED, 2, (uint64_t[]){9, 33},
	    0);
	add("step_count", DPT_INT64, DPT_CKPT_REPLICATED, 0, NULL, 0);
	add("ids", DPT_INT32, DPT_CKPT_SHARDED, 2, (uint64_t[]){101 * s, 3}, 0);
	add("adam.m", DPT_FLOAT32, DPT_CKPT_SHARDED, 1, (uint64_t[]){4099 * s},
	    0);
	add("adam.v", DPT_FLOAT64, DPT_CKPT_SHARDED, 1, (uint64_t[]){2053 * s},
	    0);
	add("mask", DPT_UINT8, DPT_CKPT_SHARDED, 3, (uint64_t[]){6, 50 * s, 4},
	    1);
	add("bf.shard", DPT_BFLOAT16, DPT_CKPT_SHARDED, 2,
	    (uint64_t[]){3, 777 * s}, 1);
	add("f16.shard", DPT_FLOAT16, DPT_CKPT_SHARDED, 1,
	    (uint64_t[]){501 * s}, 0);
	add("i64.shard", DPT_INT64, DPT_CKPT_SHARDED, 1, (uint64_t[]){257 * s},
	    0);
	/* The dtypes PyTorch state dicts add (7 to 14), replicated and
	 * sharded, a scalar among them. */
	add("x.bool", DPT_BOOL, DPT_CKPT_REPLICATED, 2, (uint64_t[]){13 * s, 5},
	    0);
	add("x.i8", DPT_INT8, DPT_CKPT_SHARDED, 1, (uint64_t[]){333 * s}, 0);
	add("x.i16", DPT_INT16, DPT_CKPT_REPLICATED, 1, (uint64_t[]){211 * s},
	    0);
	add("x.u16", DPT_UINT16, DPT_CKPT_SHARDED, 2, (uint64_t[]){4, 97 * s},
	    1);
	add("x.u32", DPT_UINT32, DPT_CKPT_REPLICATED, 0, NULL, 0);
	add("x.u64", DPT_UINT64, DPT_CKPT_SHARDED, 1, (uint64_t[]){129 * s}, 0);
	add("x.c64", DPT_COMPLEX64, DPT_CKPT_REPLICATED, 2,
	    (uint64_t[]){7, 19 * s}, 0);
	add("x.c128", DPT_COMPLEX128, DPT_CKPT_SHARDED, 2,
	    (uint64_t[]){61 * s, 3}, 0);
}

/* The bytes of element I (global row-major index) of T at STEP. */
static void value(const struct tensor *t, uint64_t i, uint64_t step,
		  unsigned char *out)
{
	uint64_t seed = XXH3_64bits(t->name, strlen(t->name)) ^
			(step * 0x9e3779b97f4a7c15ull);
	uint64_t h[2] = {XXH3_64bits_withSeed(&i, sizeof(i), seed),
			 XXH3_64bits_withSeed(&i, sizeof(i), ~seed)};

	memcpy(out, h, dpt_dtype_size(t->dtype)); /* up to 16 bytes */
	if (t->dtype == DPT_BOOL)
		out[0] &= 1;
}

/* Calls FN for each element of T's local box: global index, local index. */
static bool each(const struct tensor *t,
		 bool (*fn)(const struct tensor *, uint64_t, uint64_t, void *),
		 void *ctx)
{
	uint64_t idx[4] = {0}, n = 1;

	for (int d = 0; d < t->ndim; d++)
		n *= t->cnt[d];
	for (uint64_t local = 0; local < n; local++) {
		uint64_t g = 0, rem = local;
		for (int d = t->ndim - 1; d >= 0; d--) {
			idx[d] = rem % t->cnt[d];
			rem /= t->cnt[d];
		}
		for (int d = 0; d < t->ndim; d++)
			g = g * t->shape[d] + t->off[d] + idx[d];
		if (!fn(t, g, local, ctx))
			return false;
	}
	return true;
}

static bool fill_one(const struct tensor *t, uint64_t g, uint64_t local,
		     void *ctx)
{
	value(t, g, *(uint64_t *)ctx,
	      t->data + local * dpt_dtype_size(t->dtype));
	return true;
}

static bool check_one(const struct tensor *t, uint64_t g, uint64_t local,
		      void *ctx)
{
	size_t esz = dpt_dtype_size(t->dtype);
	unsigned char want[16];

	value(t, g, *(uint64_t *)ctx, want);
	if (memcmp(want, t->data + local * esz, esz)) {
		printf("FAIL check: tensor '%s' element %" PRIu64 " differs\n",
		       t->name, g);
		return false;
	}
	return true;
}

static int setup(struct dpt_ckpt *ck, int rank, int world)
{
	for (int i = 0; i < ntensors; i++) {
		struct tensor *t = &state[i];
		size_t n = 1;
		int rc;

		for (int d = 0; d < t->ndim; d++) {
			t->off[d] = 0;
			t->cnt[d] = t->shape[d];
		}
		if (t->kind == DPT_CKPT_SHARDED) {
			int d = t->split_dim;
			uint64_t e = t->shape[d];
			t->off[d] = e * (uint64_t)rank / (uint64_t)world;
			t->cnt[d] = e * (uint64_t)(rank + 1) / (uint64_t)world -
				    t->off[d];
		}
		for (int d = 0; d < t->ndim; d++)
			n *= t->cnt[d];
		t->bytes = n * dpt_dtype_size(t->dtype);
		if (!t->data)
			t->data = malloc(t->bytes + 1);
#ifdef HAVE_CUDA
		if (placement != LIE_DEVICE && on_device(i) && !t->dev &&
		    cuda_check(cudaMalloc(&t->dev, t->bytes + 1), "cudaMalloc"))
			return DPT_ECUDA;
#endif
		rc = dpt_ckpt_register(
			ck,
			&(struct dpt_ckpt_tensor){
				.name = t->name,
				.dtype = t->dtype,
				.kind = t->kind,
				.ndim = t->ndim,
				.shape = t->shape,
				.offset = t->kind == DPT_CKPT_SHARDED ? t->off
								      : NULL,
				.count = t->kind == DPT_CKPT_SHARDED ? t->cnt
								     : NULL,
				.data = t->dev ? t->dev : t->data,
				.memory = on_device(i) ? DPT_CKPT_DEVICE
						       : DPT_CKPT_HOST});
		if (rc)
			return rc;
	}
	return 0;
}

/* --foreign: forget the tensors that the newest step does not hold (a
 * program that cannot hold some dtypes saved the others). */
static int keep_foreign(struct dpt_ckpt *ck)
{
	struct dpt_ckpt_contents c;
	int kept = 0, rc;

	rc = dpt_ckpt_inspect(ck, DPT_CKPT_LATEST, &c);
	if (rc)
		return rc;
	for (int i = 0; i < ntensors; i++) {
		bool held = false;

		for (size_t j = 0; j < c.ntensors && !held; j++)
			held = !strcmp(c.tensors[j].name, state[i].name);
		if (held)
			state[kept++] = state[i];
		else
			printf("skipped %s: not in step %" PRIu64 "\n",
			       state[i].name, c.step);
	}
	ntensors = kept;
	return 0;
}

static int fail(const char *what, int rc)
{
	printf("FAIL %s: %s (%s)\n", what, dpt_err_name(rc), dpt_strerror(rc));
	fflush(stdout);
	return 1;
}

int main(int argc, char **argv)
{
	struct dpt_ckpt_opts opts;
	struct dpt_ckpt *ck = NULL;
	struct dpt_ctx *ctx = NULL;
	bool solo = false, refuse = false, reregister = false;
	int hang_rank = -1;
	uint64_t scale = 1;
	int i = 1, rc, rank = 0, world = 1, status = 0;
	const char *mode, *uri;

	setvbuf(stdout, NULL, _IOLBF, 0);
	dpt_ckpt_opts_default(&opts);
	opts.run = "run";
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		if (!strcmp(argv[i], "--solo"))
			solo = true;
		else if (!strcmp(argv[i], "--hang-rank") && i + 1 < argc)
			hang_rank = (int)strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--refuse"))
			refuse = true;
		else if (!strcmp(argv[i], "--reregister"))
			reregister = true;
		else if (!strcmp(argv[i], "--device"))
			placement = ON_DEVICE;
		else if (!strcmp(argv[i], "--device-some"))
			placement = ON_DEVICE_SOME;
		else if (!strcmp(argv[i], "--lie-device"))
			placement = LIE_DEVICE;
		else if (!strcmp(argv[i], "--foreign"))
			foreign = true;
		else if (!strcmp(argv[i], "--cuda-probe"))
			return cuda_probe();
		else if (!strcmp(argv[i], "--scale") && i + 1 < argc)
			scale = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--run") && i + 1 < argc)
			opts.run = argv[++i];
		else if (!strcmp(argv[i], "--block") && i + 1 < argc)
			opts.block_size = strtoull(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--keep-last") && i + 1 < argc)
			opts.keep_last = (int)strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--keep-every") && i + 1 < argc)
			opts.keep_every = strtoull(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "ckpt_worker: unknown option '%s'\n",
				argv[i]);
			return 2;
		}
	}
	if (argc - i < 2) {
		fprintf(stderr, "usage: ckpt_worker [options] save|load URI "
				"[STEP...]\n");
		return 2;
	}
	mode = argv[i];
	uri = argv[i + 1];
	opts.uri = uri;
	if (refuse)
		opts.busy = DPT_CKPT_BUSY_REFUSE;
	define_state(scale);
	if (!solo) {
		rc = dpt_init(&ctx, NULL);
		if (rc)
			return fail("init", rc);
		rank = dpt_rank(ctx);
		world = dpt_world_size(ctx);
	}
#ifdef HAVE_CUDA
	if (placement == ON_DEVICE || placement == ON_DEVICE_SOME) {
		const char *local = getenv("SLURM_LOCALID");
		int ndev = 0;

		if (cuda_check(cudaGetDeviceCount(&ndev),
			       "cudaGetDeviceCount") ||
		    cuda_check(
			    cudaSetDevice(local ? (int)strtol(local, NULL, 10) %
							  ndev
						: 0),
			    "cudaSetDevice")) {
			status = 1;
			goto out;
		}
	}
#endif
	rc = dpt_ckpt_new(&ck, ctx, &opts);
	if (!rc && foreign)
		rc = keep_foreign(ck);
	if (!rc)
		rc = setup(ck, rank, world);
	if (!rc && reregister) {
		/* As after a rejoin: forget the tensors, register them again;
		 * registering a name twice without it is refused. */
		if (setup(ck, rank, world) != DPT_EINVAL)
			printf("FAIL a second registration was accepted\n");
		rc = dpt_ckpt_clear(ck);
		if (!rc)
			rc = setup(ck, rank, world);
	}
	if (rc) {
		status = fail("setup", rc);
		goto out;
	}
	if (!strcmp(mode, "save")) {
		rc = dpt_ckpt_prepare(ck);
		if (rc) {
			status = fail("prepare", rc);
			goto out;
		}
		for (int k = i + 2; k < argc; k++) {
			uint64_t step = strtoull(argv[k], NULL, 10);
			char user[64];
			uint64_t rng[4] = {step, step * 3, 42, 7};

			for (int t = 0; t < ntensors; t++)
				each(&state[t], fill_one, &step);
			if (sync_device(true)) {
				status = 1;
				goto out;
			}
			snprintf(user, sizeof(user), "user-blob-%" PRIu64,
				 step);
			rc = dpt_ckpt_save(
				ck, &(struct dpt_ckpt_meta){
					    .step = step,
					    .sample_cursor = step * 1000 + 17,
					    .rng = rng,
					    .rng_len = sizeof(rng),
					    .user = user,
					    .user_len = strlen(user)});
			if (rc) {
				status = fail("save", rc);
				goto out;
			}
			if (refuse) {
				rc = dpt_ckpt_save(ck,
						   &(struct dpt_ckpt_meta){
							   .step = step + 1});
				printf("second save: %s\n", dpt_err_name(rc));
			}
			if (hang_rank == rank && k == argc - 1) {
				printf("saving %" PRIu64 " rank=%d\n", step,
				       rank);
				sleep(600);
			}
			rc = dpt_ckpt_wait(ck);
			if (rc) {
				status = fail("wait", rc);
				goto out;
			}
			printf("committed %" PRIu64 " rank=%d\n", step, rank);
		}
	} else if (!strcmp(mode, "load")) {
		struct dpt_ckpt_info info;
		uint64_t step = DPT_CKPT_LATEST;
		bool good = true;

		if (i + 2 < argc && strcmp(argv[i + 2], "latest"))
			step = strtoull(argv[i + 2], NULL, 10);
		for (int t = 0; t < ntensors; t++)
			memset(state[t].data, 0xee, state[t].bytes);
		if (sync_device(true)) {
			status = 1;
			goto out;
		}
		rc = dpt_ckpt_load(ck, step, &info);
		if (rc) {
			status = fail("load", rc);
			goto out;
		}
		if (sync_device(false)) {
			status = 1;
			goto out;
		}
		for (int t = 0; t < ntensors; t++)
			good = each(&state[t], check_one, &info.step) && good;
		if (!foreign &&
		    (info.rng_len != 32 ||
		     ((const uint64_t *)info.rng)[0] != info.step)) {
			printf("FAIL check: rng blob\n");
			good = false;
		}
		if (!good) {
			status = 1;
			goto out;
		}
		struct dpt_ckpt_stats st;
		dpt_ckpt_stats(ck, &st);
		printf("loaded step=%" PRIu64 " written_by=%u rank=%d world=%d "
		       "cursor=%" PRIu64 " user=%.*s needed=%" PRIu64
		       " read=%" PRIu64 " ok\n",
		       info.step, info.world_size, rank, world,
		       info.sample_cursor, foreign ? 0 : (int)info.user_len,
		       (const char *)info.user, st.bytes_needed, st.bytes_read);
	} else {
		fprintf(stderr, "ckpt_worker: unknown mode '%s'\n", mode);
		status = 2;
	}
out:
	dpt_ckpt_destroy(&ck);
	for (int t = 0; t < ntensors; t++) {
		free(state[t].data);
#ifdef HAVE_CUDA
		if (state[t].dev)
			cudaFree(state[t].dev);
#endif
	}
	if (ctx)
		dpt_finalize(&ctx);
	return status;
}

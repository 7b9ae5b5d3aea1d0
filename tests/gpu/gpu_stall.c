/*
 * The training stall of a device-memory checkpoint (tests/gpu/run's
 * figure): BYTES of CUDA device tensors registered with a checkpoint of
 * one process (no coordinator: dpt_ckpt_new with no context), snapshot by
 * dpt_ckpt_save, against its physical peer in the same run: a plain
 * cudaMemcpyAsync of the same bytes from the device into pinned host
 * memory, on one stream, waited for. Both are timed ROUNDS times after a
 * warm-up (the checkpoint's first save pins its buffers, the first copy
 * pays for nothing the second does not), and the medians are compared.
 * Every save is committed (dpt_ckpt_wait) and the last one is loaded back
 * into zeroed device tensors and compared with the originals on the
 * device, so that the stall is that of a checkpoint that works.
 *
 *   gpu_stall URI [BYTES [ROUNDS]]      (defaults: 1 GiB, 3)
 *
 * 1 GiB fits tests/gpu/run's budget with room to spare on a GPU machine
 * whose disk writes a few hundred MB/s (four saves and a load); a larger
 * BYTES (DPT_GPU_STALL_BYTES for tests/gpu/run) gives a steadier figure
 * where the time is there.
 *
 * Prints "stall bytes=B save_s=S memcpy_s=M ratio=S/M" and exits 0, or a
 * line starting with FAIL and exits 1.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>

#define NTENSORS   16
#define MAX_ROUNDS 9

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double median(double *v, int n)
{
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int cuda_failed(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	printf("FAIL %s: %s\n", what, cudaGetErrorString(e));
	return 1;
}

int main(int argc, char **argv)
{
	size_t bytes = (size_t)1 << 30, each;
	int rounds = 3, rc = 1, drc;
	double save_s[MAX_ROUNDS], copy_s[MAX_ROUNDS];
	char name[NTENSORS][16];
	unsigned char *dev[NTENSORS] = {0}, *host = NULL, *pinned = NULL;
	struct dpt_ckpt *ck = NULL;
	struct dpt_ckpt_opts opts;
	struct dpt_ckpt_stats st;
	cudaStream_t stream = NULL;

	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: gpu_stall URI [BYTES [ROUNDS]]\n");
		return 2;
	}
	if (argc > 2) {
		char *end;
		bytes = strtoull(argv[2], &end, 10);
		if (*end)
			bytes = 0;
	}
	if (argc > 3) {
		char *end;
		long v = strtol(argv[3], &end, 10);
		rounds = *end || v < 1 || v > MAX_ROUNDS ? 0 : (int)v;
	}
	if (bytes < NTENSORS || rounds < 1) {
		fprintf(stderr, "gpu_stall: bad BYTES or ROUNDS\n");
		return 2;
	}
	each = bytes / NTENSORS;
	bytes = each * NTENSORS;

	if (cuda_failed(
		    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
		    "cudaStreamCreate"))
		goto out;
	for (int i = 0; i < NTENSORS; i++) {
		if (cuda_failed(cudaMalloc((void **)&dev[i], each),
				"cudaMalloc") ||
		    cuda_failed(cudaMemset(dev[i], 17 * i + 1, each),
				"cudaMemset"))
			goto out;
	}
	if (cuda_failed(cudaMemset(dev[0], 0xa5, each / 2), "cudaMemset"))
		goto out;

	dpt_ckpt_opts_default(&opts);
	opts.uri = argv[1];
	opts.run = "stall";
	opts.keep_last = 1;
	opts.cuda_stream = stream;
	drc = dpt_ckpt_new(&ck, NULL, &opts);
	for (int i = 0; !drc && i < NTENSORS; i++) {
		uint64_t shape[1] = {each / sizeof(float)};
		snprintf(name[i], sizeof(name[i]), "t%02d", i);
		drc = dpt_ckpt_register(ck, &(struct dpt_ckpt_tensor){
						    .name = name[i],
						    .dtype = DPT_FLOAT32,
						    .kind = DPT_CKPT_REPLICATED,
						    .ndim = 1,
						    .shape = shape,
						    .data = dev[i],
						    .memory = DPT_CKPT_DEVICE});
	}
	if (!drc)
		drc = dpt_ckpt_prepare(ck);
	for (int r = 0; !drc && r <= rounds; r++) {
		drc = dpt_ckpt_save(
			ck, &(struct dpt_ckpt_meta){.step = (uint64_t)r + 1});
		dpt_ckpt_stats(ck, &st);
		if (!drc)
			drc = dpt_ckpt_wait(ck);
		if (r > 0)
			save_s[r - 1] = (double)st.stall_ns / 1e9;
	}
	if (drc) {
		printf("FAIL checkpoint: %s\n", dpt_strerror(drc));
		goto out;
	}

	/* The last save back into zeroed tensors, compared on the device. */
	for (int i = 0; i < NTENSORS; i++)
		if (cuda_failed(cudaMemset(dev[i], 0, each), "cudaMemset"))
			goto out;
	drc = dpt_ckpt_load(ck, DPT_CKPT_LATEST, NULL);
	if (drc) {
		printf("FAIL load: %s\n", dpt_strerror(drc));
		goto out;
	}
	host = malloc(each);
	if (!host) {
		printf("FAIL no memory\n");
		goto out;
	}
	for (int i = 0; i < NTENSORS; i++) {
		if (cuda_failed(cudaMemcpy(host, dev[i], each,
					   cudaMemcpyDeviceToHost),
				"cudaMemcpy"))
			goto out;
		for (size_t k = 0; k < each; k++) {
			unsigned char want =
				i == 0 && k < each / 2
					? 0xa5
					: (unsigned char)(17 * i + 1);
			if (host[k] != want) {
				printf("FAIL tensor %s byte %zu is %#x after "
				       "the load, "
				       "want %#x\n",
				       name[i], k, host[k], want);
				goto out;
			}
		}
	}
	free(host);
	host = NULL;
	dpt_ckpt_destroy(&ck);

	/* The peer: the same bytes into pinned memory with one stream. */
	if (cuda_failed(cudaMallocHost((void **)&pinned, bytes),
			"cudaMallocHost"))
		goto out;
	for (int r = 0; r <= rounds; r++) {
		double t0 = now_s();
		for (int i = 0; i < NTENSORS; i++)
			if (cuda_failed(cudaMemcpyAsync(
						pinned + (size_t)i * each,
						dev[i], each,
						cudaMemcpyDeviceToHost, stream),
					"cudaMemcpyAsync"))
				goto out;
		if (cuda_failed(cudaStreamSynchronize(stream),
				"cudaStreamSynchronize"))
			goto out;
		if (r > 0)
			copy_s[r - 1] = now_s() - t0;
	}
	{
		double s = median(save_s, rounds), m = median(copy_s, rounds);
		printf("stall bytes=%zu save_s=%.4f memcpy_s=%.4f ratio=%.2f\n",
		       bytes, s, m, s / m);
	}
	rc = 0;
out:
	dpt_ckpt_destroy(&ck);
	free(host);
	if (pinned)
		cudaFreeHost(pinned);
	for (int i = 0; i < NTENSORS; i++)
		cudaFree(dev[i]);
	if (stream)
		cudaStreamDestroy(stream);
	return rc;
}

/*
 * Device-memory tensors of the checkpoints (doc/checkpoint-format.md,
 * "Device memory"): every CUDA call of ckpt/ is here, and this file is
 * built only with CUDA. Without it, ckpt/ckpt.c refuses device tensors
 * when they are registered, so that nothing else needs them.
 */
#include "config.h"

#include <stdint.h>

#include <dptrain/error.h>

#include "ckpt_int.h"
#include "cuda_rt.h"
#include "log.h"

/* The largest pitch of a 2-D copy: cudaDeviceProp.memPitch, 2^31 - 1 on
 * every GPU of the last decade. Rows further apart are copied one by one. */
#define MAX_PITCH INT32_MAX

int dpt__cuda_device_of(const char *name, const void *ptr, int *device)
{
	struct cudaPointerAttributes a;
	cudaError_t e, pending = dpt__cuda_pending();
	int n = 0;

	e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n < 1) {
		dpt__error("checkpoint tensor '%s' is in device memory, but no "
			   "cuda device is usable here: %s (run where a GPU is "
			   "visible, or register a host copy)",
			   name,
			   e != cudaSuccess ? cudaGetErrorString(e)
					    : "no device");
		return DPT_ECUDA;
	}
	if (!ptr) {
		e = cudaGetDevice(device);
	} else {
		e = cudaPointerGetAttributes(&a, ptr);
		if (e == cudaSuccess && a.type != cudaMemoryTypeDevice &&
		    a.type != cudaMemoryTypeManaged) {
			dpt__error("checkpoint tensor '%s' is registered as "
				   "device "
				   "memory, but cuda says %p is host memory: "
				   "register it with .memory = DPT_CKPT_HOST",
				   name, ptr);
			return DPT_EINVAL;
		}
		*device = a.device;
	}
	if (e != cudaSuccess) {
		dpt__error("checkpoint tensor '%s': cannot find its cuda "
			   "device: %s",
			   name, cudaGetErrorString(e));
		dpt__cuda_forget(pending);
		return DPT_ECUDA;
	}
	return 0;
}

int dpt__cuda_pin(void *buf, size_t len, const char *what)
{
	cudaError_t pending = dpt__cuda_pending();
	cudaError_t e = cudaHostRegister(buf, len, cudaHostRegisterPortable);

	if (e == cudaSuccess)
		return 0;
	dpt__cuda_forget(pending);
	dpt__warn("cannot pin the %s (%zu bytes) for copies with the GPU: %s; "
		  "they go through pageable memory, slower",
		  what, len, cudaGetErrorString(e));
	return DPT_ECUDA;
}

void dpt__cuda_unpin(void *buf)
{
	cudaError_t pending = dpt__cuda_pending();

	if (cudaHostUnregister(buf) != cudaSuccess)
		dpt__cuda_forget(pending);
}

static int fail(struct dpt__cuda_copy *c, const char *what, cudaError_t e)
{
	dpt__cuda_forget((cudaError_t)c->pending);
	if (!c->rc)
		dpt__error("checkpoint copies %s cuda device %d: %s failed: %s",
			   c->to_device ? "to" : "from", c->device, what,
			   cudaGetErrorString(e));
	c->rc = DPT_ECUDA;
	return c->rc;
}

void dpt__cuda_copy_begin(struct dpt__cuda_copy *c, int device, bool to_device,
			  void *stream, bool own_stream)
{
	*c = (struct dpt__cuda_copy){.device = device,
				     .to_device = to_device,
				     .stream = own_stream ? NULL : stream,
				     .after = own_stream ? stream : NULL,
				     .own_stream = own_stream};
}

/* The first copy: the device becomes current (the legacy default stream
 * and a new stream are the current device's), the stream is created and
 * ordered after the caller's. */
static int start(struct dpt__cuda_copy *c)
{
	const char *what;
	cudaStream_t s;
	cudaEvent_t ev;
	cudaError_t e;

	c->started = true;
	c->pending = (int)dpt__cuda_pending();
	e = cudaGetDevice(&c->prev_device);
	if (e != cudaSuccess) {
		c->prev_device = -1;
		return fail(c, "cudaGetDevice", e);
	}
	if (c->prev_device != c->device) {
		e = cudaSetDevice(c->device);
		if (e != cudaSuccess)
			return fail(c, "cudaSetDevice", e);
	}
	if (c->own_stream) {
		e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
		if (e != cudaSuccess) {
			c->own_stream = false;
			return fail(c, "cudaStreamCreateWithFlags", e);
		}
		c->stream = s;
		e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
		if (e != cudaSuccess)
			return fail(c, "cudaEventCreateWithFlags", e);
		e = dpt__cuda_order_after(s, c->after, ev, &what);
		/* Released once the wait is satisfied; recorded or not. */
		(void)cudaEventDestroy(ev);
		if (e != cudaSuccess)
			return fail(c, what, e);
	} else if (!c->stream) {
		c->stream = cudaStreamLegacy;
	}
	return 0;
}

/* Queues the copy of the merged runs, and empties them. */
static int flush(struct dpt__cuda_copy *c)
{
	const struct dpt__run2d *a = &c->acc;
	cudaError_t e;

	if (a->count == 0 || c->rc)
		return c->rc;
	c->queued = true;
	if (a->count == 1)
		e = cudaMemcpyAsync(c->dst + a->dst, c->src + a->src, a->len,
				    c->to_device ? cudaMemcpyHostToDevice
						 : cudaMemcpyDeviceToHost,
				    (cudaStream_t)c->stream);
	else
		e = cudaMemcpy2DAsync(c->dst + a->dst, a->dpitch,
				      c->src + a->src, a->spitch, a->len,
				      a->count,
				      c->to_device ? cudaMemcpyHostToDevice
						   : cudaMemcpyDeviceToHost,
				      (cudaStream_t)c->stream);
	c->acc.count = 0;
	if (e != cudaSuccess)
		return fail(c,
			    a->count == 1 ? "cudaMemcpyAsync"
					  : "cudaMemcpy2DAsync",
			    e);
	return 0;
}

void dpt__cuda_copy_target(struct dpt__cuda_copy *c, void *dst, const void *src)
{
	(void)flush(c);
	c->dst = dst;
	c->src = src;
}

int dpt__cuda_copy_run(void *ctx, const struct dpt__run *r)
{
	struct dpt__cuda_copy *c = ctx;

	if (!c->started)
		(void)start(c);
	if (c->rc)
		return c->rc;
	if (dpt__run2d_add(&c->acc, r, MAX_PITCH))
		return 0;
	if (flush(c))
		return c->rc;
	(void)dpt__run2d_add(&c->acc, r,
			     MAX_PITCH); /* an empty one takes any */
	return 0;
}

int dpt__cuda_copy_sync(struct dpt__cuda_copy *c)
{
	cudaError_t e;

	(void)flush(c);
	/* With nothing queued there is nothing to wait for, and the
	 * caller's stream is not waited for either: its other work is not
	 * the checkpoint's. */
	if (!c->queued)
		return c->rc;
	c->queued = false;
	e = cudaStreamSynchronize((cudaStream_t)c->stream);
	if (e != cudaSuccess)
		return fail(c, "cudaStreamSynchronize", e);
	return c->rc;
}

int dpt__cuda_copy_end(struct dpt__cuda_copy *c)
{
	int rc = dpt__cuda_copy_sync(c);

	if (c->own_stream && c->stream)
		(void)cudaStreamDestroy((cudaStream_t)c->stream);
	if (c->started && c->prev_device >= 0 && c->prev_device != c->device)
		(void)cudaSetDevice(c->prev_device);
	c->stream = NULL;
	c->started = false;
	return rc;
}

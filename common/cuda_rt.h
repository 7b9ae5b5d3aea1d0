/*
 * What every file that calls the CUDA runtime shares (built only with
 * CUDA): the thread's "last error" rule, and the order of dptrain's own
 * streams after the caller's.
 *
 * The last error. A failed runtime call leaves its error as the calling
 * thread's last error, which the next cudaGetLastError returns and
 * clears; PyTorch checks it after its kernel launches. dptrain reports
 * its own failures through return values, so it clears what its own
 * failed call left, but only when no error was pending at the start of
 * its call (cudaPeekAtLastError then): a pending error is the caller's,
 * from an asynchronous launch it has not checked yet, and clearing it
 * would hide that failure from the caller. Where one was pending it stays
 * pending (it may then be dptrain's error that the caller sees: an error
 * reported once too often, never one lost).
 */
#ifndef DPT_COMMON_CUDA_RT_H
#define DPT_COMMON_CUDA_RT_H

#include <cuda_runtime_api.h>

/* The thread's pending error at the start of a call (cudaSuccess: none). */
static inline cudaError_t dpt__cuda_pending(void)
{
	return cudaPeekAtLastError();
}

/* After a failed call of dptrain's own: clear the error it left, unless
 * PENDING (dpt__cuda_pending at the start) says one was there before. */
static inline void dpt__cuda_forget(cudaError_t pending)
{
	if (pending == cudaSuccess)
		(void)cudaGetLastError();
}

/*
 * Makes the work queued from now on OURS (a stream of dptrain's) start
 * only after the work queued so far on the caller's stream AFTER (a
 * cudaStream_t; NULL: the legacy default stream, which is ordered after
 * every blocking stream of the current device), through EVENT (created
 * with cudaEventDisableTiming). Nothing waits on the host. Returns the
 * CUDA error, and what failed in *WHAT.
 */
static inline cudaError_t dpt__cuda_order_after(cudaStream_t ours, void *after,
						cudaEvent_t event,
						const char **what)
{
	cudaError_t e = cudaEventRecord(event, after ? (cudaStream_t)after
						     : cudaStreamLegacy);

	*what = "cudaEventRecord on the caller's stream";
	if (e != cudaSuccess)
		return e;
	*what = "cudaStreamWaitEvent";
	return cudaStreamWaitEvent(ours, event, 0);
}

#endif

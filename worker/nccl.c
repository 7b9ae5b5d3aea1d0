#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dptrain/error.h>

#include "clock.h"
#include "gpu_probe.h"
#include "hash.h"
#include "log.h"
#include "nccl.h"

#ifdef HAVE_NCCL

#include "cuda_rt.h"
/* nccl.h declares ncclGroupStart() and a few others without (void); our
 * -Wstrict-prototypes must not fail the build on a header we do not own. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <nccl.h>
#pragma GCC diagnostic pop

struct dpt__nccl_comm {
	ncclComm_t comm;
	cudaStream_t stream;
	/* The caller's stream (NULL: the legacy default stream), whose
	 * queued work every collective waits for through READY. */
	void *after;
	cudaEvent_t ready;
	int device;
	int rank, world;
	atomic_int *abort;
	int dead;	/* aborted: the communicator is gone */
	int stuck;	/* ncclCommAbort did not return (or could not start):
			 * leave the device alone */
	int timeout_ms; /* bound of one collective, staging included */
	/* Device memory that host buffers are staged through, kept across
	 * calls: a cudaMalloc and a cudaFree per collective would cost more
	 * than the few KiB they move, and cudaFree waits for the whole
	 * device, where a stuck kernel would hold it without a bound. */
	char *stage;
	size_t stage_size;
};

/* NCCL's unique ID is an opaque 128-byte blob; the protocol relays it as
 * such. */
_Static_assert(sizeof(ncclUniqueId) == DPT_NCCL_ID_SIZE,
	       "ncclUniqueId is not 128 bytes");

/* Between two polls: short enough for a collective's latency, long enough
 * not to burn the core that feeds the GPU. */
static void pause_briefly(void)
{
	struct timespec ts = {.tv_sec = 0, .tv_nsec = 20000};
	nanosleep(&ts, NULL);
}

int dpt__nccl_available(void)
{
	cudaError_t pending;
	int n = 0;

	/* Asking CUDA initialises its driver (a few hundred ms, and memory)
	 * in every process of a CPU-only job on a node without GPUs: the
	 * device files answer that first. */
	if (!dpt__gpu_device_files("/dev", getenv("CUDA_VISIBLE_DEVICES")))
		return 0;
	pending = dpt__cuda_pending();
	if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0)
		return 1;
	dpt__cuda_forget(pending);
	return 0;
}

int dpt__nccl_unique_id(uint8_t id[DPT_NCCL_ID_SIZE])
{
	ncclUniqueId uid;
	ncclResult_t r = ncclGetUniqueId(&uid);

	if (r != ncclSuccess) {
		dpt__error("ncclGetUniqueId failed: %s", ncclGetErrorString(r));
		return DPT_ENCCL;
	}
	memcpy(id, &uid, DPT_NCCL_ID_SIZE);
	return 0;
}

/* How long ncclCommAbort may take before this rank goes on without it. */
#define ABORT_MS 10000

/* One ncclCommAbort in a thread of its own; the thread and the waiter
 * each hold a reference, and the last one frees it. */
struct abort_job {
	ncclComm_t comm;
	atomic_int done;
	atomic_int refs;
};

static void *abort_thread(void *arg)
{
	struct abort_job *j = arg;

	ncclCommAbort(j->comm);
	atomic_store(&j->done, 1);
	if (atomic_fetch_sub(&j->refs, 1) == 1)
		free(j);
	return NULL;
}

/*
 * Abort the communicator, waiting at most ABORT_MS. ncclCommAbort stops
 * NCCL's kernels and proxy threads and returns; should it not (a device
 * that no longer answers), the rank must still get out to rejoin or to
 * exit, as the CPU backend's abort never blocks: the call is left
 * running in its thread, and the communicator is marked stuck so that
 * its destruction does not wait on the device either (cudaFree and
 * cudaStreamDestroy may).
 */
static void comm_abort(struct dpt__nccl_comm *c)
{
	struct abort_job *j;
	pthread_attr_t attr;
	pthread_t t;
	int64_t deadline;
	int started = 0;

	if (c->dead)
		return;
	c->dead = 1;
	j = calloc(1, sizeof(*j));
	if (j) {
		j->comm = c->comm;
		atomic_init(&j->done, 0);
		atomic_init(&j->refs, 2);
		if (!pthread_attr_init(&attr)) {
			pthread_attr_setdetachstate(&attr,
						    PTHREAD_CREATE_DETACHED);
			started = !pthread_create(&t, &attr, abort_thread, j);
			pthread_attr_destroy(&attr);
		}
	}
	if (!started) {
		/* No memory or thread to spare. Aborting here could block
		 * without a bound, which is the one thing this function must
		 * not do: go on as if the abort had not returned. NCCL's
		 * kernels may still spin on the device; the process's exit
		 * ends them. */
		free(j);
		dpt__error(
			"cannot start the ncclCommAbort of rank %d: going on "
			"without it; cuda device %d may be unusable until "
			"this process exits",
			c->rank, c->device);
		c->stuck = 1;
		return;
	}
	deadline = dpt__now_ms() + ABORT_MS;
	while (!atomic_load(&j->done) && dpt__now_ms() < deadline) {
		struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};
		nanosleep(&ts, NULL);
	}
	if (!atomic_load(&j->done)) {
		dpt__error("ncclCommAbort of rank %d has not returned after "
			   "%d ms: going on without it; cuda device %d may be "
			   "unusable until this process exits",
			   c->rank, ABORT_MS, c->device);
		c->stuck = 1;
	}
	if (atomic_fetch_sub(&j->refs, 1) == 1)
		free(j);
}

/*
 * Wait until the communicator's pending work (an init, an enqueue, a
 * finalize) is no longer in progress and, with STREAM, until the stream is
 * idle. A generation that dies meanwhile (*abort set by the worker's
 * heartbeat thread) or a deadline that passes aborts the communicator,
 * which is the only way to get a rank out of a collective whose peer is
 * gone.
 */
static int wait_ready(struct dpt__nccl_comm *c, int stream, int64_t deadline)
{
	for (;;) {
		ncclResult_t state = ncclSuccess;
		ncclResult_t r = ncclCommGetAsyncError(c->comm, &state);

		if (r != ncclSuccess)
			state = r;
		if (state != ncclSuccess && state != ncclInProgress) {
			dpt__error("nccl: %s (%s)", ncclGetErrorString(state),
				   ncclGetLastError(c->comm));
			comm_abort(c);
			return state == ncclRemoteError ||
					       state == ncclSystemError
				       ? DPT_EPEERLOST
				       : DPT_ENCCL;
		}
		if (state == ncclSuccess) {
			cudaError_t e = stream ? cudaStreamQuery(c->stream)
					       : cudaSuccess;
			if (e == cudaSuccess)
				return 0;
			if (e != cudaErrorNotReady) {
				dpt__error("cuda: %s", cudaGetErrorString(e));
				comm_abort(c);
				return DPT_ECUDA;
			}
		}
		if (atomic_load(c->abort)) {
			comm_abort(c);
			return DPT_EGENERATION;
		}
		if (deadline && dpt__now_ms() > deadline) {
			comm_abort(c);
			return DPT_ETIMEDOUT;
		}
		pause_briefly();
	}
}

int dpt__nccl_comm_new(struct dpt__nccl_comm **out,
		       const uint8_t id[DPT_NCCL_ID_SIZE], int rank, int world,
		       int local_rank, int timeout_ms, atomic_int *abort)
{
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	struct dpt__nccl_comm *c = calloc(1, sizeof(*c));
	ncclUniqueId uid;
	ncclResult_t r;
	cudaError_t e;
	int rc = 0, ndev = 0, device;

	*out = NULL;
	if (!c)
		return DPT_ENOMEM;
	if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
		free(c);
		return DPT_ECUDA;
	}
	device = local_rank % ndev;
	c->device = device;
	c->rank = rank;
	c->world = world;
	c->abort = abort;
	c->timeout_ms = DPT__NCCL_TIMEOUT_MS;
	c->dead = 1; /* until there is a communicator to abort */
	e = cudaSetDevice(device);
	if (e == cudaSuccess)
		e = cudaStreamCreateWithFlags(&c->stream,
					      cudaStreamNonBlocking);
	if (e == cudaSuccess)
		e = cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming);
	if (e != cudaSuccess) {
		dpt__error("cannot use cuda device %d: %s", device,
			   cudaGetErrorString(e));
		rc = DPT_ECUDA;
		goto out;
	}
	/* Non-blocking: the call returns at once and the init is polled, so
	 * that a rank whose peers never arrive gives up at the deadline or
	 * when the coordinator ends the generation, instead of hanging in
	 * NCCL's bootstrap. */
	config.blocking = 0;
	memcpy(&uid, id, sizeof(uid));
	r = ncclCommInitRankConfig(&c->comm, world, uid, rank, &config);
	if (r != ncclSuccess && r != ncclInProgress) {
		dpt__error("ncclCommInitRankConfig failed: %s",
			   ncclGetErrorString(r));
		rc = DPT_ENCCL;
		/* A communicator NCCL returned with the failure is aborted
		 * (freed), not leaked. */
		if (c->comm) {
			c->dead = 0;
			comm_abort(c);
		}
		goto out;
	}
	c->dead = 0;
	rc = wait_ready(c, 0, dpt__now_ms() + timeout_ms);
	if (rc == DPT_ETIMEDOUT)
		dpt__error("nccl communicator of rank %d not ready after %d ms",
			   rank, timeout_ms);
out:
	if (rc)
		dpt__nccl_comm_destroy(&c);
	*out = c;
	return rc;
}

/*
 * How NCCL performs an allreduce of COUNT elements of DTYPE with OP: its
 * type, its element count and its operation. NCCL has no boolean, 16-bit
 * integer or complex type: a boolean sum (a logical OR) is the maximum of
 * bytes, as in PyTorch's NCCL process group; a complex is two floats
 * reduced independently; 16-bit integers would need a kernel of our own
 * and are refused (dpt__nccl_reduce_refusal). NCCL's ncclAvg of integers
 * is the wrapped sum divided with truncation, the CPU backend's rule.
 */
static int reduce_type(enum dpt_dtype dtype, enum dpt_op op, size_t count,
		       ncclDataType_t *t, size_t *n, size_t *es,
		       ncclRedOp_t *nop)
{
	*n = count;
	*es = dpt_dtype_size(dtype);
	*nop = op == DPT_AVG ? ncclAvg : ncclSum;
	switch (dtype) {
	case DPT_FLOAT32:
		*t = ncclFloat32;
		return 0;
	case DPT_FLOAT64:
		*t = ncclFloat64;
		return 0;
	case DPT_BFLOAT16:
		*t = ncclBfloat16;
		return 0;
	case DPT_FLOAT16:
		*t = ncclFloat16;
		return 0;
	case DPT_INT32:
		*t = ncclInt32;
		return 0;
	case DPT_INT64:
		*t = ncclInt64;
		return 0;
	case DPT_UINT8:
		*t = ncclUint8;
		return 0;
	case DPT_INT8:
		*t = ncclInt8;
		return 0;
	case DPT_UINT32:
		*t = ncclUint32;
		return 0;
	case DPT_UINT64:
		*t = ncclUint64;
		return 0;
	case DPT_BOOL:
		if (op != DPT_SUM)
			return DPT_EINVAL;
		*t = ncclUint8;
		*nop = ncclMax;
		return 0;
	case DPT_COMPLEX64:
		*t = ncclFloat32;
		*n = 2 * count;
		*es = 4;
		return count > SIZE_MAX / 2 ? DPT_EINVAL : 0;
	case DPT_COMPLEX128:
		*t = ncclFloat64;
		*n = 2 * count;
		*es = 8;
		return count > SIZE_MAX / 2 ? DPT_EINVAL : 0;
	case DPT_INT16:
	case DPT_UINT16:
		return DPT_ENOTSUP;
	}
	return DPT_EINVAL;
}

void dpt__nccl_comm_set_timeout(struct dpt__nccl_comm *c, int timeout_ms)
{
	c->timeout_ms = timeout_ms;
}

void dpt__nccl_comm_set_stream(struct dpt__nccl_comm *c, void *stream)
{
	c->after = stream;
}

/* Orders the communicator's stream after the work queued on the caller's
 * stream so far. The legacy default stream is the current device's:
 * recorded on the communicator's device, whichever device is current. */
static int order_after_caller(struct dpt__nccl_comm *c, cudaError_t pending)
{
	const char *what = "cudaGetDevice";
	int current = -1;
	cudaError_t e = c->after ? cudaSuccess : cudaGetDevice(&current);

	if (e == cudaSuccess && current != c->device && !c->after)
		e = cudaSetDevice(c->device);
	if (e == cudaSuccess)
		e = dpt__cuda_order_after(c->stream, c->after, c->ready, &what);
	if (current >= 0 && current != c->device)
		(void)cudaSetDevice(current);
	if (e == cudaSuccess)
		return 0;
	dpt__cuda_forget(pending);
	dpt__error("nccl collective of rank %d: cannot wait for the caller's "
		   "stream: %s failed: %s (is the stream of cuda device %d?)",
		   c->rank, what, cudaGetErrorString(e), c->device);
	return DPT_ECUDA;
}

static int64_t deadline_of(const struct dpt__nccl_comm *c)
{
	return c->timeout_ms > 0 ? dpt__now_ms() + c->timeout_ms : 0;
}

/* After an enqueue: wait for it and for the stream, until DEADLINE. A
 * peer that is alive but never enters the collective leaves NCCL's
 * kernel spinning with no error to report: only the deadline gets this
 * rank out, as the CPU backend's silence timeout does. */
static int finish(struct dpt__nccl_comm *c, ncclResult_t r, int64_t deadline)
{
	int rc;

	if (r != ncclSuccess && r != ncclInProgress) {
		dpt__error("nccl: %s", ncclGetErrorString(r));
		return DPT_ENCCL;
	}
	rc = wait_ready(c, 1, deadline);
	if (rc == DPT_ETIMEDOUT) {
		dpt__error(
			"nccl collective of rank %d not complete after %d ms: "
			"a peer is silent",
			c->rank, c->timeout_ms);
		rc = DPT_EPEERLOST;
	}
	return rc;
}

/* A staging area of at least SIZE bytes of device memory. */
static int stage_reserve(struct dpt__nccl_comm *c, size_t size,
			 cudaError_t pending)
{
	cudaError_t e;

	if (c->stage_size >= size)
		return 0;
	if (c->stage) {
		/* The stream is idle (every collective is waited for), so
		 * this cudaFree has nothing to wait for. */
		cudaFree(c->stage);
		c->stage = NULL;
		c->stage_size = 0;
	}
	e = cudaMalloc((void **)&c->stage, size);
	if (e != cudaSuccess) {
		dpt__cuda_forget(pending);
		c->stage = NULL;
		dpt__error("cannot stage %zu bytes of host memory for nccl in "
			   "device memory: %s",
			   size, cudaGetErrorString(e));
		return DPT_ECUDA;
	}
	c->stage_size = size;
	return 0;
}

enum coll { COLL_ALLREDUCE, COLL_BROADCAST, COLL_ALLGATHER };

static ncclResult_t enqueue(struct dpt__nccl_comm *c, enum coll k,
			    const void *send, void *recv, size_t count,
			    ncclDataType_t t, ncclRedOp_t op, int root)
{
	switch (k) {
	case COLL_ALLREDUCE:
		return ncclAllReduce(send, recv, count, t, op, c->comm,
				     c->stream);
	case COLL_BROADCAST:
		return ncclBroadcast(send, recv, count, t, root, c->comm,
				     c->stream);
	case COLL_ALLGATHER:
		return ncclAllGather(send, recv, count, t, c->comm, c->stream);
	}
	return ncclInvalidArgument;
}

/* Whether P is host memory that NCCL cannot use: pageable, or pinned but
 * not device memory. Managed memory is the device's too. */
static bool host_memory(const void *p, cudaError_t pending)
{
	struct cudaPointerAttributes a;

	if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		/* old runtimes: unregistered memory */
		dpt__cuda_forget(pending);
		return true;
	}
	return a.type == cudaMemoryTypeUnregistered ||
	       a.type == cudaMemoryTypeHost;
}

/* One collective of COUNT elements of NCCL type T (ES bytes each), after
 * the work queued on the caller's stream. NCCL moves device memory only;
 * host buffers (the checkpoint commit's fragments and results, a few KiB)
 * are staged through the communicator's staging buffer. Every wait is
 * bounded by one deadline for the whole call. */
static int collective(struct dpt__nccl_comm *c, enum coll k, const void *send,
		      void *recv, size_t count, ncclDataType_t t, size_t es,
		      ncclRedOp_t op, int root)
{
	size_t in = count * es;
	size_t out = k == COLL_ALLGATHER ? in * (size_t)c->world : in;
	int64_t deadline = deadline_of(c);
	cudaError_t e, pending = dpt__cuda_pending();
	int rc;

	if (c->dead)
		return DPT_EGENERATION;
	rc = order_after_caller(c, pending);
	if (rc)
		return rc;
	if (in == 0 ||
	    (!host_memory(send, pending) && !host_memory(recv, pending)))
		return finish(c, enqueue(c, k, send, recv, count, t, op, root),
			      deadline);
	rc = stage_reserve(c, in + out, pending);
	if (rc)
		return rc;
	/* cudaMemcpyDefault: one of SEND and RECV may be device memory (the
	 * kind follows from the pointers under unified addressing). From
	 * pageable memory, the copy returns once the driver holds the bytes;
	 * the stream is idle, so it cannot wait on a stuck kernel. */
	e = cudaMemcpyAsync(c->stage, send, in, cudaMemcpyDefault, c->stream);
	if (e != cudaSuccess)
		goto cuda_failed;
	rc = finish(c,
		    enqueue(c, k, c->stage, c->stage + in, count, t, op, root),
		    deadline);
	if (rc)
		return rc;
	/* Only now that the collective is complete: a copy into pageable
	 * memory blocks the host until the stream reaches it. */
	e = cudaMemcpyAsync(recv, c->stage + in, out, cudaMemcpyDefault,
			    c->stream);
	if (e != cudaSuccess)
		goto cuda_failed;
	return finish(c, ncclSuccess, deadline);
cuda_failed:
	dpt__cuda_forget(pending);
	dpt__error("staging host memory for nccl: %s", cudaGetErrorString(e));
	return DPT_ECUDA;
}

int dpt__nccl_allreduce(struct dpt__nccl_comm *c, const void *send, void *recv,
			size_t count, enum dpt_dtype dtype, enum dpt_op op)
{
	ncclDataType_t t;
	ncclRedOp_t nop;
	size_t n, es;
	int rc = reduce_type(dtype, op, count, &t, &n, &es, &nop);

	if (rc)
		return rc;
	return collective(c, COLL_ALLREDUCE, send, recv, n, t, es, nop, 0);
}

/* Broadcast and allgather move bytes: every dtype is COUNT times its size
 * in bytes of ncclUint8, which is also how the dtypes that NCCL lacks
 * travel. */
int dpt__nccl_broadcast(struct dpt__nccl_comm *c, void *buf, size_t count,
			enum dpt_dtype dtype, int root)
{
	return collective(c, COLL_BROADCAST, buf, buf,
			  count * dpt_dtype_size(dtype), ncclUint8, 1, ncclSum,
			  root);
}

int dpt__nccl_allgather(struct dpt__nccl_comm *c, const void *send, void *recv,
			size_t count, enum dpt_dtype dtype)
{
	return collective(c, COLL_ALLGATHER, send, recv,
			  count * dpt_dtype_size(dtype), ncclUint8, 1, ncclSum,
			  0);
}

void dpt__nccl_comm_destroy(struct dpt__nccl_comm **cp)
{
	struct dpt__nccl_comm *c = *cp;

	if (!c)
		return;
	if (!c->dead) {
		/* A clean finalize flushes outstanding work; it is polled
		 * like everything else, and aborted if it cannot finish. */
		ncclResult_t r = ncclCommFinalize(c->comm);
		if ((r == ncclSuccess || r == ncclInProgress) &&
		    wait_ready(c, 0, dpt__now_ms() + 10000) == 0)
			ncclCommDestroy(c->comm);
		else
			comm_abort(c);
	}
	if (!c->stuck) {
		if (c->stage)
			cudaFree(c->stage);
		if (c->ready)
			cudaEventDestroy(c->ready);
		if (c->stream)
			cudaStreamDestroy(c->stream);
	}
	free(c);
	*cp = NULL;
}

#else /* !HAVE_NCCL */

int dpt__nccl_available(void)
{
	return 0;
}

int dpt__nccl_unique_id(uint8_t id[DPT_NCCL_ID_SIZE])
{
	(void)id;
	return DPT_ENOTSUP;
}

int dpt__nccl_comm_new(struct dpt__nccl_comm **out,
		       const uint8_t id[DPT_NCCL_ID_SIZE], int rank, int world,
		       int local_rank, int timeout_ms, atomic_int *abort)
{
	(void)id, (void)rank, (void)world, (void)local_rank, (void)timeout_ms,
		(void)abort;
	*out = NULL;
	return DPT_ENOTSUP;
}

int dpt__nccl_allreduce(struct dpt__nccl_comm *c, const void *send, void *recv,
			size_t count, enum dpt_dtype dtype, enum dpt_op op)
{
	(void)c, (void)send, (void)recv, (void)count, (void)dtype, (void)op;
	return DPT_ENOTSUP;
}

int dpt__nccl_broadcast(struct dpt__nccl_comm *c, void *buf, size_t count,
			enum dpt_dtype dtype, int root)
{
	(void)c, (void)buf, (void)count, (void)dtype, (void)root;
	return DPT_ENOTSUP;
}

int dpt__nccl_allgather(struct dpt__nccl_comm *c, const void *send, void *recv,
			size_t count, enum dpt_dtype dtype)
{
	(void)c, (void)send, (void)recv, (void)count, (void)dtype;
	return DPT_ENOTSUP;
}

void dpt__nccl_comm_set_timeout(struct dpt__nccl_comm *c, int timeout_ms)
{
	(void)c, (void)timeout_ms;
}

void dpt__nccl_comm_set_stream(struct dpt__nccl_comm *c, void *stream)
{
	(void)c, (void)stream;
}

void dpt__nccl_comm_destroy(struct dpt__nccl_comm **c)
{
	*c = NULL;
}

#endif

const char *dpt__nccl_reduce_refusal(enum dpt_dtype dtype)
{
	if (dtype == DPT_INT16 || dtype == DPT_UINT16)
		return "nccl has no 16-bit integer type: reduce the values as "
		       "int32 (widened), or use the cpu backend";
	return NULL;
}

/* ------------------------------------------------------------ operations */

/* The bootstrap is NCCL's unique ID, made by the rank that WELCOME names
 * the root and relayed by the coordinator. */
static int make_id(struct dpt__msg *m)
{
	return dpt__nccl_unique_id(m->u.unique_id);
}

static int create(void **out, const struct dpt__coll_gen *g,
		  const struct dpt__msg *m)
{
	struct dpt__nccl_comm *comm = NULL;
	int rc;

	dpt__debug("rank %d of %d in generation %u: nccl backend, id %08x",
		   g->rank, g->world, g->generation,
		   (uint32_t)dpt__fnv1a(m->u.unique_id, DPT_NCCL_ID_SIZE,
					DPT_FNV1A_INIT));
	rc = dpt__nccl_comm_new(&comm, m->u.unique_id, g->rank, g->world,
				g->local_hint, g->timeout_ms, g->abort);
	if (rc)
		return rc;
	dpt__nccl_comm_set_stream(comm, g->stream);
	*out = comm;
	return 0;
}

static int allreduce(void *comm, const void *send, void *recv, size_t count,
		     enum dpt_dtype dtype, enum dpt_op op)
{
	return dpt__nccl_allreduce(comm, send, recv, count, dtype, op);
}

static int broadcast(void *comm, void *buf, size_t count, enum dpt_dtype dtype,
		     int root)
{
	return dpt__nccl_broadcast(comm, buf, count, dtype, root);
}

static int allgather(void *comm, const void *send, void *recv, size_t count,
		     enum dpt_dtype dtype)
{
	return dpt__nccl_allgather(comm, send, recv, count, dtype);
}

static void set_stream(void *comm, void *stream)
{
	dpt__nccl_comm_set_stream(comm, stream);
}

static void destroy(void **comm)
{
	struct dpt__nccl_comm *c = *comm;

	dpt__nccl_comm_destroy(&c);
	*comm = NULL;
}

/* No abort operation: the communicator watches the generation's abort
 * flag (struct dpt__coll_gen), in its set-up as in its collectives. */
const struct dpt__coll_ops dpt__coll_nccl = {
	.name = "nccl",
	.wire = DPT_BACKEND_NCCL,
	.cap = DPT_CAP_NCCL,
	.memory = DPT__COLL_HOST | DPT__COLL_DEVICE,
	.available = dpt__nccl_available,
	.unavailable = "this build has no nccl or no gpu is visible",
	.bootstrap = DPT_MSG_UNIQUE_ID,
	.root = make_id,
	.create = create,
	.reduce_refusal = dpt__nccl_reduce_refusal,
	.allreduce = allreduce,
	.broadcast = broadcast,
	.allgather = allgather,
	.set_stream = set_stream,
	.destroy = destroy,
};

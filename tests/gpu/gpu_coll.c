/*
 * One worker of tests/gpu/nccl.sh: the NCCL backend through libdptrain's
 * public API, on a real GPU. It joins the job from the environment that
 * `srun --dp-train` sets (DPTRAIN_COORDINATOR, DPTRAIN_SECRET,
 * SLURM_LOCALID picks the GPU), receives the generation's NCCL unique ID
 * through the coordinator's relay, and checks:
 *
 * - allreduce (sum and average), broadcast (from the first and the last
 *   rank) and allgather of device buffers, for every dtype, in place and
 *   out of place, against results computed here on the host with the
 *   rules of dptrain.h: integer sums wrap in their width and their
 *   average truncates toward zero, a complex is reduced as two floats, a
 *   boolean sum is an OR; the reductions that dptrain.h says NCCL refuses
 *   (int16 and uint16: DPT_ENOTSUP) and that no backend has (the average
 *   of booleans: DPT_EINVAL) must return that error, and the checks after
 *   them pass in the same generation;
 * - the same collectives on host buffers, which the backend stages
 *   through device memory it keeps across calls: many calls of growing
 *   and shrinking sizes, and a host buffer reduced into a device one.
 *
 *   gpu_coll --probe          "gpus=N name=NAME compute_mode=MODE" or
 *                             "gpus=0 error=WHY"
 *   gpu_coll --hold SECONDS   a CUDA context on every device, held open
 *                             until killed, until SECONDS have passed or
 *                             until the parent exits (tests/gpu/run: the
 *                             driver's first initialisation is paid once,
 *                             not by each test's join); prints "holding
 *                             devices=N init_ms=T" or "hold error=WHY"
 *   gpu_coll                  the checks above, then leaves
 *   gpu_coll --rejoin         a loop of device allreduces until one fails
 *                             (a rank was killed), then dpt_rejoin and the
 *                             checks above in the new generation
 *
 * Output, one line each: "joined rank=R world=W generation=G
 * backend=B device=D", "check WHAT DTYPE COUNT MEMORY ok|FAIL", with
 * --rejoin "looping pid=P" (the process to kill), "lost error=NAME after_ms=T"
 * and "rejoined rank=R world=W generation=G rejoin_ms=T", then "done checks=C
 * failures=F". Exit status 0 when every check passed.
 *
 * Inputs are small integers in [-8, 7], exact in every dtype, and so are
 * their sums over up to 8 ranks; in an unsigned type a negative input is
 * stored wrapped (-1 is 255 in uint8), so that its sums wrap too. Booleans
 * are 0 or 1 (NCCL's OR is the largest byte, an OR only of 0s and 1s).
 * Sums, integer averages and gathers are compared byte for byte; float
 * and complex averages within one unit in the last place of the dtype
 * where the world size is a power of two, and within the rounding error
 * of NCCL's premultiplied sum where it is not (avg_bound()).
 */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <dptrain/dptrain.h>

#include "tests/testlib.h"

static int checks, failures;
static int rank, world;

/* Every dtype of dptrain.h, in its order (the index is the dtype). */
static const char *const dtype_names[] = {
	"float32", "float64", "bfloat16", "float16",   "int32",
	"int64",   "uint8",   "bool",	  "int8",      "int16",
	"uint16",  "uint32",  "uint64",	  "complex64", "complex128"};
#define NDTYPES (sizeof(dtype_names) / sizeof(dtype_names[0]))
_Static_assert(NDTYPES == DPT_COMPLEX128 + 1, "a dtype without a name");

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------ values */

/* Rank R's input at element I: 0 or 1 for bool (1 in 5 of 16), else in
 * [-8, 7]. */
static int value(enum dpt_dtype dt, int r, size_t i, uint32_t key)
{
	int v = (int)(mix((uint32_t)i * 31u + (uint32_t)r * 7919u + key) % 16u);
	return dt == DPT_BOOL ? v >= 11 : v - 8;
}

static int is_signed(enum dpt_dtype dt)
{
	return dt == DPT_INT8 || dt == DPT_INT16 || dt == DPT_INT32 ||
	       dt == DPT_INT64;
}

static int is_integer(enum dpt_dtype dt)
{
	return is_signed(dt) || dt == DPT_UINT8 || dt == DPT_UINT16 ||
	       dt == DPT_UINT32 || dt == DPT_UINT64;
}

/* The low bytes of U as element I of P, an integer of DT (x86-64 and
 * every CUDA host are little endian). Storing the two's complement of a
 * sum this way is dptrain.h's wrap-around. */
static void put_bits(enum dpt_dtype dt, void *p, size_t i, uint64_t u)
{
	size_t sz = dpt_dtype_size(dt);
	memcpy((char *)p + i * sz, &u, sz);
}

/* Store the number V as element I of P: rounded to a float type, as both
 * parts of a complex (V - 2Vi), wrapped in an integer type, V != 0 as a
 * bool. */
static void put(enum dpt_dtype dt, void *p, size_t i, double v)
{
	switch (dt) {
	case DPT_FLOAT32:
		((float *)p)[i] = (float)v;
		break;
	case DPT_FLOAT64:
		((double *)p)[i] = v;
		break;
	case DPT_BFLOAT16:
		((uint16_t *)p)[i] = bf16_of((float)v);
		break;
	case DPT_FLOAT16:
		((uint16_t *)p)[i] = half_of(v);
		break;
	/* 0 - 2V, not -2V: a zero imaginary part is +0, as the sums of
	 * the ranks' parts are, where -2 * 0 would be -0, another byte. */
	case DPT_COMPLEX64:
		((float *)p)[2 * i] = (float)v;
		((float *)p)[2 * i + 1] = (float)(0 - 2 * v);
		break;
	case DPT_COMPLEX128:
		((double *)p)[2 * i] = v;
		((double *)p)[2 * i + 1] = 0 - 2 * v;
		break;
	case DPT_BOOL:
		((uint8_t *)p)[i] = v != 0;
		break;
	case DPT_INT8:
	case DPT_INT16:
	case DPT_INT32:
	case DPT_INT64:
	case DPT_UINT8:
	case DPT_UINT16:
	case DPT_UINT32:
	case DPT_UINT64:
		put_bits(dt, p, i, (uint64_t)(int64_t)v);
		break;
	}
}

/* Element I of P as a number, for messages and tolerances (the real part
 * of a complex: compare() splits a complex into its parts). */
static double get(enum dpt_dtype dt, const void *p, size_t i)
{
	switch (dt) {
	case DPT_FLOAT32:
		return ((const float *)p)[i];
	case DPT_FLOAT64:
		return ((const double *)p)[i];
	case DPT_COMPLEX64:
		return ((const float *)p)[2 * i];
	case DPT_COMPLEX128:
		return ((const double *)p)[2 * i];
	case DPT_BFLOAT16:
		return float_of_bf16(((const uint16_t *)p)[i]);
	case DPT_FLOAT16:
		return float_of_half(((const uint16_t *)p)[i]);
	case DPT_INT8:
		return ((const int8_t *)p)[i];
	case DPT_INT16:
		return ((const int16_t *)p)[i];
	case DPT_INT32:
		return ((const int32_t *)p)[i];
	case DPT_INT64:
		return (double)((const int64_t *)p)[i];
	case DPT_UINT8:
	case DPT_BOOL:
		return ((const uint8_t *)p)[i];
	case DPT_UINT16:
		return ((const uint16_t *)p)[i];
	case DPT_UINT32:
		return ((const uint32_t *)p)[i];
	case DPT_UINT64:
		return (double)((const uint64_t *)p)[i];
	}
	return NAN;
}

/* Store the average of the integer sum S over the world as element I of
 * P, by dptrain.h's rule for DT: floats and complex divide (put() rounds);
 * integers wrap S in their width first, then divide with truncation
 * toward zero (C's integer division), as signed or unsigned numbers. */
static void put_average(enum dpt_dtype dt, void *p, size_t i, int64_t s)
{
	unsigned bits = 8 * (unsigned)dpt_dtype_size(dt);
	uint64_t u = (uint64_t)s, sign;

	if (!is_integer(dt)) {
		put(dt, p, i, (double)s / world);
		return;
	}
	if (bits < 64)
		u &= (UINT64_C(1) << bits) - 1;
	if (!is_signed(dt)) {
		put_bits(dt, p, i, u / (uint64_t)world);
		return;
	}
	sign = UINT64_C(1) << (bits - 1); /* sign-extend the wrapped sum */
	put_bits(dt, p, i,
		 (uint64_t)(((int64_t)(u ^ sign) - (int64_t)sign) / world));
}

/* How far an allreduce of DT with OP may be from the host's result,
 * relative to it: 0 (byte for byte) but for float and complex averages,
 * one unit in the last place (the epsilon of the dtype or of its parts).
 * For a world size that is not a power of two, avg_bound() allows more. */
static double tolerance(enum dpt_dtype dt, enum dpt_op op)
{
	if (op != DPT_AVG)
		return 0;
	switch (dt) {
	case DPT_BFLOAT16:
		return 1.0 / 128;
	case DPT_FLOAT16:
		return 1.0 / 1024;
	case DPT_FLOAT32:
	case DPT_COMPLEX64:
		return 1.0 / (1 << 23);
	case DPT_FLOAT64:
	case DPT_COMPLEX128:
		return 1e-15;
	default:
		return 0;
	}
}

/* The unit roundoff u of a float dtype (of a complex's parts): the
 * largest relative error of rounding to nearest, half an epsilon. */
static double unit_roundoff(enum dpt_dtype dt)
{
	switch (dt) {
	case DPT_BFLOAT16:
		return 0x1p-8;
	case DPT_FLOAT16:
		return 0x1p-11;
	case DPT_FLOAT32:
	case DPT_COMPLEX64:
		return 0x1p-24;
	case DPT_FLOAT64:
	case DPT_COMPLEX128:
		return 0x1p-53;
	default:
		return 0;
	}
}

/*
 * The absolute error allowed to a float average of N ranks whose inputs
 * at one element have magnitudes summing to ABS_SUM, or 0 where one unit
 * in the last place (tolerance()) is the rule.
 *
 * NCCL's ncclAvg of a float type is ncclDevPreMulSum (enqueue.cc,
 * hostToDevRedOp): each rank's input is multiplied by s = 1/N rounded to
 * the dtype, and the products are summed in the dtype. Where N is a power
 * of two, s is exact, and so are the products and every partial sum of
 * these small inputs (multiples of 1/N below 8 in magnitude fit the
 * narrowest significand, bfloat16's 8 bits): the result is the mean
 * rounded once, as the host's is. Where N is not, with A = ABS_SUM / N:
 * s is off by at most u relative (float(1.0/N), then the dtype: two
 * roundings, within 1.01u), each product x * s is rounded (u), which
 * makes at most 2.01u A over the N products; the N - 1 additions, in
 * whatever order NCCL's ring takes, round each partial sum, each at most
 * u A (1 + 2.01u); the host's mean is rounded once (u A). In all
 * (N + 2.02) u A, plus second-order terms: (N + 3) u A bounds it for
 * N <= 8 in bfloat16 (u = 2^-8) and for every wider dtype. For world 3
 * in bfloat16 that is up to 6 * 2^-8 * 8 = 0.19 where the mean is up
 * to 8 (its unit in the last place 1/16), where 1 ulp failed.
 */
static double avg_bound(enum dpt_dtype dt, int n, double abs_sum)
{
	if ((n & (n - 1)) == 0)
		return 0;
	return (n + 3) * unit_roundoff(dt) * abs_sum / n;
}

/* The error dptrain.h promises for an allreduce of DT with OP on the NCCL
 * backend, or 0: no boolean average on any backend, no 16-bit integer
 * reduction in NCCL. */
static int refusal(enum dpt_dtype dt, enum dpt_op op)
{
	if (dt == DPT_BOOL && op == DPT_AVG)
		return DPT_EINVAL;
	if (dt == DPT_INT16 || dt == DPT_UINT16)
		return DPT_ENOTSUP;
	return 0;
}

/* ------------------------------------------------------------ checks */

enum memory { DEVICE, HOST };

static void report(const char *what, enum dpt_dtype dt, size_t count,
		   enum memory mem, int rc, const char *why)
{
	checks++;
	if (rc || why) {
		failures++;
		printf("check %s %s %zu %s FAIL %s\n", what, dtype_names[dt],
		       count, mem == DEVICE ? "device" : "host",
		       rc ? dpt_strerror(rc) : why);
	} else {
		printf("check %s %s %zu %s ok\n", what, dtype_names[dt], count,
		       mem == DEVICE ? "device" : "host");
	}
	fflush(stdout);
}

/* Buffers of one check: the host image (IN and OUT) and, for DEVICE,
 * the device copies the collective works on. */
struct bufs {
	enum memory mem;
	size_t in_bytes, out_bytes;
	unsigned char *in, *out;   /* host */
	unsigned char *din, *dout; /* device, or the host ones */
};

static int bufs_alloc(struct bufs *b, enum memory mem, size_t in_bytes,
		      size_t out_bytes)
{
	memset(b, 0, sizeof(*b));
	b->mem = mem;
	b->in_bytes = in_bytes;
	b->out_bytes = out_bytes;
	b->in = malloc(in_bytes ? in_bytes : 1);
	b->out = malloc(out_bytes ? out_bytes : 1);
	if (!b->in || !b->out)
		return -1;
	if (mem == HOST) {
		b->din = b->in;
		b->dout = b->out;
		return 0;
	}
	if (cudaMalloc((void **)&b->din, in_bytes ? in_bytes : 1) !=
		    cudaSuccess ||
	    cudaMalloc((void **)&b->dout, out_bytes ? out_bytes : 1) !=
		    cudaSuccess)
		return -1;
	return 0;
}

static void bufs_free(struct bufs *b)
{
	if (b->mem == DEVICE) {
		cudaFree(b->din);
		cudaFree(b->dout);
	}
	free(b->in);
	free(b->out);
}

/* Host image to the buffers the collective reads; GARBAGE in its output. */
static int bufs_load(struct bufs *b)
{
	memset(b->out, 0x5a, b->out_bytes);
	if (b->mem == HOST)
		return 0;
	if (cudaMemcpy(b->din, b->in, b->in_bytes, cudaMemcpyHostToDevice) ||
	    cudaMemcpy(b->dout, b->out, b->out_bytes, cudaMemcpyHostToDevice))
		return -1;
	return 0;
}

static int bufs_fetch(struct bufs *b, const unsigned char *dev, void *host,
		      size_t bytes)
{
	if (b->mem == HOST)
		return 0;
	return cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost) ? -1 : 0;
}

/* GOT against WANT: byte for byte where TOL is 0, else each element
 * within TOL relative to max(1, |want|), or within BOUND[i] absolute
 * where BOUND is not NULL (one per float, a complex's two parts apart). */
static const char *compare(enum dpt_dtype dt, const void *got, const void *want,
			   size_t count, double tol, const double *bound)
{
	static char why[200];
	size_t sz;

	/* A complex is compared as its two parts, each within TOL. */
	if (dt == DPT_COMPLEX64 || dt == DPT_COMPLEX128) {
		dt = dt == DPT_COMPLEX64 ? DPT_FLOAT32 : DPT_FLOAT64;
		count *= 2;
	}
	sz = dpt_dtype_size(dt);
	for (size_t i = 0; i < count; i++) {
		double g = get(dt, got, i), w = get(dt, want, i);
		double allowed = tol * fmax(1.0, fabs(w));
		if (bound && bound[i] > allowed)
			allowed = bound[i];
		if (tol == 0 ? memcmp((const char *)got + i * sz,
				      (const char *)want + i * sz, sz) != 0
			     : !(fabs(g - w) <= allowed)) {
			snprintf(why, sizeof(why),
				 "element %zu is %g, want %g (within %g)", i, g,
				 w, tol == 0 ? 0.0 : allowed);
			return why;
		}
	}
	return NULL;
}

static void check_allreduce(struct dpt_ctx *ctx, enum dpt_dtype dt,
			    size_t count, enum memory mem, enum dpt_op op,
			    int in_place)
{
	size_t bytes = count * dpt_dtype_size(dt);
	uint32_t key = (uint32_t)(count * 131 + dt * 17 + op);
	int refused = refusal(dt, op);
	/* Refusals are checks of their own: "allreduce-avg-refused". */
	const char *what = refused ? (op == DPT_AVG ? "allreduce-avg-refused"
						    : "allreduce-sum-refused")
			   : op == DPT_AVG ? (in_place ? "allreduce-avg-inplace"
						       : "allreduce-avg")
					   : (in_place ? "allreduce-sum-inplace"
						       : "allreduce-sum");
	unsigned char *want = malloc(bytes ? bytes : 1);
	unsigned char *got;
	/* A complex's parts: the imaginary part is -2 times the real one. */
	size_t parts = dt == DPT_COMPLEX64 || dt == DPT_COMPLEX128 ? 2 : 1;
	int bounded = op == DPT_AVG && !refused && avg_bound(dt, world, 1) > 0;
	double *bound =
		bounded ? malloc(count * parts * sizeof(*bound) + 1) : NULL;
	struct bufs b;
	int rc;

	if (!want || (bounded && !bound) || bufs_alloc(&b, mem, bytes, bytes)) {
		report(what, dt, count, mem, 0, "no memory");
		free(want);
		free(bound);
		return;
	}
	for (size_t i = 0; i < count; i++) {
		int64_t s = 0;
		double abs_sum = 0;
		for (int r = 0; r < world; r++) {
			s += value(dt, r, i, key);
			abs_sum += abs(value(dt, r, i, key));
		}
		put(dt, b.in, i, value(dt, rank, i, key));
		if (op == DPT_AVG && !refused)
			put_average(dt, want, i, s);
		else
			put(dt, want, i, (double)s);
		for (size_t k = 0; bound && k < parts; k++)
			bound[i * parts + k] =
				avg_bound(dt, world, (double)(k + 1) * abs_sum);
	}
	if (bufs_load(&b)) {
		report(what, dt, count, mem, 0, "cudaMemcpy failed");
		goto out;
	}
	/* A refused reduction leaves RECV as it was: the input in place,
	 * bufs_load's garbage out of place. */
	if (refused)
		memcpy(want, in_place ? b.in : b.out, bytes);
	rc = dpt_allreduce(ctx, b.din, in_place ? b.din : b.dout, count, dt,
			   op);
	if (rc != refused) {
		static char why[120];
		snprintf(why, sizeof(why), "returned %s, want %s",
			 dpt_err_name(rc), dpt_err_name(refused));
		report(what, dt, count, mem, 0, why);
		goto out;
	}
	got = in_place ? b.in : b.out;
	if (bufs_fetch(&b, in_place ? b.din : b.dout, got, bytes))
		report(what, dt, count, mem, 0, "cudaMemcpy back failed");
	else
		report(what, dt, count, mem, 0,
		       compare(dt, got, want, count,
			       refused ? 0 : tolerance(dt, op), bound));
out:
	bufs_free(&b);
	free(want);
	free(bound);
}

static void check_broadcast(struct dpt_ctx *ctx, enum dpt_dtype dt,
			    size_t count, enum memory mem, int root)
{
	size_t bytes = count * dpt_dtype_size(dt);
	uint32_t key = (uint32_t)(count * 7 + dt * 3 + root + 1000);
	unsigned char *want = malloc(bytes ? bytes : 1);
	const char *what = root ? "broadcast-last" : "broadcast-first";
	struct bufs b;
	int rc;

	if (!want || bufs_alloc(&b, mem, bytes, 0)) {
		report(what, dt, count, mem, 0, "no memory");
		free(want);
		return;
	}
	for (size_t i = 0; i < count; i++) {
		put(dt, b.in, i, value(dt, rank, i, key));
		put(dt, want, i, value(dt, root, i, key));
	}
	if (bufs_load(&b)) {
		report(what, dt, count, mem, 0, "cudaMemcpy failed");
		goto out;
	}
	rc = dpt_broadcast(ctx, b.din, count, dt, root);
	if (rc)
		report(what, dt, count, mem, rc, NULL);
	else if (bufs_fetch(&b, b.din, b.in, bytes))
		report(what, dt, count, mem, 0, "cudaMemcpy back failed");
	else
		report(what, dt, count, mem, 0,
		       compare(dt, b.in, want, count, 0, NULL));
out:
	bufs_free(&b);
	free(want);
}

static void check_allgather(struct dpt_ctx *ctx, enum dpt_dtype dt,
			    size_t count, enum memory mem)
{
	size_t bytes = count * dpt_dtype_size(dt);
	size_t total = bytes * (size_t)world;
	uint32_t key = (uint32_t)(count * 5 + dt + 2000);
	unsigned char *want = malloc(total ? total : 1);
	struct bufs b;
	int rc;

	if (!want || bufs_alloc(&b, mem, bytes, total)) {
		report("allgather", dt, count, mem, 0, "no memory");
		free(want);
		return;
	}
	for (size_t i = 0; i < count; i++) {
		put(dt, b.in, i, value(dt, rank, i, key));
		for (int r = 0; r < world; r++)
			put(dt, want, (size_t)r * count + i,
			    value(dt, r, i, key));
	}
	if (bufs_load(&b)) {
		report("allgather", dt, count, mem, 0, "cudaMemcpy failed");
		goto out;
	}
	rc = dpt_allgather(ctx, b.din, b.dout, count, dt);
	if (rc)
		report("allgather", dt, count, mem, rc, NULL);
	else if (bufs_fetch(&b, b.dout, b.out, total))
		report("allgather", dt, count, mem, 0,
		       "cudaMemcpy back failed");
	else
		report("allgather", dt, count, mem, 0,
		       compare(dt, b.out, want, count * (size_t)world, 0,
			       NULL));
out:
	bufs_free(&b);
	free(want);
}

/* SEND in host memory, RECV on the device: staged one way, copied
 * device to device the other. */
static void check_mixed(struct dpt_ctx *ctx, size_t count)
{
	size_t bytes = count * sizeof(float);
	float *in = malloc(bytes), *out = malloc(bytes), *want = malloc(bytes);
	float *dout = NULL;
	int rc = 0;
	const char *why = NULL;

	if (!in || !out || !want ||
	    cudaMalloc((void **)&dout, bytes) != cudaSuccess) {
		why = "no memory";
		goto out;
	}
	for (size_t i = 0; i < count; i++) {
		double s = 0;
		for (int r = 0; r < world; r++)
			s += value(DPT_FLOAT32, r, i, 77);
		in[i] = (float)value(DPT_FLOAT32, rank, i, 77);
		want[i] = (float)s;
	}
	rc = dpt_allreduce(ctx, in, dout, count, DPT_FLOAT32, DPT_SUM);
	if (!rc && cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost))
		why = "cudaMemcpy back failed";
	else if (!rc)
		why = compare(DPT_FLOAT32, out, want, count, 0, NULL);
out:
	report("allreduce-host-to-device", DPT_FLOAT32, count, HOST, rc, why);
	cudaFree(dout);
	free(in);
	free(out);
	free(want);
}

static void check_all(struct dpt_ctx *ctx)
{
	/* One element, an odd count, and 4 MiB of float32. */
	static const size_t counts[] = {1, 1001, (size_t)1 << 20};
	/* Host buffers: staged through the communicator's device buffer,
	 * which grows (1 -> 1 MiB) and is reused when smaller. */
	static const size_t host_counts[] = {1, 4099, (size_t)1 << 18, 17, 1};

	rank = dpt_rank(ctx);
	world = dpt_world_size(ctx);
	for (size_t d = 0; d < NDTYPES; d++) {
		enum dpt_dtype dt = (enum dpt_dtype)d;
		for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]);
		     k++) {
			size_t n = counts[k];
			check_allreduce(ctx, dt, n, DEVICE, DPT_SUM, 0);
			check_allreduce(ctx, dt, n, DEVICE, DPT_SUM, 1);
			check_allreduce(ctx, dt, n, DEVICE, DPT_AVG, 0);
			check_broadcast(ctx, dt, n, DEVICE, 0);
			check_broadcast(ctx, dt, n, DEVICE, world - 1);
			check_allgather(ctx, dt, n, DEVICE);
		}
	}
	for (size_t k = 0; k < sizeof(host_counts) / sizeof(host_counts[0]);
	     k++) {
		size_t n = host_counts[k];
		check_allreduce(ctx, DPT_FLOAT32, n, HOST, DPT_SUM, 0);
		check_allreduce(ctx, DPT_INT64, n, HOST, DPT_SUM, 1);
		check_allreduce(ctx, DPT_BFLOAT16, n, HOST, DPT_AVG, 0);
		check_broadcast(ctx, DPT_FLOAT64, n, HOST, world - 1);
		check_allgather(ctx, DPT_UINT8, n, HOST);
		check_allreduce(ctx, DPT_COMPLEX64, n, HOST, DPT_AVG, 1);
		check_allreduce(ctx, DPT_BOOL, n, HOST, DPT_SUM, 0);
	}
	check_mixed(ctx, 1001);
	/* Many small staged calls in a row: the checkpoint commit's pattern. */
	for (int i = 0; i < 200; i++) {
		int64_t v = rank + i, s;
		int rc = dpt_allreduce(ctx, &v, &s, 1, DPT_INT64, DPT_SUM);
		int64_t want =
			(int64_t)world * (world - 1) / 2 + (int64_t)world * i;
		if (rc || s != want) {
			report("allreduce-staged-loop", DPT_INT64, 1, HOST, rc,
			       "wrong sum");
			return;
		}
	}
	report("allreduce-staged-loop", DPT_INT64, 1, HOST, 0, NULL);
}

/* ------------------------------------------------------------ main */

/* The compute mode's name: a held context (--hold) would keep every
 * other process off a GPU in an exclusive mode. */
static const char *compute_mode_name(int mode)
{
	switch (mode) {
	case cudaComputeModeDefault:
		return "default";
	case cudaComputeModeProhibited:
		return "prohibited";
	case cudaComputeModeExclusiveProcess:
		return "exclusive-process";
	default:
		return "unknown";
	}
}

static int probe(void)
{
	struct cudaDeviceProp p;
	int n = 0, mode = -1;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess || n < 1) {
		printf("gpus=0 error=%s\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "no device");
		return 0;
	}
	if (cudaGetDeviceProperties(&p, 0) != cudaSuccess)
		snprintf(p.name, sizeof(p.name), "unknown");
	if (cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, 0) !=
	    cudaSuccess)
		mode = -1;
	for (char *c = p.name; *c; c++)
		if (*c == ' ')
			*c = '_';
	printf("gpus=%d name=%s compute_mode=%s\n", n, p.name,
	       compute_mode_name(mode));
	return 0;
}

/* --hold SECONDS: a context on every device, kept until SIGTERM (the
 * default action ends the process, and the driver frees the contexts),
 * the parent's exit or SECONDS. Without a process holding a context, the
 * driver of a GPU without persistence mode tears its state down when the
 * last process exits and builds it again for the next one, which may take
 * seconds on a virtual machine: each test's first CUDA call would pay
 * that inside the coordinator's join timeout. */
static int hold(const char *arg)
{
	char *end;
	long secs = strtol(arg, &end, 10);
	int64_t start = now_ms();
	int n = 0;
	cudaError_t e;

	if (*end || end == arg || secs < 1 || secs > 86400) {
		fprintf(stderr,
			"gpu_coll: --hold takes 1 to 86400 seconds, "
			"not '%s'\n",
			arg);
		return 2;
	}
	/* Gone with the runner, even when it is killed. */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) || getppid() == 1) {
		printf("hold error=the parent is gone\n");
		return 1;
	}
	e = cudaGetDeviceCount(&n);
	for (int i = 0; e == cudaSuccess && i < n; i++) {
		e = cudaSetDevice(i);
		if (e == cudaSuccess)
			e = cudaFree(NULL); /* creates the primary context */
	}
	if (e != cudaSuccess || n < 1) {
		printf("hold error=%s\n",
		       e != cudaSuccess ? cudaGetErrorString(e) : "no device");
		return 1;
	}
	printf("holding devices=%d init_ms=%lld pid=%ld\n", n,
	       (long long)(now_ms() - start), (long)getpid());
	fflush(stdout);
	while (now_ms() - start < secs * 1000)
		sleep(1);
	return 0;
}

static void joined(struct dpt_ctx *ctx, const char *what)
{
	int dev = -1;

	cudaGetDevice(&dev);
	printf("%s rank=%d world=%d generation=%u backend=%s device=%d\n", what,
	       dpt_rank(ctx), dpt_world_size(ctx), dpt_generation(ctx),
	       dpt_backend(ctx), dev);
	fflush(stdout);
}

/* Device allreduces until one fails, for at most LIMIT_MS. */
static int loop_until_lost(struct dpt_ctx *ctx, int64_t limit_ms)
{
	size_t n = (size_t)1 << 20;
	float *d = NULL;
	int64_t start = now_ms(), failed_at;
	int rc = 0;

	if (cudaMalloc((void **)&d, n * sizeof(float)) != cudaSuccess ||
	    cudaMemset(d, 0, n * sizeof(float)) != cudaSuccess) {
		printf("FAIL cudaMalloc\n");
		return -1;
	}
	printf("looping pid=%ld\n", (long)getpid());
	fflush(stdout);
	while (!rc && now_ms() - start < limit_ms)
		rc = dpt_allreduce(ctx, d, d, n, DPT_FLOAT32, DPT_SUM);
	cudaFree(d);
	if (!rc) {
		printf("FAIL no collective failed in %lld ms\n",
		       (long long)limit_ms);
		return -1;
	}
	failed_at = now_ms();
	printf("lost error=%s after_ms=%lld\n", dpt_err_name(rc),
	       (long long)(failed_at - start));
	if (rc != DPT_EPEERLOST && rc != DPT_EGENERATION)
		return -1;
	rc = dpt_rejoin(ctx);
	if (rc) {
		printf("FAIL dpt_rejoin: %s\n", dpt_strerror(rc));
		return -1;
	}
	printf("rejoined rank=%d world=%d generation=%u rejoin_ms=%lld\n",
	       dpt_rank(ctx), dpt_world_size(ctx), dpt_generation(ctx),
	       (long long)(now_ms() - failed_at));
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	struct dpt_ctx *ctx = NULL;
	int rejoin = 0, rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--probe"))
			return probe();
		if (!strcmp(argv[i], "--hold") && i + 1 < argc)
			return hold(argv[i + 1]);
		if (!strcmp(argv[i], "--rejoin")) {
			rejoin = 1;
		} else {
			fprintf(stderr, "usage: gpu_coll [--probe | --hold "
					"SECONDS | --rejoin]\n");
			return 2;
		}
	}
	rc = dpt_init(&ctx, NULL);
	if (rc) {
		printf("FAIL dpt_init: %s\n", dpt_strerror(rc));
		return 1;
	}
	joined(ctx, "joined");
	if (strcmp(dpt_backend(ctx), "nccl")) {
		printf("FAIL backend is %s, not nccl\n", dpt_backend(ctx));
		failures++;
	} else if (rejoin && loop_until_lost(ctx, 60000)) {
		failures++;
	} else {
		check_all(ctx);
	}
	rc = dpt_finalize(&ctx);
	if (rc) {
		printf("FAIL dpt_finalize: %s\n", dpt_strerror(rc));
		failures++;
	}
	printf("done checks=%d failures=%d\n", checks, failures);
	return failures ? 1 : 0;
}

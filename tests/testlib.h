/*
 * What the test programs share, in the manner of libuv's test/task.h.
 *
 * Oracles of the 16-bit float types, for the programs that check the
 * collectives' sums (tests/coll/api.c, tests/coord/coord_worker.c,
 * tests/gpu/gpu_coll.c): the bits are made here from their definition or
 * by the compiler, never by the library, so that the library cannot agree
 * with itself. (tests/unit/test_cpu_reduce.c checks the library's own
 * conversions against a rounding by the definition.)
 *
 * A hash for test inputs, and the step of the simulated training loops
 * (tests/coord/coord_worker.c, bench/rendezvous.c).
 *
 * A running job's status, as the coordinator reports it: what the metrics
 * render (tests/unit/test_metrics.c) and the wire carries
 * (tests/unit/test_wire.c).
 *
 * The fake sender of the coordinator's unit tests (tests/unit/recorder.c,
 * linked into tests/unit/test_coord and tests/unit/test_kv): the state
 * machine and the key-value store are given `recorder`, which decodes what
 * they send and keeps it, with its destination, for the test to read.
 */
#ifndef DPT_TESTS_TESTLIB_H
#define DPT_TESTS_TESTLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <dptrain/dptrain.h>

#include "wire.h"

/* ------------------------------------------------------------ values */

/* A 32-bit hash of X, for test inputs in which no short period may hide
 * a block put at the wrong place. */
static inline uint32_t mix(uint32_t x)
{
	x *= 2654435761u;
	x ^= x >> 15;
	x *= 2246822519u;
	x ^= x >> 13;
	return x;
}

/* ------------------------------------------------- a training step */

/* One step of a simulated training loop on CTX: the sum of the N floats
 * of GRAD in place (none with BARRIERS_ONLY, which leaves the detection
 * of a dead peer to the coordinator), then a barrier. 0, or the first
 * error. */
static inline int train_step(struct dpt_ctx *ctx, float *grad, size_t n,
			     bool barriers_only)
{
	int rc = barriers_only ? 0
			       : dpt_allreduce(ctx, grad, grad, n, DPT_FLOAT32,
					       DPT_SUM);

	return rc ? rc : dpt_barrier(ctx);
}

/* ------------------------------------------------------------ float16s */

/* bfloat16: the top half of a float32, rounded to nearest, ties to even
 * (the tests hold no NaN). */
static inline uint16_t bf16_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline float float_of_bf16(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* IEEE half through the compiler's _Float16 (GCC 12 on x86-64), rounded
 * to nearest, ties to even. */
static inline uint16_t half_of(float f)
{
	_Float16 h = (_Float16)f;
	uint16_t u;

	memcpy(&u, &h, 2);
	return u;
}

static inline float float_of_half(uint16_t u)
{
	_Float16 h;

	memcpy(&h, &u, 2);
	return (float)h;
}

/* ------------------------------------------------- a running job */

/* Job 42, restarted twice, 4 members on 2 nodes (all it expects), at step
 * 130 with step 120 committed, of the run RUN (a URI). */
static inline struct dpt__msg_status status_running(const char *run)
{
	struct dpt__msg_status st = {
		.state = DPT_STATUS_RUNNING,
		.job_id = 42,
		.restarts = 2,
		.world = 4,
		.nodes = 2,
		.expected = 4,
		.step = 130,
		.committed = 120,
		.committed_at = 1700000000000ull,
		.started_at = 1699999990500ull,
		.end_time = 1700003600,
	};
	snprintf(st.run, sizeof(st.run), "%s", run);
	return st;
}

/* ------------------------------------------------- the fake sender */

struct dpt__coord_sender;
struct dpt__msg;

/* Records each message: decoded (one that does not decode fails the test)
 * and kept with its destination, a routing id that is a short name here
 * ("w0", "stepd"). Up to 8192 messages between two sent_clear. */
extern const struct dpt__coord_sender recorder;

/* Forgets the messages recorded, releasing them. */
void sent_clear(void);
/* How many messages were recorded since sent_clear. */
size_t sent_total(void);
/* How many messages of TYPE (an enum dpt__msg_type) went to TO. */
int sent_count(const char *to, int type);
/* The last message of TYPE sent to TO; fails the test if there is none. */
const struct dpt__msg *sent_last(const char *to, int type);
/* The one message sent to TO; fails the test unless there is exactly one. */
const struct dpt__msg *sent_only(const char *to);

#endif

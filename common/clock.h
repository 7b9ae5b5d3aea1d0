/*
 * Monotonic time for deadlines, timeouts and measurements, and the wall
 * clock for what is shown to people: one definition each for the whole
 * tree. CLOCK_MONOTONIC never jumps with the wall clock.
 */
#ifndef DPT_COMMON_CLOCK_H
#define DPT_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds since an arbitrary point (the boot). */
static inline uint64_t dpt__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Milliseconds, on the same clock. */
static inline int64_t dpt__now_ms(void)
{
	return (int64_t)(dpt__now_ns() / 1000000u);
}

/* Unix time in ms: the clock of events, status replies and progress. */
static inline uint64_t dpt__wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

#endif

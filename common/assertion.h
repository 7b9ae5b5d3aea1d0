/*
 * DPT_ASSERT(COND): an internal invariant, the kind curl writes as
 * DEBUGASSERT. It states what the code around it relies on and cannot
 * check cheaply otherwise (a buffer's length within its allocation, a
 * state within the transition table); it is never the handling of bad
 * input, a failed call or a lost peer, which return their error.
 *
 * Without NDEBUG (the default: configure does not define it, so the
 * tests and an ordinary build run this form), a false COND logs
 * "FILE:LINE: FUNCTION: assertion 'COND' failed" at error level through
 * common/log.h's sink and aborts. With NDEBUG, COND is not evaluated
 * and no code is generated; it is still compiled (inside sizeof), so
 * that it keeps its variables used and its types checked.
 *
 * The SPANK plugin links a copy of common/ built with NDEBUG
 * (common/libdptcommon_spank.la): srun and slurmstepd never abort on one.
 *
 * The name is not assert.h: common/ is on the include path (-I), where
 * a header named assert.h would be found by every #include <assert.h>,
 * system headers' included.
 */
#ifndef DPT_COMMON_ASSERTION_H
#define DPT_COMMON_ASSERTION_H

#ifdef NDEBUG
#define DPT_ASSERT(cond) ((void)sizeof(!(cond)))
#else
#define DPT_ASSERT(cond)                                                       \
	((cond) ? (void)0                                                      \
		: dpt__assert_failed(__FILE__, __LINE__, __func__, #cond))
#endif

/* Logs the failed assertion COND of FUNC at FILE:LINE as an error and
 * aborts (common/log.c). Only DPT_ASSERT calls it. */
_Noreturn void dpt__assert_failed(const char *file, int line, const char *func,
				  const char *cond);

#endif

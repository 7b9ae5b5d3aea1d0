/*
 * The fallback job of a grow (doc/shapes.md, "The fallback job"): a job
 * grown to a larger shape L that Slurm said could start at once, but that
 * has not started DPT_SHAPE_FALLBACK_S after its requeue, is set back to
 * the shape C it ran at by a one-CPU job Slurm holds until then. Run as
 * the job's user; each call asks slurmctld.
 */
#ifndef DPT_COORDINATOR_SHAPE_FALLBACK_H
#define DPT_COORDINATOR_SHAPE_FALLBACK_H

#include <stddef.h>
#include <stdint.h>

#include "shape_requeue.h"

/* The grow's "now": Slurm said the larger shape's extra starts within
 * this many seconds (shape_choice.c's NOW_S). */
#define DPT_SHAPE_FALLBACK_S 60

/*
 * dpt__shape_fallback_submit - at the grow of job JOB_ID to P's shape,
 * requeued with restart count RESTARTS and still at its shape C: submit
 * the fallback job that sets it back to C, and say so at the end of
 * P->msg. Returns the fallback job's id, or 0 when there is none (said:
 * the grow goes on without one).
 */
uint32_t dpt__shape_fallback_submit(uint32_t job_id, uint32_t restarts,
				    struct dpt__shape_plan *p);

/*
 * dpt__shape_fallback_seen - at a start of job JOB_ID: cancel the
 * fallback job its Comment names (the job started: it has nothing to
 * do), and whether it fell back: P->chosen, with its shape and the
 * sentence ("fell back to 1 node x 2 GPUs: ...") in P, the Comment then
 * saying it started.
 */
void dpt__shape_fallback_seen(uint32_t job_id, struct dpt__shape_plan *p);

/*
 * dpt__shape_fallback_main - the fallback job's program,
 * `dptrain-coordinator fallback JOB RESTARTS FROM TO` (ARGV[0] the word
 * fallback): job JOB, if still pending with restart count RESTARTS at
 * shape TO, set back to shape FROM (shapes as 1x2 or 1x0:4). Returns the
 * exit status: 0 (done, or nothing to do), 1 (Slurm refused), 2 (usage).
 */
int dpt__shape_fallback_main(int argc, char **argv);

#endif

/*
 * The job's end time and its requeue, from Slurm (doc/walltime.md). The
 * end time is read by a thread of its own, at start and every
 * DPT_WALLTIME_POLL_S seconds: a slow slurmctld never delays the event
 * loop, and a changed time limit is seen.
 */
#ifndef DPT_COORDINATOR_WALLTIME_H
#define DPT_COORDINATOR_WALLTIME_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "requeue.h"

#define DPT_WALLTIME_POLL_S  30
#define DPT_WALLTIME_MSG_MAX 400 /* a requeue verdict's sentence */

struct dpt__walltime;

/*
 * Follow the end time of Slurm job JOB_ID (not 0), or, with JOB_ID 0, use
 * FIXED_END (seconds since the epoch). A job whose time limit is not longer
 * than GRACE (seconds) is refused with DPT_ERANGE, logged. Returns 0 or
 * DPT_ERANGE/DPT_ENOMEM/DPT_EIO.
 */
int dpt__walltime_start(struct dpt__walltime **out, uint32_t job_id,
			time_t fixed_end, long grace);

/* The end time known now (seconds since the epoch); 0 while none is. */
time_t dpt__walltime_end(struct dpt__walltime *w);

/* Stop the thread and free everything; accepts NULL; nulls *W. */
void dpt__walltime_free(struct dpt__walltime **w);

/*
 * After a clean stop: decide with dpt__requeue_decide, say why on stderr
 * and in the job's Comment, then requeue job F->job_id (it ends now and
 * waits in the queue to run again), requeue it held, or leave it to end.
 * Returns 0, or DPT_EIO with the reason logged.
 */
int dpt__walltime_requeue(const struct dpt__requeue_facts *f,
			  enum dpt__requeue_verdict *verdict, char *why,
			  size_t size);

/*
 * End step JOB_ID.STEP_ID (SIGKILL to every task, through slurmctld): the
 * coordinator gave up on the job and a task outlived it. Returns 0, or
 * DPT_EIO with the reason logged.
 */
int dpt__walltime_kill_step(uint32_t job_id, uint32_t step_id);

/*
 * The job's progress for its Comment (`dptrain: run=RUN step=S
 * committed=C restarts=R`, TEXT without the "dptrain: "): stored and
 * handed to the end-time thread, which sets it at most every
 * DPT_WALLTIME_COMMENT_S seconds (the newest text wins; none is lost at
 * the end of an interval). Never blocks on Slurm; no effect without a job
 * id or once dpt__walltime_progress_end() was called.
 */
#define DPT_WALLTIME_COMMENT_S 5
void dpt__walltime_progress(struct dpt__walltime *w, const char *text);
/* No progress comment from now on, and none in flight when this returns:
 * the requeue verdict's comment that follows stays. */
void dpt__walltime_progress_end(struct dpt__walltime *w);

#endif

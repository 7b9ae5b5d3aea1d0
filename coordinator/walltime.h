/*
 * The job's end time and its requeue, from Slurm (doc/walltime.md). The
 * end time is read by a thread of its own, at start and every
 * DPT_WALLTIME_POLL_S seconds: a slow slurmctld never delays the event
 * loop, and a changed time limit is seen.
 */
#ifndef DPT_COORDINATOR_WALLTIME_H
#define DPT_COORDINATOR_WALLTIME_H

#include <stdint.h>
#include <time.h>

#define DPT_WALLTIME_POLL_S 30

struct dpt__walltime;

/*
 * Follow the end time of Slurm job JOB_ID (not 0), or, with JOB_ID 0, use
 * FIXED_END (seconds since the epoch). Returns 0 or DPT_ENOMEM/DPT_EIO.
 */
int dpt__walltime_start(struct dpt__walltime **out, uint32_t job_id,
			time_t fixed_end);

/* The end time known now (seconds since the epoch); 0 while none is. */
time_t dpt__walltime_end(struct dpt__walltime *w);

/* Stop the thread and free everything; accepts NULL; nulls *W. */
void dpt__walltime_free(struct dpt__walltime **w);

/*
 * Requeue Slurm job JOB_ID (it ends now and waits in the queue to run
 * again). Returns 0, or DPT_EIO with the reason logged.
 */
int dpt__walltime_requeue(uint32_t job_id);

#endif

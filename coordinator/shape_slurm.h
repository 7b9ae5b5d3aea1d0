/*
 * The Slurm side of the size decision (doc/shapes.md, "Slurm calls"):
 * when Slurm would start a job at a shape, and the change of a pending
 * job's request to one. Each call says why it failed, for the events and
 * the job's output; the caller then keeps the job's request.
 */
#ifndef DPT_COORDINATOR_SHAPE_SLURM_H
#define DPT_COORDINATOR_SHAPE_SLURM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "shape.h"

/* Where a will-run query may place the shape: anywhere the job may run,
 * or, for a running job's extra size (doc/shapes.md, "Growing back"),
 * only on its own nodes or only on the others. */
enum dpt__shape_where {
	DPT_SHAPE_ANYWHERE,
	DPT_SHAPE_ITS_NODES,
	DPT_SHAPE_OTHER_NODES,
};

/*
 * dpt__shape_will_run - when Slurm would start job JOB_ID's request at
 * shape S (its partition, account, QOS and time limit kept; the nodes,
 * tasks and GPUs of S) placed WHERE, in seconds from NOW (0 when it could
 * start now): slurm_job_will_run2. Returns 0, or -1 with the reason in
 * WHY (SIZE bytes): the job is unknown, or Slurm refused the shape.
 */
int dpt__shape_will_run(uint32_t job_id, const struct dpt__shape *s,
			enum dpt__shape_where where, time_t now,
			double *start_in, char *why, size_t size);

/* What the size decision and the fallback job read of a job. */
struct dpt__shape_job {
	struct dpt__shape shape; /* its nodes, and the GPUs a node of its
				  * tres_per_node, else its tasks a node */
	long limit_s;		 /* its time limit in seconds; 0: none */
	bool pending;
	uint32_t restarts; /* its restart count */
	char comment[512]; /* its Comment, cut to fit */
};

/*
 * dpt__shape_job_read - job JOB_ID's record into *J. Returns 0, or -1
 * with the reason in WHY.
 */
int dpt__shape_job_read(uint32_t job_id, struct dpt__shape_job *j, char *why,
			size_t size);

/*
 * dpt__shape_update - change pending job JOB_ID's request to shape S, and
 * say COMMENT in its Comment (NULL: leave it). Returns 0, or -1 with the
 * reason in WHY.
 */
int dpt__shape_update(uint32_t job_id, const struct dpt__shape *s,
		      const char *comment, char *why, size_t size);

/*
 * dpt__job_comment - say COMMENT in job JOB_ID's Comment (scontrol show
 * job, sacct -o comment): one RPC, the job's request left as it is.
 * Returns 0, or -1 with the reason in WHY.
 */
int dpt__job_comment(uint32_t job_id, const char *comment, char *why,
		     size_t size);

/*
 * dpt__shape_submit - submit, as this process's user, SCRIPT as a batch
 * job of one task of one CPU for a minute in job JOB_ID's partition,
 * account and QOS, named NAME, with COMMENT, started no sooner than
 * BEGIN, its output thrown away, never requeued; its environment PATH
 * and this process's SLURM_CONF. Its id into *ID. Returns 0, or -1 with
 * the reason in WHY.
 */
int dpt__shape_submit(uint32_t job_id, const char *name, const char *script,
		      const char *comment, time_t begin, uint32_t *id,
		      char *why, size_t size);

/* dpt__shape_cancel - cancel job ID, said when Slurm refuses (a job that
 * ended already is no error). */
void dpt__shape_cancel(uint32_t id);

#endif

/*
 * slurmstepd side of the plugin: the task environment.
 *
 * slurm_spank_user_init runs once per node before any task starts:
 * variables common to the node's tasks. slurm_spank_task_init runs in each
 * task's process just before exec: its rank and its GPU.
 * slurm_spank_task_exit runs in slurmstepd when a task ends and tells the
 * coordinator at once, so a crashed worker is evicted without waiting for
 * its heartbeats to time out.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

#include "parse.h"
#include "spank/plugin.h"

static int set(spank_t sp, const char *name, const char *value)
{
	if (spank_setenv(sp, name, value, 1) != ESPANK_SUCCESS) {
		slurm_error("dptrain: cannot set %s", name);
		return -1;
	}
	return 0;
}

static int setf(spank_t sp, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int setf(spank_t sp, const char *name, const char *fmt, ...)
{
	char value[1200];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(value)) {
		slurm_error("dptrain: value of %s too long", name);
		return -1;
	}
	return set(sp, name, value);
}

static const char *every_string(const struct dpt__ckpt_every *e, char *buf,
				size_t size)
{
	switch (e->kind) {
	case DPT_EVERY_STEPS:
		snprintf(buf, size, "%ldsteps", e->value);
		return buf;
	case DPT_EVERY_SECONDS:
		snprintf(buf, size, "%lds", e->value);
		return buf;
	default:
		return "auto";
	}
}

int dpt__stepd_user_init(spank_t sp, const struct dpt__settings *s)
{
	char port[16], restart[16], every[32];
	uint32_t ntasks = 0, nlocal = 0, nodeid = 0, nnodes = 0;
	int rc = 0;

	if (spank_getenv(sp, "DPTRAIN_COORDINATOR_PORT", port, sizeof(port)) !=
	    ESPANK_SUCCESS) {
		slurm_error("dptrain: this step has no coordinator: was it "
			    "started by an srun without the dptrain plugin?");
		return -1;
	}
	if (spank_getenv(sp, "SLURM_RESTART_COUNT", restart, sizeof(restart)) !=
	    ESPANK_SUCCESS)
		snprintf(restart, sizeof(restart), "0");
	if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) ||
	    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &nlocal) ||
	    spank_get_item(sp, S_JOB_NODEID, &nodeid) ||
	    spank_get_item(sp, S_JOB_NNODES, &nnodes)) {
		slurm_error("dptrain: cannot read the step's layout");
		return -1;
	}

	rc |= set(sp, "DPTRAIN_RUN", s->run);
	rc |= set(sp, "DPTRAIN_CKPT_URI", s->ckpt_uri);
	rc |= set(sp, "DPTRAIN_CKPT_EVERY", every_string(&s->every, every,
							 sizeof(every)));
	rc |= setf(sp, "DPTRAIN_KEEP", "%ld", s->keep);
	rc |= setf(sp, "DPTRAIN_GRACE", "%ld", s->grace);
	rc |= set(sp, "DPTRAIN_REQUEUE",
		  s->requeue == DPT_REQUEUE_OFF ? "off" : "auto");
	rc |= setf(sp, "DPTRAIN_MIN_WORKERS", "%ld", s->min_workers);
	rc |= set(sp, "DPTRAIN_BACKEND", s->backend);
	rc |= set(sp, "DPTRAIN_RESTART_COUNT", restart);
	if (s->verbose)
		rc |= set(sp, "DPTRAIN_LOG_LEVEL", "info");
	rc |= setf(sp, "WORLD_SIZE", "%u", ntasks);
	rc |= setf(sp, "LOCAL_WORLD_SIZE", "%u", nlocal);
	rc |= setf(sp, "NODE_RANK", "%u", nodeid);
	rc |= setf(sp, "NUM_NODES", "%u", nnodes);
	return rc ? -1 : 0;
}

/*
 * With GPUs from gres, slurmstepd gives every task of the node all of the
 * node's GPUs of the step. A data-parallel rank wants one: the one of its
 * local rank. When the user already bound GPUs per task (--gpus-per-task,
 * or fewer GPUs than tasks), the binding is theirs and stays.
 */
static int bind_gpu(spank_t sp, int local_rank, uint32_t nlocal)
{
	char devs[256], *save = NULL, *tok;
	char list[64][16];
	int n = 0;

	if (spank_getenv(sp, "CUDA_VISIBLE_DEVICES", devs, sizeof(devs)) !=
	    ESPANK_SUCCESS)
		return 0;
	for (tok = strtok_r(devs, ",", &save); tok && n < 64;
	     tok = strtok_r(NULL, ",", &save))
		snprintf(list[n++], sizeof(list[0]), "%s", tok);
	if (n <= 1 || (uint32_t)n < nlocal || local_rank >= n)
		return 0;
	return set(sp, "CUDA_VISIBLE_DEVICES", list[local_rank]);
}

int dpt__stepd_task_init(spank_t sp)
{
	char launch[64], port[16];
	uint32_t global = 0, nlocal = 0;
	int local = 0;

	/* srun's address as the nodes reach it is known here, not yet in
	 * slurm_spank_user_init. */
	if (spank_getenv(sp, "SLURM_LAUNCH_NODE_IPADDR", launch,
			 sizeof(launch)) != ESPANK_SUCCESS ||
	    spank_getenv(sp, "DPTRAIN_COORDINATOR_PORT", port, sizeof(port)) !=
		    ESPANK_SUCCESS) {
		slurm_error("dptrain: cannot find srun's address "
			    "(SLURM_LAUNCH_NODE_IPADDR)");
		return -1;
	}
	if (setf(sp, "DPTRAIN_COORDINATOR", "tcp://%s:%s", launch, port))
		return -1;

	if (spank_get_item(sp, S_TASK_GLOBAL_ID, &global) ||
	    spank_get_item(sp, S_TASK_ID, &local) ||
	    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &nlocal)) {
		slurm_error("dptrain: cannot read the task's ids");
		return -1;
	}
	if (setf(sp, "RANK", "%u", global) ||
	    setf(sp, "LOCAL_RANK", "%d", local))
		return -1;
	return bind_gpu(sp, local, nlocal);
}

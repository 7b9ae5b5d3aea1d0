#include "config.h"

#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "log.h"
#include "parse.h"
#include "shape_slurm.h"

/* The GPUs a node in tres_per_node's form, which changed in Slurm 23.02:
 * "gres:gpu:N" before, "gres/gpu:N" since. Slurm 22.05 takes the newer
 * form in an update without error, and the job then never starts on the
 * free GPUs (doc/shapes.md, checked on the test cluster). */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
#define GPUS_A_NODE "gres/gpu:%ld"
#else
#define GPUS_A_NODE "gres:gpu:%ld"
#endif

/* libslurm exports the free of a will-run answer without declaring it in
 * slurm.h (22.05): weak, so that a libslurm without it links and the
 * answer (a few short strings) is then left to the process's end. */
extern void slurm_free_will_run_response_msg(will_run_response_msg_t *msg)
	__attribute__((weak));

static const char *slurm_why(int rc)
{
	return slurm_strerror(rc == -1 ? slurm_get_errno() : rc);
}

/* Job JOB_ID's record, from *JOBS (freed by the caller); NULL with the
 * reason in WHY. */
static const slurm_job_info_t *load(uint32_t job_id, job_info_msg_t **jobs,
				    char *why, size_t size)
{
	int rc = slurm_load_job(jobs, job_id, SHOW_ALL);

	if (rc != SLURM_SUCCESS || (*jobs)->record_count == 0) {
		snprintf(why, size, "cannot read job %u: %s", job_id,
			 rc != SLURM_SUCCESS ? slurm_why(rc) : "no record");
		return NULL;
	}
	/* A heterogeneous job answers with each of its components. */
	for (uint32_t i = 0; i < (*jobs)->record_count; i++)
		if ((*jobs)->job_array[i].job_id == job_id)
			return &(*jobs)->job_array[i];
	return &(*jobs)->job_array[0];
}

/*
 * The request of S, for job J, into DESC; GPUS (SIZE bytes) holds its TRES
 * text. The CPUs follow the tasks: Slurm raises a pending job's minimum
 * of CPUs with its tasks and never lowers it by itself. Tasks a node are
 * not sent: Slurm lets only root change them (checked, doc/shapes.md).
 */
static void request(job_desc_msg_t *desc, const slurm_job_info_t *j,
		    const struct dpt__shape *s, char *gpus, size_t size)
{
	long per_node = s->gpus ? s->gpus : s->tasks;
	uint32_t cpt = j->cpus_per_task == NO_VAL16 || j->cpus_per_task == 0
			       ? 1
			       : j->cpus_per_task;

	desc->min_nodes = (uint32_t)s->nodes;
	desc->max_nodes = (uint32_t)s->nodes;
	desc->num_tasks = (uint32_t)dpt__shape_world(s);
	desc->min_cpus = desc->num_tasks * cpt;
	desc->pn_min_cpus = (uint16_t)(per_node * cpt);
	if (s->gpus) {
		snprintf(gpus, size, GPUS_A_NODE, s->gpus);
		desc->tres_per_node = gpus;
	}
}

int dpt__shape_will_run(uint32_t job_id, const struct dpt__shape *s,
			enum dpt__shape_where where, time_t now,
			double *start_in, char *why, size_t size)
{
	job_info_msg_t *jobs = NULL;
	will_run_response_msg_t *resp = NULL;
	const slurm_job_info_t *j = load(job_id, &jobs, why, size);
	job_desc_msg_t desc;
	char gpus[48];
	int rc = -1;

	if (!j)
		goto out;
	slurm_init_job_desc_msg(&desc);
	desc.user_id = j->user_id;
	desc.group_id = j->group_id;
	desc.partition = j->partition;
	desc.account = j->account;
	desc.qos = j->qos;
	desc.time_limit = j->time_limit;
	desc.cpus_per_task = j->cpus_per_task;
	request(&desc, j, s, gpus, sizeof(gpus));
	desc.ntasks_per_node = (uint16_t)(s->gpus ? s->gpus : s->tasks);
	if (where == DPT_SHAPE_ITS_NODES)
		desc.req_nodes = j->nodes;
	else if (where == DPT_SHAPE_OTHER_NODES)
		desc.exc_nodes = j->nodes;
	rc = slurm_job_will_run2(&desc, &resp);
	if (rc != SLURM_SUCCESS || !resp) {
		snprintf(why, size, "Slurm has no start for it: %s",
			 slurm_why(rc));
		rc = -1;
	} else {
		*start_in = resp->start_time > now
				    ? (double)(resp->start_time - now)
				    : 0;
	}
	if (resp && slurm_free_will_run_response_msg)
		slurm_free_will_run_response_msg(resp);
out:
	slurm_free_job_info_msg(jobs);
	return rc == SLURM_SUCCESS ? 0 : -1;
}

/* The GPUs a node in TRES ("gres:gpu:4", "gres/gpu:a100:4"), or 0. */
static long gpus_of(const char *tres)
{
	const char *gpu = tres ? strstr(tres, "gpu") : NULL;
	const char *colon = gpu ? strrchr(gpu, ':') : NULL;
	long n = 0;

	if (colon && colon[1] && dpt__parse_long(colon + 1, 1, 1 << 20, &n))
		n = 0;
	return n;
}

/* The nodes a job holds, or, pending, asks for: the "node=N" of its
 * requested TRES. A pending job's node count is not its request: after an
 * update of its nodes from 1 to 2, Slurm 22.05 showed NumNodes=1 and
 * TRES node=2 (the grow's fallback, doc/shapes.md). */
static long nodes_of(const slurm_job_info_t *j, bool pending)
{
	const char *n = pending && j->tres_req_str
				? strstr(j->tres_req_str, "node=")
				: NULL;
	char *end;
	long nodes;

	if (n && (n == j->tres_req_str || n[-1] == ',') &&
	    isdigit((unsigned char)n[5])) {
		nodes = strtol(n + 5, &end, 10);
		if ((*end == ',' || *end == '\0') && nodes >= 1 &&
		    nodes <= 1 << 20)
			return nodes;
	}
	return j->num_nodes ? (long)j->num_nodes : 1;
}

int dpt__shape_job_read(uint32_t job_id, struct dpt__shape_job *out, char *why,
			size_t size)
{
	job_info_msg_t *jobs = NULL;
	const slurm_job_info_t *j = load(job_id, &jobs, why, size);
	struct dpt__shape *s = &out->shape;

	if (j) {
		out->pending = (j->job_state & JOB_STATE_BASE) == JOB_PENDING;
		s->nodes = nodes_of(j, out->pending);
		s->gpus = gpus_of(j->tres_per_node);
		s->tasks = s->gpus ? 0 : (long)j->num_tasks / s->nodes;
		out->limit_s =
			j->time_limit == INFINITE || j->time_limit == NO_VAL
				? 0
				: (long)j->time_limit * 60;
		out->restarts = j->restart_cnt;
		snprintf(out->comment, sizeof(out->comment), "%s",
			 j->comment ? j->comment : "");
	}
	slurm_free_job_info_msg(jobs);
	return j ? 0 : -1;
}

/* Send DESC, the change of job JOB_ID. */
static int update(uint32_t job_id, job_desc_msg_t *desc, char *why, size_t size)
{
	int rc;

	desc->job_id = job_id;
	rc = slurm_update_job(desc);
	if (rc != SLURM_SUCCESS)
		snprintf(why, size, "Slurm refused the change of job %u: %s",
			 job_id, slurm_why(rc));
	return rc == SLURM_SUCCESS ? 0 : -1;
}

int dpt__shape_update(uint32_t job_id, const struct dpt__shape *s,
		      const char *comment, char *why, size_t size)
{
	job_info_msg_t *jobs = NULL;
	const slurm_job_info_t *j = load(job_id, &jobs, why, size);
	job_desc_msg_t desc;
	char gpus[48];
	int rc = -1;

	if (j) {
		slurm_init_job_desc_msg(&desc);
		desc.comment = (char *)comment;
		/* request() keeps what the shape does not name. */
		request(&desc, j, s, gpus, sizeof(gpus));
		rc = update(job_id, &desc, why, size);
	}
	slurm_free_job_info_msg(jobs);
	return rc;
}

int dpt__job_comment(uint32_t job_id, const char *comment, char *why,
		     size_t size)
{
	job_desc_msg_t desc;

	slurm_init_job_desc_msg(&desc);
	desc.comment = (char *)comment;
	return update(job_id, &desc, why, size);
}

int dpt__shape_submit(uint32_t job_id, const char *name, const char *script,
		      const char *comment, time_t begin, uint32_t *id,
		      char *why, size_t size)
{
	job_info_msg_t *jobs = NULL;
	const slurm_job_info_t *j = load(job_id, &jobs, why, size);
	submit_response_msg_t *resp = NULL;
	const char *conf = getenv("SLURM_CONF");
	char path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin", conf_var[4096];
	char *env[] = {path, conf_var, NULL};
	job_desc_msg_t desc;
	int rc = -1;

	if (!j)
		goto out;
	slurm_init_job_desc_msg(&desc);
	desc.name = (char *)name;
	desc.script = (char *)script;
	desc.comment = (char *)comment;
	desc.user_id = getuid();
	desc.group_id = getgid();
	desc.partition = j->partition;
	desc.account = j->account;
	desc.qos = j->qos;
	desc.time_limit = 1;
	desc.min_nodes = desc.max_nodes = 1;
	desc.num_tasks = 1;
	desc.min_cpus = 1;
	desc.begin_time = begin;
	desc.requeue = 0;
	desc.std_out = desc.std_err = "/dev/null";
	desc.work_dir = "/";
	desc.environment = env;
	desc.env_size = 1;
	if (conf && (size_t)snprintf(conf_var, sizeof(conf_var),
				     "SLURM_CONF=%s", conf) < sizeof(conf_var))
		desc.env_size = 2;
	rc = slurm_submit_batch_job(&desc, &resp);
	if (rc != SLURM_SUCCESS || !resp)
		snprintf(why, size, "Slurm refused it: %s", slurm_why(rc));
	else
		*id = resp->job_id;
	slurm_free_submit_response_response_msg(resp);
out:
	slurm_free_job_info_msg(jobs);
	return rc == SLURM_SUCCESS ? 0 : -1;
}

void dpt__shape_cancel(uint32_t id)
{
	if (slurm_kill_job(id, SIGKILL, 0) != SLURM_SUCCESS &&
	    slurm_get_errno() != ESLURM_ALREADY_DONE &&
	    slurm_get_errno() != ESLURM_INVALID_JOB_ID)
		dpt__warn("cannot cancel job %u: %s", id, slurm_why(-1));
}

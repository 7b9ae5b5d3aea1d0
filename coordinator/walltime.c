/*
 * The job's end time and its requeue, through libslurm (doc/walltime.md).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <dptrain/error.h>

#include "log.h"
#include "parse.h"
#include "service.h"
#include "shape_fallback.h"
#include "shape_requeue.h"
#include "shape_slurm.h"
#include "walltime.h"

struct dpt__walltime {
	uint32_t job_id;
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	bool quit;  /* under LOCK */
	time_t end; /* under LOCK */
	/* The progress comment: under LOCK; COMMENT_LOCK is held while
	 * one is sent, so that progress_end can wait for it. */
	char progress[DPT_WALLTIME_MSG_MAX];
	bool progress_new, progress_over;
	time_t progress_at;
	pthread_mutex_t comment_lock;
};

static void set_comment(uint32_t job_id, const char *why);

static pthread_once_t slurm_once = PTHREAD_ONCE_INIT;

static void slurm_setup(void)
{
	slurm_init(NULL); /* slurm.conf: $SLURM_CONF or the default */
}

/* The error of a libslurm call that returned RC (-1 and errno, or the
 * error itself). */
static const char *slurm_why(int rc)
{
	return slurm_strerror(rc == -1 ? slurm_get_errno() : rc);
}

/* What the coordinator reads of its job's record. */
struct job_facts {
	time_t end;	     /* its end time */
	long limit;	     /* its time limit in seconds; 0: none */
	long tasks_per_node; /* --ntasks-per-node; 0: not given */
};

/* The record of job JOB_ID into *JF. Not slurm_get_end_time(): libslurm
 * answers that from a cache for 60 s, so a TimeLimit changed by scontrol
 * was seen up to a minute late, after the old stop or after Slurm's kill.
 * SHOW_ALL and no SHOW_DETAIL: a job in a hidden partition is found, and
 * slurmctld does not gather the per-node details this does not need.
 * Returns 0, or what slurm_why() takes. */
static int read_job(uint32_t job_id, struct job_facts *jf)
{
	job_info_msg_t *msg = NULL;
	int rc;

	rc = slurm_load_job(&msg, job_id, SHOW_ALL);
	if (rc != SLURM_SUCCESS)
		goto out;
	rc = ESLURM_INVALID_JOB_ID;
	for (uint32_t i = 0; i < msg->record_count; i++) {
		/* A heterogeneous job answers with each of its components;
		 * the one asked for carries its id. */
		if (msg->job_array[i].job_id == job_id ||
		    i + 1 == msg->record_count) {
			const slurm_job_info_t *j = &msg->job_array[i];

			jf->end = j->end_time;
			jf->limit = j->time_limit == INFINITE ||
						    j->time_limit == NO_VAL
					    ? 0
					    : (long)j->time_limit * 60;
			jf->tasks_per_node = j->ntasks_per_node == NO_VAL16
						     ? 0
						     : j->ntasks_per_node;
			rc = 0;
			break;
		}
	}
out:
	slurm_free_job_info_msg(msg);
	return rc;
}

/* Send the progress comment if one is new and the last is
 * DPT_WALLTIME_COMMENT_S old; called and returns with LOCK held. */
static void flush_progress(struct dpt__walltime *w)
{
	char text[DPT_WALLTIME_MSG_MAX];
	time_t now = time(NULL);

	if (!w->progress_new || w->progress_over ||
	    now - w->progress_at < DPT_WALLTIME_COMMENT_S)
		return;
	memcpy(text, w->progress, sizeof(text));
	w->progress_new = false;
	w->progress_at = now;
	pthread_mutex_lock(&w->comment_lock);
	pthread_mutex_unlock(&w->lock);
	set_comment(w->job_id, text);
	pthread_mutex_unlock(&w->comment_lock);
	pthread_mutex_lock(&w->lock);
}

static void *poll_main(void *arg)
{
	struct dpt__walltime *w = arg;
	bool warned = false;
	time_t next_read = 0;

	pthread_mutex_lock(&w->lock);
	while (!w->quit) {
		struct job_facts jf = {0};
		time_t end, wake;
		int rc;

		if (time(NULL) >= next_read) {
			pthread_mutex_unlock(&w->lock);
			rc = read_job(w->job_id, &jf);
			end = jf.end;
			if (rc != 0 && !warned)
				dpt__warn("cannot read the end time of job %u "
					  "from Slurm: %s (retrying every %d "
					  "s)",
					  w->job_id, slurm_why(rc),
					  DPT_WALLTIME_POLL_S);
			warned |= rc != 0;
			pthread_mutex_lock(&w->lock);
			if (rc == 0 && end > 0) {
				if (end != w->end)
					dpt__info("job %u ends at %ld (epoch "
						  "seconds)",
						  w->job_id, (long)end);
				w->end = end;
			}
			next_read = time(NULL) + DPT_WALLTIME_POLL_S;
		}
		flush_progress(w);
		if (w->quit)
			break;
		struct timespec until;
		wake = next_read;
		if (w->progress_new && !w->progress_over &&
		    w->progress_at + DPT_WALLTIME_COMMENT_S < wake)
			wake = w->progress_at + DPT_WALLTIME_COMMENT_S;
		clock_gettime(CLOCK_REALTIME, &until);
		if (wake > until.tv_sec)
			until.tv_sec = wake;
		until.tv_nsec = 0;
		pthread_cond_timedwait(&w->wake, &w->lock, &until);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

void dpt__walltime_progress(struct dpt__walltime *w, const char *text)
{
	if (!w || !w->running)
		return;
	pthread_mutex_lock(&w->lock);
	if (!w->progress_over) {
		snprintf(w->progress, sizeof(w->progress), "%s", text);
		w->progress_new = true;
		pthread_cond_signal(&w->wake);
	}
	pthread_mutex_unlock(&w->lock);
}

void dpt__walltime_progress_end(struct dpt__walltime *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->progress_over = true;
	pthread_mutex_unlock(&w->lock);
	/* A comment being sent now is done once this lock is ours. */
	pthread_mutex_lock(&w->comment_lock);
	pthread_mutex_unlock(&w->comment_lock);
}

/*
 * A grace that is not shorter than the job's time limit stops every run as
 * soon as it starts (and a requeue runs it again): refused before the step
 * starts. A job record that cannot be read now is the poll thread's to
 * retry.
 */
static int check_limit(struct dpt__walltime *w, long grace)
{
	char g[32], l[32];
	struct job_facts jf = {0};

	if (read_job(w->job_id, &jf) != 0)
		return 0;
	w->end = jf.end;
	if (jf.limit == 0 || grace < jf.limit)
		return 0;
	dpt__error("--dp-grace=%s is not shorter than job %u's time limit "
		   "(%s): dptrain would stop every run as soon as it starts; "
		   "ask for a shorter --dp-grace or a longer --time",
		   dpt__format_duration(grace, g, sizeof(g)), w->job_id,
		   dpt__format_duration(jf.limit, l, sizeof(l)));
	return DPT_ERANGE;
}

int dpt__walltime_start(struct dpt__walltime **out, uint32_t job_id,
			time_t fixed_end, long grace)
{
	struct dpt__walltime *w = calloc(1, sizeof(*w));
	int rc;

	*out = NULL;
	if (!w)
		return DPT_ENOMEM;
	w->job_id = job_id;
	w->end = job_id ? 0 : fixed_end;
	pthread_mutex_init(&w->lock, NULL);
	pthread_mutex_init(&w->comment_lock, NULL);
	pthread_cond_init(&w->wake, NULL);
	if (job_id) {
		/* Here, before the coordinator listens: libslurm exits the
		 * process when it cannot read the Slurm configuration, which
		 * must fail the step's start, not the running step. */
		pthread_once(&slurm_once, slurm_setup);
		if ((rc = check_limit(w, grace)) != 0) {
			dpt__walltime_free(&w);
			return rc;
		}
		if (pthread_create(&w->thread, NULL, poll_main, w) != 0) {
			dpt__error("cannot start the end-time thread");
			dpt__walltime_free(&w);
			return DPT_EIO;
		}
		w->running = true;
	}
	*out = w;
	return 0;
}

time_t dpt__walltime_end(struct dpt__walltime *w)
{
	time_t end;

	pthread_mutex_lock(&w->lock);
	end = w->end;
	pthread_mutex_unlock(&w->lock);
	return end;
}

void dpt__walltime_free(struct dpt__walltime **wp)
{
	struct dpt__walltime *w = *wp;

	if (!w)
		return;
	if (w->running) {
		pthread_mutex_lock(&w->lock);
		w->quit = true;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
	}
	pthread_cond_destroy(&w->wake);
	pthread_mutex_destroy(&w->comment_lock);
	pthread_mutex_destroy(&w->lock);
	free(w);
	*wp = NULL;
}

int dpt__walltime_kill_step(uint32_t job_id, uint32_t step_id)
{
	pthread_once(&slurm_once, slurm_setup);
	if (slurm_kill_job_step(job_id, step_id, SIGKILL) != SLURM_SUCCESS) {
		dpt__error("cannot end step %u.%u: %s", job_id, step_id,
			   slurm_why(-1));
		return DPT_EIO;
	}
	return 0;
}

/* Say WHY in the job's Comment (scontrol show job, sacct -o comment). */
static void set_comment(uint32_t job_id, const char *why)
{
	char text[DPT_WALLTIME_MSG_MAX + 16], err[256];

	snprintf(text, sizeof(text), "dptrain: %s", why);
	if (dpt__job_comment(job_id, text, err, sizeof(err)))
		dpt__warn("cannot set the comment of job %u (%s)", job_id, err);
}

/*
 * Give the job, requeued and pending again, the node range of --dp-nodes
 * back (doc/walltime.md, "Requeue onto the node range"): at its start
 * Slurm pinned its node and task counts to what it got. The task count
 * goes back to the minimum's where the job has tasks per node; Slurm
 * raises it again when it starts the job on more nodes.
 */
static void give_range_back(const struct dpt__requeue_facts *f)
{
	struct job_facts jf = {0};
	job_desc_msg_t desc;
	char tasks[48] = "";
	int rc;

	if (f->nodes_min <= 0)
		return;
	slurm_init_job_desc_msg(&desc);
	desc.job_id = f->job_id;
	desc.min_nodes = (uint32_t)f->nodes_min;
	desc.max_nodes = (uint32_t)f->nodes_max;
	if (read_job(f->job_id, &jf) == 0 && jf.tasks_per_node > 0) {
		desc.num_tasks = (uint32_t)(f->nodes_min * jf.tasks_per_node);
		snprintf(tasks, sizeof(tasks), ", %ld tasks per node",
			 jf.tasks_per_node);
	}
	rc = slurm_update_job(&desc);
	if (rc != SLURM_SUCCESS)
		dpt__warn("cannot give job %u its node range %ld-%ld back: %s; "
			  "it waits for as many nodes as it ran on",
			  f->job_id, f->nodes_min, f->nodes_max, slurm_why(rc));
	else
		dpt__info("job %u may start again on %ld to %ld nodes%s",
			  f->job_id, f->nodes_min, f->nodes_max, tasks);
}

/* The shape of --shapes that ends first (doc/shapes.md), chosen while
 * the job still runs, unless a grow chose it already. */
static void plan_shape(const struct dpt__requeue_facts *f,
		       struct dpt__shape_plan *p)
{
	struct dpt__shape_requeue_in in = f->shape_in;

	if (p->chosen)
		return;
	in.run_uri = f->run_uri;
	if (f->committed)
		sscanf(f->committed, "%ld", &in.committed);
	(void)dpt__shape_plan(&in, p);
}

int dpt__walltime_requeue(const struct dpt__requeue_facts *f,
			  enum dpt__requeue_verdict *verdict, char *why,
			  size_t size)
{
	enum dpt__requeue_verdict v = dpt__requeue_decide(f, why, size);
	struct dpt__shape_plan *shape = f->shape;
	bool shapes = f->shape_in.shapes && f->shape_in.shapes->n && shape &&
		      v != DPT_RQ_CAPPED;
	bool grow = shapes && shape->chosen; /* chosen while the step ran */
	uint32_t fallback = 0;
	int rc;

	*verdict = v;
	pthread_once(&slurm_once, slurm_setup);
	/* Said before the requeue: Slurm's own line follows it. */
	if (v == DPT_RQ_REQUEUE)
		dpt__warn("%s", why);
	else
		dpt__error("%s", why);
	set_comment(f->job_id, why);
	if (v == DPT_RQ_CAPPED)
		return 0;
	if (shapes)
		plan_shape(f, shape);
	rc = slurm_requeue(f->job_id, v == DPT_RQ_HOLD ? JOB_REQUEUE_HOLD : 0);
	if (rc != 0) {
		dpt__error("cannot requeue job %u: %s; its checkpoint is "
			   "committed: submit the job again to resume from it",
			   f->job_id, slurm_why(rc));
		return DPT_EIO;
	}
	if (!shapes) {
		give_range_back(f);
		return 0;
	}
	/* A grow's fallback job, submitted while the job is still at its
	 * size, is named in the sentence. Chosen or not, the sentence says
	 * what the job waits for; the Comment, which a refused change did
	 * not carry, too. */
	if (grow && v == DPT_RQ_REQUEUE)
		fallback = dpt__shape_fallback_submit(
			f->job_id, (uint32_t)f->restart_count + 1, shape);
	if (dpt__shape_apply(f->job_id, shape)) {
		set_comment(f->job_id, shape->msg);
		if (fallback)
			dpt__shape_cancel(fallback);
	}
	dpt__warn("job %u %s", f->job_id, shape->msg);
	return 0;
}

/* ------------------------------------------------------------ source */

/* Stops the step once the job's end time is within the grace; returns
 * whether it did. */
static bool check_end_time(struct dpt__walltime *w, const struct options *o,
			   struct dpt__coord *coord, int64_t now)
{
	time_t end = dpt__walltime_end(w), t = time(NULL);
	char who[32] = "the step", when[32], why[160];
	struct tm tm;

	if (end <= 0 || t < end - o->grace)
		return false;
	localtime_r(&end, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	if (o->job_id)
		snprintf(who, sizeof(who), "job %ld", o->job_id);
	snprintf(why, sizeof(why), "%s ends at %s, in %ld s (grace %ld s)", who,
		 when, (long)(end - t), o->grace);
	dpt__coord_stop(coord, why, now);
	return true;
}

static size_t walltime_prepare(void *arg, zmq_pollitem_t *items, size_t max,
			       int64_t now, int64_t *deadline)
{
	struct dpt__service *s = arg;

	(void)items, (void)max;
	if (!s->stopped)
		dpt__loop_deadline(deadline, now + 1000);
	return 0;
}

/* Every turn the state machine learns the end time, which may move
 * (scontrol update); once a second, until it stopped the step, the end
 * time is checked against the grace. */
static void walltime_ready(void *arg, const zmq_pollitem_t *items, size_t n,
			   int64_t now)
{
	struct dpt__service *s = arg;

	(void)items, (void)n;
	if (!s->stopped)
		s->stopped = check_end_time(s->walltime, &s->o, s->coord, now);
	dpt__coord_set_end_time(s->coord, dpt__walltime_end(s->walltime));
}

struct dpt__loop_source dpt__walltime_source(struct dpt__service *s)
{
	return (struct dpt__loop_source){
		.name = "walltime",
		.prepare = walltime_prepare,
		.ready = walltime_ready,
		.arg = s,
		.every_turn = true,
	};
}

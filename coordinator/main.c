/*
 * dptrain-coordinator: one per job step. main() parses the options, builds
 * the service (coordinator/service.h: the CURVE ROUTER, the state machine
 * of coord.c, the end time, metrics and the reporter), runs the loop of
 * its sources (doc/architecture.md, "The coordinator's loop"), ends the
 * step (tasks that outlive it, the requeue, the status files) and cleans
 * up.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <zmq.h>

#include <dptrain/error.h>

#include "clock.h"
#include "log.h"
#include "requeue.h"
#include "shape_fallback.h"
#include "service.h"

/* How long a step that ended waits for its tasks' exit reports. */
#define LINGER_MS 30000

/* Each worker holds one connection, so one descriptor: raise the soft
 * limit to the hard one for large jobs. */
static void raise_fd_limit(long world)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur < world + 64)
		dpt__warn("the open file limit (%ld) is too low for %ld "
			  "workers: raise it (ulimit -n)",
			  (long)rl.rlim_cur, world);
}

/* The state machine's own timers (heartbeats, evictions, join
 * timeouts), every turn: while messages wait unread, a peer's silence may
 * be ours, so no eviction until the backlog is read. */
static size_t tick_prepare(void *arg, zmq_pollitem_t *items, size_t max,
			   int64_t now, int64_t *deadline)
{
	struct dpt__service *s = arg;

	(void)items, (void)max, (void)now;
	dpt__loop_deadline(deadline, dpt__coord_next_deadline(s->coord));
	return 0;
}

static void tick_ready(void *arg, const zmq_pollitem_t *items, size_t n,
		       int64_t now)
{
	struct dpt__service *s = arg;

	(void)items, (void)n, (void)now;
	dpt__coord_on_tick(s->coord, dpt__now_ms(), s->backlog);
}

static bool step_done(void *arg)
{
	struct dpt__service *s = arg;

	return dpt__coord_done(s->coord, &s->exit_code);
}

/* The sources of the step's loop, in the order they run in a turn: ZAP
 * first (a new connection's handshake needs it), the monitor's closes
 * before the messages that follow them, the state machine's timers after
 * the messages, scrapes last. */
static int run_step(struct dpt__service *s)
{
	struct dpt__loop l = {0};
	struct dpt__loop_source tick = {
		.name = "tick",
		.prepare = tick_prepare,
		.ready = tick_ready,
		.arg = s,
		.every_turn = true,
	};
	int rc = dpt__loop_add(&l, dpt__zap_source(&s->zap));

	if (!rc && s->mon)
		rc = dpt__loop_add(&l, dpt__monitor_source(s));
	if (!rc)
		rc = dpt__loop_add(&l, dpt__router_source(s));
	if (!rc && s->sfd >= 0)
		rc = dpt__loop_add(&l, dpt__signals_source(s));
	if (!rc && s->o.parent_pid)
		rc = dpt__loop_add(&l, dpt__parent_source(s));
	if (!rc && s->walltime)
		rc = dpt__loop_add(&l, dpt__walltime_source(s));
	if (!rc && s->grow)
		rc = dpt__loop_add(&l, dpt__grow_source(s));
	if (!rc)
		rc = dpt__loop_add(&l, tick);
	if (!rc && s->metrics)
		rc = dpt__loop_add(&l, dpt__metrics_source(s->metrics));
	return rc ? rc : dpt__loop_run(&l, step_done, s);
}

static size_t linger_prepare(void *arg, zmq_pollitem_t *items, size_t max,
			     int64_t now, int64_t *deadline)
{
	struct dpt__service *s = arg;

	(void)items, (void)max, (void)now;
	dpt__loop_deadline(deadline, s->linger_until);
	return 0;
}

static void linger_ready(void *arg, const zmq_pollitem_t *items, size_t n,
			 int64_t now)
{
	struct dpt__service *s = arg;

	(void)items, (void)n;
	if (now < s->linger_until)
		return;
	dpt__warn("%" PRIu32 " tasks still run %d s after the last worker left",
		  dpt__coord_tasks_running(s->coord), LINGER_MS / 1000);
	s->linger_over = true;
}

static bool linger_done(void *arg)
{
	struct dpt__service *s = arg;

	return s->linger_over || dpt__coord_tasks_running(s->coord) == 0;
}

/*
 * After the last worker left, and before a requeue ends the job: wait for
 * the step's tasks to exit (slurmstepd's plugin reports each one), for a
 * signal (srun's plugin stops the coordinator once the step is over), for
 * the parent to exit, or LINGER_MS at most, so that a requeue does not
 * kill a program that is still winding down after dpt_finalize. Each
 * report comes on a new connection whose CURVE handshake needs the ZAP
 * handler: it is served here too, or no report would ever arrive.
 */
static void linger(struct dpt__service *s)
{
	struct dpt__loop l = {0};
	struct dpt__loop_source timer = {
		.name = "linger",
		.prepare = linger_prepare,
		.ready = linger_ready,
		.arg = s,
	};

	s->lingering = true;
	s->linger_over = false;
	s->linger_until = dpt__now_ms() + LINGER_MS;
	dpt__loop_add(&l, dpt__zap_source(&s->zap));
	if (s->sfd >= 0)
		dpt__loop_add(&l, dpt__signals_source(s));
	if (s->o.parent_pid)
		dpt__loop_add(&l, dpt__parent_source(s));
	dpt__loop_add(&l, timer);
	dpt__loop_add(&l, dpt__router_source(s));
	if (dpt__loop_run(&l, linger_done, s) == 0 &&
	    dpt__coord_tasks_running(s->coord) == 0)
		dpt__info("every task of the step has exited");
	s->lingering = false;
}

/* A task that outlives the coordinator's giving up (stopped, stuck in the
 * kernel, deaf to its error) would hold the step and its nodes until the
 * walltime: once the others had their time to leave, the step ends. */
static void end_outliving_tasks(struct dpt__service *s)
{
	const struct options *o = &s->o;

	linger(s);
	if (dpt__coord_tasks_running(s->coord) == 0)
		return;
	dpt__error("%" PRIu32 " task(s) still run after the job failed: "
		   "ending step %ld.%ld",
		   dpt__coord_tasks_running(s->coord), o->job_id, o->step_id);
	dpt__walltime_kill_step((uint32_t)o->job_id, (uint32_t)o->step_id);
}

/* A `shape` event of REASON: P's shape (none unless chosen), why. */
static void note_shape(struct dpt__service *s, const struct dpt__shape_plan *p,
		       const char *reason)
{
	char spec[32];

	dpt__coord_note(
		s->coord,
		&(struct dpt__coord_note){
			.event = DPT_EV_SHAPE,
			.reason = reason,
			.shape = p->chosen ? dpt__shape_spec(&p->shape, spec,
							     sizeof(spec))
					   : NULL,
			.world = p->chosen
					 ? (uint32_t)dpt__shape_world(&p->shape)
					 : 0,
			.why = p->msg,
		});
}

/* A stopped step that ended cleanly goes back to the queue: its program
 * committed a checkpoint before it left. */
static void requeue(struct dpt__service *s)
{
	const struct options *o = &s->o;
	struct dpt__requeue_facts facts = {
		.job_id = (uint32_t)o->job_id,
		.restart_count = o->restart_count,
		.max_requeues = o->max_requeues,
		.nodes_min = o->nodes_min,
		.nodes_max = o->nodes_max,
		.shape_in = dpt__shape_in(o),
		.shape = &s->shape,
	};
	enum dpt__requeue_verdict v;
	char why[DPT_WALLTIME_MSG_MAX];
	int rq;

	linger(s);
	facts.resumed = dpt__coord_kv_value(s->coord, DPT_KV_RESUMED);
	facts.committed = dpt__coord_kv_value(s->coord, DPT_KV_COMMITTED);
	facts.run_uri = dpt__coord_kv_value(s->coord, DPT_KV_RUN);
	/* The verdict's comment replaces the progress for good. */
	dpt__walltime_progress_end(s->walltime);
	rq = dpt__walltime_requeue(&facts, &v, why, sizeof(why));
	dpt__coord_note(s->coord,
			&(struct dpt__coord_note){
				.event = DPT_EV_REQUEUE,
				.reason = rq			? "refused"
					  : v == DPT_RQ_REQUEUE ? "requeue"
					  : v == DPT_RQ_HOLD	? "hold"
								: "capped",
				.why = why,
				.step = dpt__coord_committed(s->coord),
			});
	if (o->shapes.n && !rq && v != DPT_RQ_CAPPED)
		note_shape(s, &s->shape,
			   !s->shape.chosen   ? "refused"
			   : s->growing	      ? "grow"
			   : s->shape.changed ? "changed"
					      : "kept");
}

/* After the loop: tasks that outlive a step given up, the requeue, the
 * last event, the status files and the endpoint file. */
static void end_step(struct dpt__service *s)
{
	const struct options *o = &s->o;

	if (dpt__coord_gave_up(s->coord) && o->step_id >= 0)
		end_outliving_tasks(s);
	if (s->exit_code == 0 && o->requeue && dpt__coord_stop_sent(s->coord))
		requeue(s);
	dpt__info("exiting with status %d", s->exit_code);
	dpt__coord_note(s->coord, &(struct dpt__coord_note){
					  .event = DPT_EV_END,
					  .status = s->exit_code,
				  });
	dpt__status_file_end(s);
	/* The parent that named itself with --parent-pid and forked this
	 * process made the directory (srun's plugin): remove it whether or
	 * not that parent still runs, because whether it does cannot be
	 * told here. srun killed with SIGKILL sends PR_SET_PDEATHSIG when
	 * the thread that forked us exits, while its other threads may still
	 * be exiting: getppid() and kill(pid, 0) still find it then. A
	 * live srun's own cleanup finds nothing left, which it ignores. */
	if (o->parent_pid) /* not a file someone else made and may reuse */
		dpt__endpoint_file_remove(
			o,
			s->child_of_parent || dpt__process_gone(o->parent_pid));
}

/* The keys of the step, from its secret: 2 (the exit code) when the
 * secret or CURVE is missing. */
static int load_keys(struct dpt__service *s)
{
	char secret[DPT_SECRET_HEX_LEN + 1];
	int rc;

	if (dpt__coord_load_secret(&s->o, secret) != 0)
		return 2;
	rc = dpt__wire_derive_keys(secret, &s->keys);
	explicit_bzero(secret, sizeof(secret));
	if (rc) {
		dpt__error("cannot derive the keys: %s%s", dpt_strerror(rc),
			   rc == DPT_ENOTSUP ? " (libzmq was built without "
					       "CURVE)"
					     : "");
		return 2;
	}
	zmq_z85_decode(s->zap.worker_key, s->keys.worker_public);
	zmq_z85_decode(s->zap.status_key, s->keys.status_public);
	return 0;
}

/* The state machine, the end time, and the reporter of their notes. */
static int start_coord(struct dpt__service *s)
{
	const struct options *o = &s->o;
	struct dpt__coord_config cfg = {
		.world_size = (uint32_t)o->world_size,
		.min_workers = (uint32_t)o->min_workers,
		.heartbeat_ms = (uint32_t)o->heartbeat_ms,
		.timeout_ms = (uint32_t)o->timeout_ms,
		.join_timeout_ms = (uint32_t)o->join_timeout_ms,
		.save_every_ms = o->ckpt_every * 1000,
		.grace_s = o->grace,
	};
	struct dpt__coord_sender sender;

	dpt__router_send_init(s, &sender);
	if (dpt__coord_new(&s->coord, &cfg, &sender, dpt__now_ms()) != 0) {
		dpt__error("out of memory");
		return DPT_ENOMEM;
	}
	if ((o->job_id || o->end_time) &&
	    dpt__walltime_start(&s->walltime, (uint32_t)o->job_id,
				(time_t)o->end_time, o->grace) != 0)
		return DPT_ESYS;
	if (dpt__grow_start(s) != 0) {
		dpt__error("out of memory");
		return DPT_ENOMEM;
	}
	if (o->shapes.n && o->job_id) {
		dpt__shape_fallback_seen((uint32_t)o->job_id, &s->fell_back);
		if (s->fell_back.chosen)
			dpt__warn("job %ld %s", o->job_id, s->fell_back.msg);
	}
	dpt__coord_set_job(s->coord, (uint32_t)o->job_id,
			   (uint32_t)o->restart_count, s->started_ms);
	s->rep = (struct dpt__reporter){
		.walltime = o->job_id ? s->walltime : NULL,
		.coord = s->coord,
		.restarts = (uint32_t)o->restart_count,
		.grace = o->grace,
	};
	dpt__coord_set_reporter(s->coord, dpt__report_note, &s->rep);
	return 0;
}

/* Metrics on the address the router bound (an interface name in --bind
 * is ZeroMQ's to resolve), before the endpoint file, which tells srun the
 * start went well; the run's events and the status file after it:
 * neither may stop the step, so neither fails the start. */
static int announce(struct dpt__service *s)
{
	const struct options *o = &s->o;

	if (o->metrics_port >= 0) {
		char bound[DPT_ENDPOINT_MAX];
		size_t len = sizeof(bound);

		if (zmq_getsockopt(s->router, ZMQ_LAST_ENDPOINT, bound, &len))
			snprintf(bound, sizeof(bound), "%s", o->bind);
		dpt__metrics_start(&s->metrics, bound, s->endpoint,
				   o->metrics_port, &s->metrics_port,
				   dpt__report_metrics_page, &s->rep);
	}
	if (o->endpoint_file &&
	    dpt__endpoint_file_write(o->endpoint_file, s->endpoint) != 0)
		return DPT_EIO;
	if (dpt__events_new(&s->rep.events, (uint32_t)o->job_id,
			    (uint32_t)o->restart_count, s->started_ms) == 0)
		dpt__coord_note(
			s->coord,
			&(struct dpt__coord_note){
				.event = DPT_EV_START,
				.world = (uint32_t)o->world_size,
				.end_time = s->walltime ? dpt__walltime_end(
								  s->walltime)
							: 0,
			});
	if (s->fell_back.chosen)
		note_shape(s, &s->fell_back, "fallback");
	dpt__status_file_write(s);
	printf("%s\n", s->endpoint);
	fflush(stdout);
	dpt__info("listening on %s for %ld workers (min %ld, heartbeat %ld "
		  "ms, timeout %ld ms, %ld i/o threads)",
		  s->endpoint, o->world_size, o->min_workers, o->heartbeat_ms,
		  o->timeout_ms, o->io_threads);
	return 0;
}

/* Everything the loop needs; 0, or the exit code in s->exit_code. */
static int start(struct dpt__service *s)
{
	int rc = load_keys(s);

	if (rc)
		return s->exit_code = rc;
	raise_fd_limit(s->o.world_size);
	s->ctx = zmq_ctx_new();
	if (!s->ctx ||
	    zmq_ctx_set(s->ctx, ZMQ_IO_THREADS, (int)s->o.io_threads) != 0) {
		dpt__error("cannot create a zeromq context: %s",
			   zmq_strerror(errno));
		return s->exit_code = 1;
	}
	rc = dpt__router_open(s);
	if (rc)
		return s->exit_code = rc == DPT_EINVAL ? 2 : 1;
	if (dpt__signals_open(s) || start_coord(s) || announce(s))
		return s->exit_code = 1;
	return 0;
}

static void stop(struct dpt__service *s)
{
	dpt__metrics_server_destroy(&s->metrics);
	if (s->coord)
		dpt__coord_set_reporter(s->coord, NULL, NULL);
	dpt__events_destroy(&s->rep.events);
	dpt__grow_free(s);
	dpt__walltime_free(&s->walltime);
	dpt__coord_destroy(&s->coord);
	if (s->mon)
		zmq_close(s->mon);
	if (s->router)
		zmq_close(s->router);
	if (s->zap.sock)
		zmq_close(s->zap.sock);
	if (s->ctx)
		zmq_ctx_term(s->ctx);
	if (s->sfd >= 0)
		close(s->sfd);
	if (s->pidfd >= 0)
		close(s->pidfd);
	explicit_bzero(&s->keys, sizeof(s->keys));
}

int main(int argc, char **argv)
{
	static struct dpt__service s = {
		.sfd = -1,
		.pidfd = -1,
		.metrics_port = -1,
		.exit_code = 1,
	};

	dpt__log_set_ident(PROG);
	if (argc > 1 && !strcmp(argv[1], "fallback"))
		return dpt__shape_fallback_main(argc - 1, argv + 1);
	s.started_ms = dpt__wall_ms();
	if (dpt__coord_parse_options(argc, argv, &s.o) != 0)
		return 2;
	if (start(&s) == 0) {
		run_step(&s);
		end_step(&s);
	}
	stop(&s);
	return s.exit_code;
}

/*
 * The coordinator's options (dptrain-coordinator --help): the command line
 * over the environment over the defaults, checked together. Each is a
 * setting of common/settings.def, whose COORD column names its field here.
 */
#ifndef DPT_COORDINATOR_OPTIONS_H
#define DPT_COORDINATOR_OPTIONS_H

#include <stdbool.h>

#include "shape.h"
#include "wire.h"

#define PROG "dptrain-coordinator"

struct options {
	long world_size;
	const char *bind;
	const char *advertise;
	const char *secret_file;
	const char *endpoint_file;
	long parent_pid;
	long heartbeat_ms;
	long timeout_ms;
	long min_workers;
	long join_timeout_ms;
	long io_threads;
	long job_id;
	long step_id; /* -1: none */
	long end_time;
	long grace;
	bool requeue;
	long max_requeues; /* -1: no cap */
	long nodes_min;	   /* --nodes: the range a requeue gives back; */
	long nodes_max;	   /* 0: none */
	struct dpt__shapes shapes; /* --shapes; n 0: none */
	long global_batch;	   /* 0: every shape */
	long scaling_efficiency;   /* percent */
	long grow_check;	   /* seconds; 0: never */
	long grow_margin;	   /* restarts */
	long min_shape_interval;   /* seconds */
	long max_shape_changes;	   /* a run's most */
	long restart_count;	   /* the job's requeues so far */
	long ckpt_every;	   /* seconds; 0: no periodic SAVE */
	long metrics_port;	   /* --metrics: -1 off, 0 any free port */
	long log_level;		   /* enum dpt__log_level, set by the parser */
};

/*
 * Parse ARGV and the environment into O. --help and --version print and
 * exit 0. Returns 0, or DPT_EINVAL after a message on stderr that names
 * the option.
 */
int dpt__coord_parse_options(int argc, char **argv, struct options *o);

/* The step secret, from --secret-file or DPTRAIN_SECRET, into SECRET.
 * Returns 0 or an error after logging it. */
int dpt__coord_load_secret(const struct options *o,
			   char secret[DPT_SECRET_HEX_LEN + 1]);

#endif

/*
 * The plugin's configuration: the admin's defaults and bounds (plugstack.conf
 * arguments and dptrain.conf) and the user's options (--dp-*), merged and
 * checked.
 *
 * Every context parses the same way: srun and sbatch to fail early with a
 * message the user sees, slurmstepd to export what the tasks need.
 */
#ifndef DPT_SPANK_SETTINGS_H
#define DPT_SPANK_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "setting_names.h"

#define DPT_CFG_STR   1024
#define DPT_CFG_ROOTS 16

enum dpt__requeue { DPT_REQUEUE_AUTO = 0, DPT_REQUEUE_OFF = 1 };
/*
 * GPU visibility of a task. NONE: CUDA_VISIBLE_DEVICES as Slurm sets it
 * (every GPU of the step on the node; LOCAL_RANK picks one, as under
 * torchrun). RANK: each task sees only the GPU of its local rank.
 */
enum dpt__gpu_bind { DPT_GPU_BIND_NONE = 0, DPT_GPU_BIND_RANK = 1 };

/* "none" or "rank". */
const char *dpt__gpu_bind_string(enum dpt__gpu_bind b);
enum dpt__ckpt_every_kind {
	DPT_EVERY_AUTO = 0, /* DPT_CKPT_EVERY_AUTO_S (common/parse.h) */
	DPT_EVERY_SECONDS = 1,
	DPT_EVERY_STEPS = 2,
};

struct dpt__ckpt_every {
	enum dpt__ckpt_every_kind kind;
	long value; /* seconds or steps */
};

/* E as srun --dp-ckpt-every takes it ("auto", "90s", "10steps"), in BUF. */
const char *dpt__every_string(const struct dpt__ckpt_every *e, char *buf,
			      size_t size);

/* What the admin sets: defaults (def_*) and bounds. */
struct dpt__admin {
	bool enabled;			 /* site-wide switch */
	char config_path[DPT_CFG_STR];	 /* dptrain.conf */
	char coordinator[DPT_CFG_STR];	 /* dptrain-coordinator binary */
	char bind_addr[64];		 /* coordinator's listen address */
	char def_ckpt_root[DPT_CFG_STR]; /* with %u, %j; may be empty */
	char allowed_roots[DPT_CFG_ROOTS][DPT_CFG_STR];
	int n_allowed_roots;
	struct dpt__ckpt_every def_every;
	long min_ckpt_interval; /* seconds; 0: none */
	long node_mtbf;		/* seconds: one node's MTBF (auto interval) */
	long def_keep, max_keep;
	long def_grace, min_grace, max_grace; /* seconds */
	bool allow_requeue_off;
	bool allow_requeue; /* no: dptrain never requeues */
	long max_requeues;  /* default and bound of --dp-max-requeues */
	long heartbeat_ms, timeout_ms;
	char def_backend[8];
	enum dpt__gpu_bind def_gpu_bind;
	bool def_private; /* private=: runs 0700/0600 whatever the umask */
	/* metrics_port=: every step's coordinator serves its metrics there
	 * (0: any free port, -1: off); allow_user_metrics=: whether
	 * --dp-metrics may change that. */
	long metrics_port;
	bool allow_user_metrics;
	bool allow_shapes;	 /* whether --dp-shapes is taken */
	long scaling_efficiency; /* percent, for the sizes never run */
	/* The bounds of a run's changes of size (doc/shapes.md). */
	long grow_check, grow_margin, min_shape_interval, max_shape_changes;
};

/* What the user asked for; *_set says the option was given. */
struct dpt__user {
	bool train;
	char run[256];
	char ckpt_uri[DPT_CFG_STR]; /* --dp-ckpt, before substitution */
	bool every_set, keep_set, grace_set, requeue_set, min_workers_set,
		backend_set, gpu_bind_set, max_requeues_set;
	struct dpt__ckpt_every every;
	long keep, grace, min_workers, max_requeues;
	long nodes_min, nodes_max; /* --dp-nodes; 0: not given */
	char shapes[256];	   /* --dp-shapes; "": not given */
	long global_batch;	   /* --dp-global-batch; 0: not given */
	enum dpt__requeue requeue;
	char backend[8];
	enum dpt__gpu_bind gpu_bind;
	bool torchelastic; /* export TORCHELASTIC_RUN_ID */
	bool verbose;
	bool private_set, private_run; /* --dp-private[=yes|no] */
	bool metrics_set;
	long metrics_port; /* --dp-metrics: -1 off, 0 any free port */
};

/* The merged result handed to the contexts. */
struct dpt__settings {
	char run[256];
	/* The directory (or S3 prefix) that holds runs, with %u and %j
	 * substituted: the library opens CKPT_URI/RUN. */
	char ckpt_uri[DPT_CFG_STR];
	struct dpt__ckpt_every every;
	long keep, grace, min_workers, max_requeues;
	/* --dp-nodes: the node range a requeue gives the job back; 0: none,
	 * the requeued job keeps the count it started on. */
	long nodes_min, nodes_max;
	/* --dp-shapes: the sizes a requeue chooses from; "": none. */
	char shapes[256];
	long global_batch;	 /* 0: none, every shape is taken */
	long scaling_efficiency; /* the site's, percent */
	/* The site's bounds of a run's changes of size, for the coordinator
	 * (seconds, restarts, seconds, a count). */
	long grow_check, grow_margin, min_shape_interval, max_shape_changes;
	/* The site's, for --dp-ckpt-every=auto: one node's MTBF and the
	 * shortest interval, in seconds (stepd.c exports them). */
	long node_mtbf, min_ckpt_interval;
	long heartbeat_ms, timeout_ms; /* the site's, for the coordinator */
	enum dpt__requeue requeue;
	char backend[8];
	enum dpt__gpu_bind gpu_bind;
	bool torchelastic;
	bool verbose;
	bool private_run;  /* DPTRAIN_PRIVATE */
	long metrics_port; /* the coordinator's --metrics; -1: off */
};

/*
 * The forms of a merged value: as an option or key of its kind takes it
 * (a duration "600s"), and as a task's variable holds it, which the
 * library reads (a duration in seconds "600", yes and no as 1 and 0).
 */
enum dpt__value_form { DPT_FORM_OPTION, DPT_FORM_ENV };

/* Error reporting: the plugin passes slurm_error; tests pass their own. */
typedef void (*dpt__report_fn)(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* Built-in defaults, before plugstack arguments and dptrain.conf: each
 * key's default in its row (common/settings.def, spank/settings.c's
 * SITE_KEYS), through the key's own parser. */
void dpt__admin_defaults(struct dpt__admin *a);
/* The same; 0, or DPT_ECONFIG after REPORT names a key whose parser
 * refuses its built-in default (a row's mistake). */
int dpt__admin_set_defaults(struct dpt__admin *a, dpt__report_fn report);
/*
 * Apply plugstack.conf arguments (AC, AV: "key=value" words) and then the
 * config file they name (config=, default /etc/slurm/dptrain.conf; a
 * missing default file is fine, a missing named one is an error). Plugstack
 * arguments win over the file. Returns 0 or DPT_ECONFIG after REPORT.
 */
int dpt__admin_load(struct dpt__admin *a, int ac, char **av,
		    dpt__report_fn report);
/* One admin key; SRC names where it came from in messages. */
int dpt__admin_set(struct dpt__admin *a, const char *key, const char *value,
		   const char *src, dpt__report_fn report);

/*
 * Parse one user option by its name without the leading "dp-" ("train",
 * "ckpt", "keep", ...). VALUE may be NULL for options whose argument is
 * optional, and is ignored for flags ("torchelastic"). Idempotent: calling it
 * twice with the same value gives the same result. Returns 0 or DPT_EINVAL
 * after REPORT with a message that names the option and what it accepts.
 */
int dpt__user_set(struct dpt__user *u, const char *name, const char *value,
		  dpt__report_fn report);

/*
 * Merge U into A's defaults and check A's bounds. USER and JOBID substitute
 * %u and %j in checkpoint URIs; JOB_NAME is the default run name. Returns 0
 * or DPT_ERANGE/DPT_EINVAL after REPORT with a message that gives the bound.
 */
int dpt__settings_resolve(struct dpt__settings *s, const struct dpt__admin *a,
			  const struct dpt__user *u, const char *user,
			  const char *jobid, const char *job_name,
			  dpt__report_fn report);

/*
 * Setting ID's merged value in S (its row's field of struct dpt__settings,
 * common/settings.def) in FORM, written by its kind, in BUF or a constant
 * string; NULL when the row has no value of the plugin's or it is none
 * (no --dp-nodes).
 */
const char *dpt__settings_value(const struct dpt__settings *s,
				enum dpt__setting id, enum dpt__value_form form,
				char *buf, size_t size);

#endif

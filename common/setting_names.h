/*
 * Every name a step's setting has between processes, once
 * (doc/architecture.md, "Adding a setting"): srun's --dp- option, the
 * variable slurmstepd exports to each task and the library reads, and the
 * coordinator's option that srun passes. Code names a setting by its id
 * (DPT_ENV(GRACE), DPT_SET_GRACE): a renamed or removed name changes
 * every side at once, and a misspelt id does not compile.
 */
#ifndef DPT_COMMON_SETTING_NAMES_H
#define DPT_COMMON_SETTING_NAMES_H

/*
 * A row: its id, then OPTION, ENV and FLAG, NULL where the setting has
 * no such name:
 *   OPTION  srun's --dp-OPTION (spank/plugin.c: its argument and help;
 *           spank/settings.c: its parser, admin keys, default and bounds);
 *   ENV     exported to every task (spank/stepd.c), read by the library;
 *   FLAG    dptrain-coordinator's --FLAG (coordinator/options.c), which
 *           srun's plugin passes (spank/srun.c).
 */
/* clang-format off */
#define DPT_SETTINGS(X)                                                       \
	X(RUN, "train", "DPTRAIN_RUN", NULL)                                  \
	X(CKPT_URI, "ckpt", "DPTRAIN_CKPT_URI", NULL)                         \
	X(CKPT_EVERY, "ckpt-every", "DPTRAIN_CKPT_EVERY", "ckpt-every")       \
	X(KEEP, "keep", "DPTRAIN_KEEP", NULL)                                 \
	X(GRACE, "grace", "DPTRAIN_GRACE", "grace")                           \
	X(REQUEUE, "requeue", "DPTRAIN_REQUEUE", "requeue")                   \
	X(MAX_REQUEUES, "max-requeues", "DPTRAIN_MAX_REQUEUES",               \
	  "max-requeues")                                                     \
	X(NODES, "nodes", NULL, "nodes")                                      \
	X(MIN_WORKERS, "min-workers", "DPTRAIN_MIN_WORKERS", "min-workers")   \
	X(BACKEND, "backend", "DPTRAIN_BACKEND", NULL)                        \
	X(LOG_LEVEL, "verbose", "DPTRAIN_LOG_LEVEL", "log-level")             \
	X(GPU_BIND, "gpu-bind", "DPTRAIN_GPU_BIND", NULL)                     \
	X(TORCHELASTIC, "torchelastic", NULL, NULL)                           \
	X(METRICS, "metrics", NULL, "metrics")                                \
	X(PRIVATE, "private", "DPTRAIN_PRIVATE", NULL)                        \
	/* The site's (dptrain.conf) and the job's, no option of srun: */    \
	X(MTBF, NULL, "DPTRAIN_MTBF", NULL)                                   \
	X(MIN_CKPT_INTERVAL, NULL, "DPTRAIN_MIN_CKPT_INTERVAL", NULL)         \
	X(RESTART_COUNT, NULL, "DPTRAIN_RESTART_COUNT", "restart-count")      \
	X(HEARTBEAT_MS, NULL, NULL, "heartbeat-ms")                           \
	X(TIMEOUT_MS, NULL, NULL, "timeout-ms")                               \
	X(BIND, NULL, NULL, "bind")                                           \
	/* The coordinator's own: */                                          \
	X(WORLD_SIZE, NULL, NULL, "world-size")                               \
	X(ADVERTISE, NULL, NULL, "advertise")                                 \
	X(SECRET_FILE, NULL, NULL, "secret-file")                             \
	X(ENDPOINT_FILE, NULL, NULL, "endpoint-file")                         \
	X(PARENT_PID, NULL, NULL, "parent-pid")                               \
	X(JOIN_TIMEOUT_MS, NULL, NULL, "join-timeout-ms")                     \
	X(IO_THREADS, NULL, NULL, "io-threads")                               \
	X(JOB_ID, NULL, NULL, "job-id")                                       \
	X(STEP_ID, NULL, NULL, "step-id")                                     \
	X(END_TIME, NULL, NULL, "end-time")
/* clang-format on */

enum dpt__setting {
#define DPT_SETTING_ID(id, option, env, flag) DPT_SET_##id,
	DPT_SETTINGS(DPT_SETTING_ID)
#undef DPT_SETTING_ID
		DPT_SET_COUNT
};

struct dpt__setting_names {
	const char *option, *env, *flag;
};

/* Indexed by enum dpt__setting (common/setting_names.c). */
extern const struct dpt__setting_names dpt__setting_names[DPT_SET_COUNT];

/* The variable of setting ID (getenv(DPT_ENV(KEEP))). */
#define DPT_ENV(id) (dpt__setting_names[DPT_SET_##id].env)

#endif

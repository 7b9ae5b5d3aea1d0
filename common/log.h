/*
 * Logging shared by the coordinator, the worker library and the plugin.
 *
 * Messages go to a sink: stderr by default, prefixed with the program's
 * name; the SPANK plugin installs a sink that forwards to slurm_error() and
 * slurm_info() so that messages land in srun's output and slurmd's log.
 */
#ifndef DPT_COMMON_LOG_H
#define DPT_COMMON_LOG_H

#include <stdarg.h>
#include <stdbool.h>

enum dpt__log_level {
	DPT_LOG_ERROR = 0,
	DPT_LOG_WARN = 1,
	DPT_LOG_INFO = 2,
	DPT_LOG_DEBUG = 3,
};

typedef void (*dpt__log_sink_fn)(enum dpt__log_level level, const char *msg);

/* Set the prefix ("dptrain-coordinator") written before each message; the
 * string must outlive the process's logging (it is not copied). */
void dpt__log_set_ident(const char *ident);
/* Messages above LEVEL are dropped. The default is DPT_LOG_INFO, or the value
 * of DPTRAIN_LOG_LEVEL (error|warn|info|debug) when set. */
void dpt__log_set_level(enum dpt__log_level level);
enum dpt__log_level dpt__log_get_level(void);
/* Parse "error", "warn", "info", "debug"; returns 0 or DPT_EINVAL. */
int dpt__log_parse_level(const char *s, enum dpt__log_level *out);
/* Replace the sink; NULL restores stderr. */
void dpt__log_set_sink(dpt__log_sink_fn sink);

void dpt__log(enum dpt__log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void dpt__vlog(enum dpt__log_level level, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/*
 * While ON, the calling thread's error messages are kept for
 * dpt_last_error() but not shown: for a thread that retries an operation
 * that logs its failures (the coordinator's writer of a run's events),
 * and says the first failure once itself, as a warning.
 */
void dpt__log_quiet(bool on);

/* Makes MSG the calling thread's dpt_last_error(): what a thread that
 * logged an error for another (the checkpoint writer) hands over. */
void dpt__set_last_error(const char *msg);

#define dpt__error(...) dpt__log(DPT_LOG_ERROR, __VA_ARGS__)
#define dpt__warn(...)	dpt__log(DPT_LOG_WARN, __VA_ARGS__)
#define dpt__info(...)	dpt__log(DPT_LOG_INFO, __VA_ARGS__)
#define dpt__debug(...) dpt__log(DPT_LOG_DEBUG, __VA_ARGS__)

#endif

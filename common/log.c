#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <dptrain/error.h>

#include "assertion.h"
#include "log.h"
#include "setting_names.h"

static struct {
	const char *ident;
	int level; /* -1: not yet read from the environment */
	dpt__log_sink_fn sink;
} logger = {
	.ident = "dptrain",
	.level = -1,
	.sink = NULL,
};

/* dpt_last_error(): the last error-level message of each thread. */
static _Thread_local char last_error[1024];
/* dpt__log_quiet(): this thread's errors are kept, not shown. */
static _Thread_local bool quiet;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void dpt__log_set_ident(const char *ident)
{
	logger.ident = ident ? ident : "dptrain";
}

int dpt__log_parse_level(const char *s, enum dpt__log_level *out)
{
	for (int i = 0; i < 4; i++) {
		if (s && strcmp(s, level_names[i]) == 0) {
			*out = (enum dpt__log_level)i;
			return 0;
		}
	}
	return DPT_EINVAL;
}

enum dpt__log_level dpt__log_get_level(void)
{
	if (logger.level < 0) {
		enum dpt__log_level l = DPT_LOG_INFO;
		/* An unparsable value keeps the default rather than silencing
		 * errors. */
		dpt__log_parse_level(getenv(DPT_ENV(LOG_LEVEL)), &l);
		logger.level = (int)l;
	}
	return (enum dpt__log_level)logger.level;
}

void dpt__log_set_level(enum dpt__log_level level)
{
	logger.level = (int)level;
}

void dpt__log_set_sink(dpt__log_sink_fn sink)
{
	logger.sink = sink;
}

void dpt__vlog(enum dpt__log_level level, const char *fmt, va_list ap)
{
	char msg[sizeof(last_error)];
	bool shown = level <= dpt__log_get_level() &&
		     !(quiet && level == DPT_LOG_ERROR);

	/* An error is kept for dpt_last_error() even when the level hides
	 * it: the caller's exception then says it all the same. */
	if (!shown && level != DPT_LOG_ERROR)
		return;
	/* Truncation of an overlong message is acceptable: the start says
	 * what happened. */
	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (level == DPT_LOG_ERROR)
		memcpy(last_error, msg, sizeof(last_error));
	if (!shown)
		return;
	if (logger.sink) {
		logger.sink(level, msg);
		return;
	}
	struct timeval tv;
	struct tm tm;
	char stamp[32];
	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
	fprintf(stderr, "%s.%03ld %s: %s%s\n", stamp, (long)tv.tv_usec / 1000,
		logger.ident,
		level == DPT_LOG_ERROR	? "error: "
		: level == DPT_LOG_WARN ? "warning: "
					: "",
		msg);
}

void dpt__log(enum dpt__log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	dpt__vlog(level, fmt, ap);
	va_end(ap);
}

void dpt__log_quiet(bool on)
{
	quiet = on;
}

void dpt__set_last_error(const char *msg)
{
	snprintf(last_error, sizeof(last_error), "%s", msg ? msg : "");
}

const char *dpt_last_error(void)
{
	return last_error;
}

void dpt_last_error_clear(void)
{
	last_error[0] = '\0';
}

void dpt__assert_failed(const char *file, int line, const char *func,
			const char *cond)
{
	dpt__error("%s:%d: %s: assertion '%s' failed: a bug in dptrain, "
		   "please report it",
		   file, line, func, cond);
	abort();
}

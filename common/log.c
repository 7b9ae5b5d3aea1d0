#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <dptrain/error.h>

#include "log.h"

static struct {
	const char *ident;
	int level; /* -1: not yet read from the environment */
	dpt__log_sink_fn sink;
} logger = {
	.ident = "dptrain",
	.level = -1,
	.sink = NULL,
};

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
		dpt__log_parse_level(getenv("DPTRAIN_LOG_LEVEL"), &l);
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
	char msg[1024];

	if (level > dpt__log_get_level())
		return;
	/* Truncation of an overlong message is acceptable: the start says
	 * what happened. */
	vsnprintf(msg, sizeof(msg), fmt, ap);
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
		logger.ident, level == DPT_LOG_ERROR ? "error: " :
			      level == DPT_LOG_WARN ? "warning: " : "",
		msg);
}

void dpt__log(enum dpt__log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	dpt__vlog(level, fmt, ap);
	va_end(ap);
}

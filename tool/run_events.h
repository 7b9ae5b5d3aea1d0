/*
 * A run's events as lines, from its storage (tool/run_events.c).
 */
#ifndef DPT_TOOL_RUN_EVENTS_H
#define DPT_TOOL_RUN_EVENTS_H

#include <stddef.h>

/* Call FN(ARG, LINE, LEN) for each line of the events of the run at URI
 * (events.jsonl, then events/ in key order), no newline in LINE. Returns
 * 0, DPT_ENOENT (no events), or a storage error. */
typedef void dpt__events_line_fn(void *arg, const char *line, size_t len);
int dpt__run_events_each(const char *uri, dpt__events_line_fn *fn, void *arg);

#endif

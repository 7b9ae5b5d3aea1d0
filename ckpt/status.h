/*
 * `dptrain status`: the run summary read from events, its rendering, and
 * the command itself (ckpt/status.c).
 */
#ifndef DPT_CKPT_STATUS_H
#define DPT_CKPT_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What a run's events say (doc/checkpoint-format.md, "Events"). */
struct dpt__run_summary {
	size_t lines, bad_lines;
	uint32_t job, restarts, generation, world, nodes;
	int64_t committed, resumed; /* -1: none */
	double committed_time, last_time;
	size_t commits, evictions, failures;
	uint64_t save_bytes;
	double save_seconds;
	char **restart_reasons; /* each requeue's sentence; owned */
	size_t nrestarts;
	char *last_verdict; /* owned */
	char last_event[32];
	int end_status; /* -1: none */
	/* The program's own (dpt_log, dpt_set_total_steps). */
	int64_t step;	      /* newest logged, committed or resumed: -1 none */
	uint64_t total_steps; /* 0: not declared */
	double samples_per_s; /* the newest logged; < 0: none */
	size_t logs;	      /* log lines */
};

void dpt__run_summary_init(struct dpt__run_summary *s);
void dpt__run_summary_release(struct dpt__run_summary *s);
/* One line (LEN bytes, no newline needed); a line that does not parse is
 * counted in bad_lines and skipped. Returns 0 or DPT_ENOMEM. */
int dpt__run_summary_add(struct dpt__run_summary *s, const char *line,
			 size_t len);
/* Every line of TEXT. */
void dpt__run_summary_feed(struct dpt__run_summary *s, const char *text,
			   size_t len);
/* "running", "requeued", "held", "ended", "failed" or "unknown". */
const char *dpt__run_summary_state(const struct dpt__run_summary *s);
/* Read the events of the run at URI. DPT_ENOENT: none. */
int dpt__run_events_read(const char *uri, struct dpt__run_summary *s);
/* Call FN(ARG, LINE, LEN) for each line of the events of the run at URI
 * (events.jsonl, then events/ in key order), no newline in LINE. Returns
 * 0, DPT_ENOENT (no events), or a storage error. */
typedef void dpt__events_line_fn(void *arg, const char *line, size_t len);
int dpt__run_events_each(const char *uri, dpt__events_line_fn *fn, void *arg);
/* FRACTION of STEP out of TOTAL (0..1), or -1 when either is unknown. */
double dpt__run_progress(int64_t step, uint64_t total);

struct dpt__msg_status;
/* Render to F, at NOW (Unix s): a coordinator's answer (with what the
 * run's events add, EV: total steps, samples/s; NULL: nothing), or a
 * run's summary; COLOR: ANSI bold for the title; TTY: a progress bar
 * rather than plain text; JSON: one compact object. */
void dpt__status_render_live(FILE *f, const struct dpt__msg_status *st,
			     const struct dpt__run_summary *ev, double now,
			     bool color, bool tty, bool json);
void dpt__status_render_run(FILE *f, const char *uri,
			    const struct dpt__run_summary *s, double now,
			    bool color, bool tty, bool json);

/* The URI of WHAT, a run name (under $DPTRAIN_CKPT_URI, else a
 * directory) or a URI, into URI (SIZE bytes). Returns 0, or -1 after
 * saying why on stderr. */
int dpt__run_uri(const char *what, char *uri, size_t size);

/* The command: WHAT is a job id, a run name or a run URI. Returns the
 * exit status. */
int dpt__status_main(const char *what, bool json);

#endif

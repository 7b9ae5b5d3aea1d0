/*
 * `dptrain status`: the run summary read from events, its rendering, and
 * the command itself (tool/status.c).
 */
#ifndef DPT_CKPT_STATUS_H
#define DPT_CKPT_STATUS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include "run_events.h"
#include "run_rates.h"

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
	struct dpt__run_rates rates; /* speed a world size, restarts */
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

/* S for a terminal, into BUF (SIZE bytes; truncated): each control
 * character (C0, DEL, C1) and each byte that is not UTF-8 as '?'. What
 * the status shows of a run's events, a coordinator's answer or a status
 * file is the run's owner's to write, and must not drive the reader's
 * terminal. Returns BUF. */
const char *dpt__status_clean(const char *s, char *buf, size_t size);

/* The URI of WHAT, a run name (under $DPTRAIN_CKPT_URI, else a
 * directory) or a URI, into URI (SIZE bytes). Returns 0, or -1 after
 * saying why on stderr. */
int dpt__run_uri(const char *what, char *uri, size_t size);

/* What Slurm says of a job (tool/status_job.c). */
struct dpt__job_record {
	bool known; /* Slurm answered for it */
	uid_t uid;  /* its owner */
	bool running;
	time_t submit, start; /* 0: unknown */
	int restarts;	      /* -1: unknown */
};
/* Ask Slurm about job JOB (digits): squeue (queued, running, or ended
 * within MinJobAge), else sacct. Returns R->known. */
bool dpt__job_record_read(const char *job, struct dpt__job_record *r);
/* Drop root's rights for good: become UID, with its groups. Returns 0,
 * or -1 after saying why on stderr. */
int dpt__status_become(uid_t uid);

/* The status directory of the effective user, open. */
struct dpt__status_dir {
	int fd;
	uid_t owner;
	char path[PATH_MAX];
};
/* Open the status directory of the effective user: OWN (the caller's
 * own jobs), $DPTRAIN_STATUS_DIR or $HOME/.dptrain/jobs; else (root
 * became the job's owner) the owner's ~/.dptrain/jobs. The directory
 * (and ~/.dptrain) must be the user's (or root's) and writable by no one
 * else, and not a symbolic link. Returns 0, or -1 with errno (ENOENT,
 * EACCES; 0 when refused, after saying why on stderr). */
int dpt__status_dir_open(struct dpt__status_dir *d, bool own);
void dpt__status_dir_close(struct dpt__status_dir *d);
/* Read D's JOB.SUFFIX into BUF (SIZE bytes, NUL terminated) and its
 * modification time into *MTIME: opened without following a symbolic
 * link and without blocking on a FIFO, and taken only when it is a
 * regular file of one link, small, owned by D's owner and writable by no
 * one else. Returns 0, or -1 with errno (ENOENT, EACCES; 0 when refused,
 * after saying why on stderr). */
int dpt__status_record_read(const struct dpt__status_dir *d, const char *job,
			    const char *suffix, char *buf, size_t size,
			    time_t *mtime);
/* The value of KEY=VALUE in the status file TEXT into VAL ("" if none). */
void dpt__status_record_get(const char *text, const char *key, char *val,
			    size_t size);
/* Whether EP is tcp://HOST:PORT, HOST a name or an address, PORT digits. */
bool dpt__status_endpoint_ok(const char *ep);

/* The command: WHAT is a job id, a run name or a run URI. Returns the
 * exit status. */
int dpt__status_main(const char *what, bool json);

#endif

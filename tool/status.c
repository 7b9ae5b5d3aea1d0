/*
 * `dptrain status [JOBID | RUN | URI] [--json]`: a running job's state from
 * its coordinator (STATUS, doc/protocol.md), or a run's story from its
 * events (doc/checkpoint-format.md, "Events").
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include <dptrain/error.h>

#include "buf.h"
#include "client.h"
#include "event_line.h"
#include "log.h"
#include "scalars.h"
#include "status.h"
#include "storage/storage.h"
#include "wire.h"
#include "setting_names.h"

#define STATUS_TIMEOUT_MS 3000

/* ------------------------------------------------------------ summary */

void dpt__run_summary_init(struct dpt__run_summary *s)
{
	memset(s, 0, sizeof(*s));
	s->committed = -1;
	s->resumed = -1;
	s->end_status = -1;
	s->step = -1;
	s->samples_per_s = -1;
	dpt__run_rates_init(&s->rates);
}

void dpt__run_summary_release(struct dpt__run_summary *s)
{
	for (size_t i = 0; i < s->nrestarts; i++)
		free(s->restart_reasons[i]);
	free(s->restart_reasons);
	free(s->last_verdict);
	memset(s, 0, sizeof(*s));
}

/* A requeue line: its VERDICT and its reason WHY (either may be NULL). */
static int add_requeue(struct dpt__run_summary *s, const char *v,
		       const char *why)
{
	char **r = realloc(s->restart_reasons, (s->nrestarts + 1) * sizeof(*r));

	if (!r)
		return DPT_ENOMEM;
	s->restart_reasons = r;
	r[s->nrestarts] = strdup(why ? why : "");
	if (r[s->nrestarts])
		s->nrestarts++;
	free(s->last_verdict);
	s->last_verdict = strdup(v ? v : "");
	return 0;
}

int dpt__run_summary_add(struct dpt__run_summary *s, const char *line,
			 size_t len)
{
	struct dpt__event_line l;
	int rc = 0;

	if (dpt__event_line_parse(&l, line, len)) {
		s->bad_lines++;
		return 0;
	}
	s->lines++;
	s->job = (uint32_t)dpt__event_num(&l, DPT_EVF_JOB, s->job);
	s->restarts =
		(uint32_t)dpt__event_num(&l, DPT_EVF_RESTARTS, s->restarts);
	s->last_time = dpt__event_num(&l, DPT_EVF_TIME, s->last_time);
	snprintf(s->last_event, sizeof(s->last_event), "%s", l.name);
	switch (l.event) {
	case DPT_EV_START:
		s->end_status = -1;
		break;
	case DPT_EV_GENERATION:
		s->generation =
			(uint32_t)dpt__event_num(&l, DPT_EVF_GENERATION, 0);
		s->world = (uint32_t)dpt__event_num(&l, DPT_EVF_WORLD, 0);
		s->nodes = (uint32_t)dpt__event_num(&l, DPT_EVF_NODES, 0);
		break;
	case DPT_EV_COMMIT:
		s->committed = (int64_t)dpt__event_num(&l, DPT_EVF_STEP, -1);
		s->committed_time = dpt__event_num(&l, DPT_EVF_TIME, 0);
		s->commits++;
		/* Logs of later steps may come before their commit line. */
		if (s->committed > s->step)
			s->step = s->committed;
		break;
	case DPT_EV_LOG: {
		json_t *sc = dpt__event_object(&l, DPT_EVF_SCALARS);
		json_t *sps = json_object_get(sc, "samples_per_s");

		s->logs++;
		s->step = (int64_t)dpt__event_num(&l, DPT_EVF_STEP,
						  (double)s->step);
		if (json_is_number(sps))
			s->samples_per_s = json_number_value(sps);
		break;
	}
	case DPT_EV_TOTAL_STEPS:
		s->total_steps = (uint64_t)dpt__event_num(
			&l, DPT_EVF_TOTAL_STEPS, (double)s->total_steps);
		break;
	case DPT_EV_SAVE:
		s->save_bytes = (uint64_t)dpt__event_num(&l, DPT_EVF_BYTES, 0);
		s->save_seconds = dpt__event_num(&l, DPT_EVF_SECONDS, 0);
		break;
	case DPT_EV_RESUME:
		s->resumed = (int64_t)dpt__event_num(&l, DPT_EVF_STEP, -1);
		/* A resume goes back to its step: what was logged after it
		 * in the run before is redone. */
		s->step = s->resumed;
		break;
	case DPT_EV_EVICT:
		s->evictions++;
		break;
	case DPT_EV_FAILURE:
		s->failures++;
		break;
	case DPT_EV_REQUEUE:
		rc = add_requeue(s, dpt__event_str(&l, DPT_EVF_VERDICT),
				 dpt__event_str(&l, DPT_EVF_REASON));
		break;
	case DPT_EV_END:
		s->end_status = (int)dpt__event_num(&l, DPT_EVF_STATUS, -1);
		break;
	default: /* the others say nothing a summary shows */
		break;
	}
	dpt__run_rates_add(&s->rates, &l);
	dpt__event_line_release(&l);
	return rc;
}

void dpt__run_summary_feed(struct dpt__run_summary *s, const char *text,
			   size_t len)
{
	size_t off = 0;

	while (off < len) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;

		if (n)
			dpt__run_summary_add(s, text + off, n);
		off += n + 1;
	}
}

/* What the run is doing now, in a word, from its last lines. */
const char *dpt__run_summary_state(const struct dpt__run_summary *s)
{
	bool requeue = !strcmp(s->last_event, dpt__event_name(DPT_EV_REQUEUE));

	if (!s->lines)
		return "unknown";
	if (requeue || !strcmp(s->last_event, dpt__event_name(DPT_EV_END))) {
		if (s->last_verdict && requeue)
			return !strcmp(s->last_verdict, "requeue") ? "requeued"
			       : !strcmp(s->last_verdict, "hold")  ? "held"
								   : "ended";
		return s->end_status == 0 ? "ended" : "failed";
	}
	return "running";
}

/* ------------------------------------------------------------ render */

/* The length of the UTF-8 character at S when it is a printable one, or
 * 0: a C0 control, DEL, a C1 control (U+0080..U+009F, which some
 * terminals obey like ESC [), or bytes that are not UTF-8. */
static size_t printable_len(const unsigned char *s)
{
	unsigned cp;
	size_t n;

	if (s[0] < 0x80)
		return s[0] >= 0x20 && s[0] != 0x7f;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1fu;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0fu;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07u;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3fu);
	}
	if (cp < 0xa0 || (n == 3 && cp < 0x800) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff)
		return 0;
	return n;
}

const char *dpt__status_clean(const char *s, char *buf, size_t size)
{
	size_t out = 0;

	while (*s && out + 1 < size) {
		size_t n = printable_len((const unsigned char *)s);

		if (!n) {
			/* One '?' for a C1 control, two bytes in UTF-8. */
			bool c1 = (unsigned char)s[0] == 0xc2 &&
				  ((unsigned char)s[1] & 0xe0) == 0x80;

			buf[out++] = '?';
			s += c1 ? 2 : 1;
		} else if (out + n < size) {
			memcpy(buf + out, s, n);
			out += n;
			s += n;
		} else {
			break;
		}
	}
	buf[out] = '\0';
	return buf;
}

#define CLEAN_MAX (PATH_MAX + 32)

static void fmt_time(double t, char *buf, size_t size)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (t <= 0) {
		snprintf(buf, size, "-");
		return;
	}
	localtime_r(&tt, &tm);
	strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
}

static void fmt_age(double secs, char *buf, size_t size)
{
	long s = secs < 0 ? 0 : (long)secs;

	if (s < 120)
		snprintf(buf, size, "%lds", s);
	else if (s < 7200)
		snprintf(buf, size, "%ldm%02lds", s / 60, s % 60);
	else
		snprintf(buf, size, "%ldh%02ldm", s / 3600, s / 60 % 60);
}

double dpt__run_progress(int64_t step, uint64_t total)
{
	if (step < 0 || total == 0)
		return -1;
	return (uint64_t)step >= total ? 1.0 : (double)step / (double)total;
}

/* The step, its progress and samples/s, as text or into O. */
static void put_progress(FILE *f, json_t *o, int64_t step, uint64_t total,
			 double sps, bool tty)
{
	double p = dpt__run_progress(step, total);
	char bar[64];

	if (o) {
		json_object_set_new(
			o, "step", step < 0 ? json_null() : json_integer(step));
		json_object_set_new(o, "total_steps",
				    total ? json_integer((json_int_t)total)
					  : json_null());
		json_object_set_new(o, "progress",
				    p < 0 ? json_null() : json_real(p));
		json_object_set_new(o, "samples_per_s",
				    sps < 0 ? json_null() : json_real(sps));
		return;
	}
	if (step < 0)
		return;
	fprintf(f, "  step       %" PRId64, step);
	if (total && tty) {
		dpt__progress_bar(bar, sizeof(bar), (uint64_t)step, total, 20);
		fprintf(f, " of %" PRIu64 "  %s", total, bar);
	} else if (total) {
		fprintf(f, " of %" PRIu64 " (%d%%)", total, (int)(p * 100.0));
	}
	fputc('\n', f);
	if (sps >= 0)
		fprintf(f, "  samples/s  %.1f\n", sps);
}

/* The live status as one JSON object on a line (dptrain status --json). */
static void render_live_json(FILE *f, const struct dpt__msg_status *st,
			     const char *state, int64_t step, uint64_t total,
			     double sps, double now)
{
	json_t *o = json_object();
	json_object_set_new(o, "source", json_string("coordinator"));
	json_object_set_new(o, "job", json_integer(st->job_id));
	json_object_set_new(o, "state", json_string(state));
	json_object_set_new(o, "stopping",
			    json_boolean(st->flags & DPT_STATUS_STOPPING));
	json_object_set_new(o, "run", json_string(st->run));
	json_object_set_new(o, "world", json_integer(st->world));
	json_object_set_new(o, "nodes", json_integer(st->nodes));
	json_object_set_new(o, "hosts", json_string(st->hosts));
	json_object_set_new(o, "expected", json_integer(st->expected));
	json_object_set_new(o, "generation", json_integer(st->generation));
	put_progress(NULL, o, step, total, sps, false);
	json_object_set_new(o, "committed",
			    st->committed == DPT_STATUS_NO_STEP
				    ? json_null()
				    : json_integer((json_int_t)st->committed));
	json_object_set_new(
		o, "committed_age",
		st->committed_at
			? json_real(now - (double)st->committed_at / 1000.0)
			: json_null());
	json_object_set_new(o, "end_time",
			    st->end_time
				    ? json_integer((json_int_t)st->end_time)
				    : json_null());
	json_object_set_new(o, "time_left",
			    st->end_time ? json_real((double)st->end_time - now)
					 : json_null());
	json_object_set_new(o, "stop_at",
			    st->stop_at ? json_integer((json_int_t)st->stop_at)
					: json_null());
	json_object_set_new(o, "next_save",
			    st->next_save
				    ? json_real((double)st->next_save / 1000.0)
				    : json_null());
	json_object_set_new(o, "restarts", json_integer(st->restarts));
	json_object_set_new(o, "last", json_string(st->last));
	json_dumpf(o, f, JSON_COMPACT | JSON_ENSURE_ASCII);
	fputc('\n', f);
	json_decref(o);
}

void dpt__status_render_live(FILE *f, const struct dpt__msg_status *st,
			     const struct dpt__run_summary *ev, double now,
			     bool color, bool tty, bool json)
{
	int64_t step = st->step == DPT_STATUS_NO_STEP ? -1 : (int64_t)st->step;
	uint64_t total = ev ? ev->total_steps : 0;
	double sps = ev ? ev->samples_per_s : -1;

	static const char *const states[] = {"?", "gathering", "id_wait",
					     "running", "done"};
	const char *state = st->state <= 4 ? states[st->state] : "?";
	char a[64], b[64], c[CLEAN_MAX];

	if (json) {
		render_live_json(f, st, state, step, total, sps, now);
		return;
	}
	fprintf(f, "%sjob %" PRIu32 "%s  %s%s\n", color ? "\033[1m" : "",
		st->job_id, color ? "\033[0m" : "", state,
		st->flags & DPT_STATUS_STOPPING ? " (stopping)" : "");
	fprintf(f, "  run        %s\n",
		st->run[0] ? dpt__status_clean(st->run, c, sizeof(c)) : "-");
	fprintf(f,
		"  world      %" PRIu32 " of %" PRIu32 " ranks on %" PRIu32
		" node(s), generation %" PRIu32 ": %s\n",
		st->world, st->expected, st->nodes, st->generation,
		st->hosts[0] ? dpt__status_clean(st->hosts, c, sizeof(c))
			     : "-");
	put_progress(f, NULL, step, total, sps, tty);
	if (st->committed == DPT_STATUS_NO_STEP) {
		fprintf(f, "  committed  none yet\n");
	} else {
		fmt_age(now - (double)st->committed_at / 1000.0, a, sizeof(a));
		fprintf(f, "  committed  step %" PRIu64 ", %s ago\n",
			st->committed, a);
	}
	if (st->end_time) {
		fmt_time((double)st->end_time, a, sizeof(a));
		fmt_age((double)st->end_time - now, b, sizeof(b));
		fprintf(f, "  ends       %s (%s left)\n", a, b);
	} else {
		fprintf(f, "  ends       no end time\n");
	}
	if (st->stop_at && !(st->flags & DPT_STATUS_STOPPING)) {
		fmt_time((double)st->stop_at, a, sizeof(a));
		fmt_age((double)st->stop_at - now, b, sizeof(b));
		fprintf(f, "  stops      %s (in %s: checkpoint, requeue)\n", a,
			b);
	}
	if (st->next_save) {
		fmt_age((double)st->next_save / 1000.0 - now, a, sizeof(a));
		fprintf(f, "  next save  in %s (--dp-ckpt-every)\n", a);
	}
	fprintf(f, "  restarts   %" PRIu32 "\n", st->restarts);
	if (st->last[0])
		fprintf(f, "  last       %s\n",
			dpt__status_clean(st->last, c, sizeof(c)));
}

void dpt__status_render_run(FILE *f, const char *uri,
			    const struct dpt__run_summary *s, double now,
			    bool color, bool tty, bool json)
{
	char a[64], b[64], c[CLEAN_MAX];

	if (json) {
		json_t *o = json_object(), *r = json_array();
		json_object_set_new(o, "source", json_string("events"));
		json_object_set_new(o, "run", json_string(uri));
		json_object_set_new(o, "job", json_integer(s->job));
		json_object_set_new(o, "state",
				    json_string(dpt__run_summary_state(s)));
		json_object_set_new(o, "world", json_integer(s->world));
		json_object_set_new(o, "nodes", json_integer(s->nodes));
		json_object_set_new(o, "committed",
				    s->committed < 0
					    ? json_null()
					    : json_integer(s->committed));
		json_object_set_new(o, "committed_time",
				    s->committed < 0
					    ? json_null()
					    : json_real(s->committed_time));
		json_object_set_new(o, "commits", json_integer(s->commits));
		put_progress(NULL, o, s->step, s->total_steps, s->samples_per_s,
			     false);
		dpt__run_rates_show(NULL, o, &s->rates);
		json_object_set_new(o, "restarts", json_integer(s->restarts));
		for (size_t i = 0; i < s->nrestarts; i++)
			json_array_append_new(
				r, json_string(s->restart_reasons[i]));
		json_object_set_new(o, "requeues", r);
		json_object_set_new(o, "evictions", json_integer(s->evictions));
		json_object_set_new(o, "failures", json_integer(s->failures));
		json_object_set_new(o, "last_event",
				    json_string(s->last_event));
		json_object_set_new(o, "last_time", json_real(s->last_time));
		json_dumpf(o, f, JSON_COMPACT | JSON_ENSURE_ASCII);
		fputc('\n', f);
		json_decref(o);
		return;
	}
	fprintf(f, "%srun %s%s  %s", color ? "\033[1m" : "",
		dpt__status_clean(uri, c, sizeof(c)), color ? "\033[0m" : "",
		dpt__run_summary_state(s));
	if (s->job)
		fprintf(f, "  (job %" PRIu32 ")", s->job);
	fputc('\n', f);
	if (s->world)
		fprintf(f,
			"  world      %" PRIu32 " ranks on %" PRIu32
			" node(s), generation %" PRIu32 "\n",
			s->world, s->nodes, s->generation);
	if (s->committed < 0) {
		fprintf(f, "  committed  none\n");
	} else {
		fmt_time(s->committed_time, a, sizeof(a));
		fmt_age(now - s->committed_time, b, sizeof(b));
		fprintf(f, "  committed  step %" PRId64 " at %s (%s ago)\n",
			s->committed, a, b);
	}
	put_progress(f, NULL, s->step, s->total_steps, s->samples_per_s, tty);
	if (s->save_seconds > 0)
		fprintf(f,
			"  last save  %" PRIu64
			" bytes in %.3f s (%.1f MB/s)\n",
			s->save_bytes, s->save_seconds,
			(double)s->save_bytes / s->save_seconds / 1e6);
	dpt__run_rates_show(f, NULL, &s->rates);
	fprintf(f, "  restarts   %" PRIu32 "\n", s->restarts);
	for (size_t i = 0; i < s->nrestarts; i++)
		fprintf(f, "    %zu. %s\n", i + 1,
			dpt__status_clean(s->restart_reasons[i], c, sizeof(c)));
	if (s->evictions || s->failures)
		fprintf(f, "  evictions  %zu, failures %zu\n", s->evictions,
			s->failures);
	fmt_time(s->last_time, a, sizeof(a));
	fprintf(f, "  last event %s at %s\n",
		dpt__status_clean(s->last_event, c, sizeof(c)), a);
}

/* ------------------------------------------------------------ sources */

static void summary_line(void *arg, const char *line, size_t len)
{
	dpt__run_summary_add(arg, line, len);
}

/* The events of the run URI: events.jsonl, then events/ in key order. */
int dpt__run_events_read(const char *uri, struct dpt__run_summary *s)
{
	int rc = dpt__run_events_each(uri, summary_line, s);

	if (!rc && !s->lines)
		rc = DPT_ENOENT;
	return rc;
}

/* ------------------------------------------------------------ jobs */

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int status_of_run(const char *uri, bool json, bool color, bool tty)
{
	struct dpt__run_summary s;
	char c[CLEAN_MAX];
	int rc;

	dpt__run_summary_init(&s);
	rc = dpt__run_events_read(uri, &s);
	if (rc == DPT_ENOENT)
		fprintf(stderr,
			"dptrain: no events of a run at '%s': not a run, or "
			"one that has not started (check the URI)\n",
			dpt__status_clean(uri, c, sizeof(c)));
	else if (rc)
		fprintf(stderr, "dptrain: cannot read the events of '%s': %s\n",
			dpt__status_clean(uri, c, sizeof(c)), dpt_strerror(rc));
	else
		dpt__status_render_run(stdout, uri, &s, now_s(), color, tty,
				       json);
	dpt__run_summary_release(&s);
	return rc ? 1 : 0;
}

/* Seconds by which a status file may seem older than its job: the clocks
 * of the node that wrote it, of its file server and of slurmctld differ. */
#define STALE_SLACK_S 60

static int permission_denied(const char *job)
{
	fprintf(stderr,
		"dptrain: permission denied: job %s is another user's; only "
		"its owner and root may ask for its status\n",
		job);
	return 1;
}

/* Whether JOB.live, written at MTIME, is the running job's: Slurm says
 * that the job runs and it started before the file was written. Another
 * job of the same id (ids start again when slurmctld loses its state)
 * left it otherwise, or a coordinator killed before it could remove it.
 * Without an answer from Slurm it is taken as it is. */
static bool live_is_current(const char *job, const struct dpt__job_record *r,
			    time_t mtime)
{
	char when[64];

	if (!r->known)
		return true;
	if (!r->running) {
		fprintf(stderr,
			"dptrain: job %s is not running: its status file is "
			"stale (ignored)\n",
			job);
		return false;
	}
	if (r->start && mtime + STALE_SLACK_S < r->start) {
		fmt_time((double)mtime, when, sizeof(when));
		fprintf(stderr,
			"dptrain: the status file of job %s was written at "
			"%s, before the job started: a stale record of an "
			"earlier job with the same id (ignored)\n",
			job, when);
		return false;
	}
	return true;
}

/* Ask the coordinator that the status file TEXT names. Returns 0 when it
 * answered (and its answer is shown), else -1. */
static int ask_coordinator(const char *job, const char *text, bool json,
			   bool color, bool tty)
{
	char ep[512], sk[64], pk[64], sec[64];
	struct dpt__msg_status st;
	struct dpt__run_summary ev;
	int rc;

	dpt__status_record_get(text, "endpoint", ep, sizeof(ep));
	if (!dpt__status_endpoint_ok(ep)) {
		fprintf(stderr,
			"dptrain: the status file of job %s names no "
			"coordinator at tcp://HOST:PORT (ignored)\n",
			job);
		return -1;
	}
	dpt__status_record_get(text, "server_key", sk, sizeof(sk));
	dpt__status_record_get(text, "public_key", pk, sizeof(pk));
	dpt__status_record_get(text, "secret_key", sec, sizeof(sec));
	rc = dpt__client_status(ep, sk, pk, sec, STATUS_TIMEOUT_MS, &st);
	explicit_bzero(sec, sizeof(sec));
	if (rc) {
		fprintf(stderr,
			"dptrain: the coordinator of job %s did not answer "
			"(%s): reading the run's events instead\n",
			job, dpt_strerror(rc));
		return -1;
	}
	/* The total and samples/s are in the events, which the coordinator
	 * writes within a second or two: no need to carry them in
	 * STATUS_REPLY. */
	dpt__run_summary_init(&ev);
	if (st.run[0])
		(void)dpt__run_events_read(st.run, &ev);
	dpt__status_render_live(stdout, &st, &ev, now_s(), color, tty, json);
	dpt__run_summary_release(&ev);
	return 0;
}

/* The run of JOB, from JOB.run in D: what it did, from its events. */
static int status_of_job_run(const char *job, const struct dpt__status_dir *d,
			     const struct dpt__job_record *r, bool json,
			     bool color, bool tty)
{
	char text[1024], run[DPT_WIRE_TEXT_MAX + 1], when[64];
	time_t mtime;

	if (dpt__status_record_read(d, job, "run", text, sizeof(text),
				    &mtime) != 0) {
		if (errno == EACCES)
			return permission_denied(job);
		if (errno == ENOENT)
			fprintf(stderr,
				"dptrain: no job %s of dptrain known here: not "
				"running with --dp-train, or not yours "
				"(dptrain status RUN or URI reads a run's "
				"events)\n",
				job);
		return 1;
	}
	/* A job writes JOB.run when its coordinator ends, after the job was
	 * submitted; a requeue submits it again, so only a job never
	 * requeued can tell. */
	if (r->known && r->restarts == 0 && r->submit &&
	    mtime + STALE_SLACK_S < r->submit) {
		fmt_time((double)mtime, when, sizeof(when));
		fprintf(stderr,
			"dptrain: the run file of job %s was written at %s, "
			"before the job was submitted: a stale record of an "
			"earlier job with the same id (ignored); job %s has "
			"no status yet\n",
			job, when, job);
		return 1;
	}
	dpt__status_record_get(text, "run", run, sizeof(run));
	if (!run[0]) {
		fprintf(stderr, "dptrain: '%s/%s.run' names no run\n", d->path,
			job);
		return 1;
	}
	return status_of_run(run, json, color, tty);
}

/* Job JOB: from its coordinator while it runs, else from its run's
 * events, through the status files of its owner only. Root asks Slurm
 * who the owner is and becomes that user first. */
static int status_of_job(const char *job, bool json, bool color, bool tty)
{
	struct dpt__job_record r;
	struct dpt__status_dir d;
	char text[1024];
	bool own = true;
	time_t mtime;
	int rc;

	dpt__job_record_read(job, &r);
	if (r.known && r.uid != geteuid()) {
		if (geteuid() != 0)
			return permission_denied(job);
		if (dpt__status_become(r.uid) != 0)
			return 1;
		own = false;
	}
	if (dpt__status_dir_open(&d, own) != 0) {
		if (errno == EACCES)
			return permission_denied(job);
		if (errno)
			fprintf(stderr,
				"dptrain: no job %s of dptrain known here: "
				"no status directory%s%s (dptrain status RUN "
				"or URI reads a run's events)\n",
				job, d.path[0] ? " " : "", d.path);
		return 1;
	}
	rc = dpt__status_record_read(&d, job, "live", text, sizeof(text),
				     &mtime);
	if (rc == 0 && live_is_current(job, &r, mtime) &&
	    ask_coordinator(job, text, json, color, tty) == 0) {
		rc = 0;
	} else if (rc != 0 && errno == EACCES) {
		rc = permission_denied(job);
	} else {
		rc = status_of_job_run(job, &d, &r, json, color, tty);
		if (rc && !r.known && geteuid() == 0)
			fprintf(stderr,
				"dptrain: Slurm does not know job %s: root "
				"reads only its own status files then\n",
				job);
	}
	explicit_bzero(text, sizeof(text));
	dpt__status_dir_close(&d);
	return rc;
}

int dpt__run_uri(const char *what, char *uri, size_t size)
{
	const char *root = getenv(DPT_ENV(CKPT_URI));
	int n;

	if (strstr(what, "://")) {
		n = snprintf(uri, size, "%s", what);
	} else if (root && *root && what[0] != '/' && what[0] != '.') {
		/* A run name: under $DPTRAIN_CKPT_URI, else a directory. */
		n = snprintf(uri, size, "%s/%s", root, what);
	} else {
		char abs[PATH_MAX];
		if (!realpath(what, abs)) {
			fprintf(stderr,
				"dptrain: no run '%s': not a directory, and "
				"DPTRAIN_CKPT_URI is not set to find it "
				"under\n",
				what);
			return -1;
		}
		n = snprintf(uri, size, "file://%s", abs);
	}
	if (n < 0 || (size_t)n >= size) {
		fprintf(stderr, "dptrain: the URI of run '%s' is too long\n",
			what);
		return -1;
	}
	return 0;
}

int dpt__status_main(const char *what, bool json)
{
	bool tty = !json && isatty(STDOUT_FILENO);
	bool color = tty && !getenv("NO_COLOR");
	char uri[PATH_MAX + 16];

	if (all_digits(what) && strlen(what) <= 10)
		return status_of_job(what, json, color, tty);
	if (dpt__run_uri(what, uri, sizeof(uri)) != 0)
		return 1;
	return status_of_run(uri, json, color, tty);
}

/*
 * The reporter of the coordinator's state machine (struct dpt__reporter):
 * each note goes to the run's events and the metrics counters, a commit
 * also to the job's Comment (the progress that `squeue` shows); and the
 * metrics page, rendered at each scrape.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "service.h"

static void count_note(struct dpt__metrics_counters *m,
		       const struct dpt__coord_note *n)
{
	if (n->event == DPT_EV_SAVE) {
		m->saves++;
		m->saved_bytes += n->bytes;
	} else if (n->event == DPT_EV_COMMIT) {
		m->commits++;
	} else if (n->event == DPT_EV_EVICT) {
		m->evictions++;
	} else if (n->event == DPT_EV_GENERATION) {
		m->generations++;
	}
}

void dpt__report_note(void *arg, const struct dpt__coord_note *n)
{
	struct dpt__reporter *r = arg;

	count_note(&r->counters, n);
	if (r->events)
		dpt__events_note(r->events, n);
	if (r->walltime && n->event == DPT_EV_COMMIT) {
		struct dpt__msg_status st;
		char text[DPT_WALLTIME_MSG_MAX];
		const char *run, *slash;

		dpt__coord_status(r->coord, &st);
		run = st.run;
		slash = strrchr(run, '/');
		if (slash && slash[1])
			run = slash + 1;
		snprintf(text, sizeof(text),
			 "run=%s step=%" PRIu64 " committed=%" PRIu64
			 " restarts=%" PRIu32,
			 run[0] ? run : "?", n->step, n->step, r->restarts);
		dpt__walltime_progress(r->walltime, text);
	}
}

/* The metrics page (dpt__metrics_page_fn): a snapshot of the state
 * machine and the reporter's counters, rendered on each scrape. */
int dpt__report_metrics_page(void *arg, struct dpt__buf *out)
{
	struct dpt__reporter *r = arg;
	struct dpt__msg_status st;
	struct dpt__coord_counts cc;
	struct dpt__metrics m;

	dpt__coord_status(r->coord, &st);
	dpt__coord_counts(r->coord, &cc);
	r->counters.status_answered = cc.status_answered;
	r->counters.scrapes++;
	m = (struct dpt__metrics){
		.st = &st,
		.generation = cc.generation,
		.joined = cc.joined,
		.stop_at = st.end_time ? (int64_t)st.end_time - r->grace : 0,
		.now_ms = dpt__wall_ms(),
		.counters = r->counters,
	};
	return dpt__metrics_render(&m, out);
}

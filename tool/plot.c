/*
 * `dptrain plot RUN|URI [-o FILE.png] [--y NAME]...`: the run's logged
 * scalars and its samples/s against the global step, each start of a
 * run and each change of world size marked, as a PNG drawn by gnuplot
 * (pngcairo). Everything comes from the run's events
 * (doc/checkpoint-format.md, "Events"): `log` lines for the scalars,
 * `generation`, `resume` and `start` lines for the marks, `commit` lines
 * for a rate when the program logged no samples_per_s.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include <dptrain/error.h>

#include "buf.h"
#include "event_line.h"
#include "plot.h"
#include "scalars.h"
#include "status.h"

#define PLOT_Y_MAX     8
#define PLOT_MARKS_MAX 256
#define SPS	       "samples_per_s"

extern char **environ;

struct mark {
	int64_t step; /* -1: not placed yet */
	uint32_t run, world;
};

struct plot {
	const char **ys;
	size_t nys;
	FILE *y[PLOT_Y_MAX]; /* "STEP VALUE" per requested scalar */
	size_t ny[PLOT_Y_MAX];
	FILE *sps; /* logged samples_per_s */
	size_t nsps;
	FILE *rate; /* steps/s between commits, when no samples_per_s */
	size_t nrate;
	/* The previous commit of this coordinator (job, restarts). */
	int64_t commit_step;
	double commit_time;
	uint32_t commit_job, commit_restarts;
	int64_t min_step, max_step, last_step;
	struct mark marks[PLOT_MARKS_MAX];
	size_t nmarks;
	uint32_t cur_run, cur_world; /* of the newest mark */
	char seen[512];		     /* names logged, for the error */
	size_t logs;
};

static void saw_step(struct plot *p, int64_t step)
{
	if (step < 0)
		return;
	if (p->min_step < 0 || step < p->min_step)
		p->min_step = step;
	if (step > p->max_step)
		p->max_step = step;
	p->last_step = step;
	/* A mark waiting for its place: the first step after it. */
	if (p->nmarks && p->marks[p->nmarks - 1].step < 0)
		p->marks[p->nmarks - 1].step = step;
}

static void note_name(struct plot *p, const char *name)
{
	size_t n = strlen(name), have = strlen(p->seen);
	const char *at = p->seen;

	while ((at = strstr(at, name)) != NULL) {
		if ((at == p->seen || at[-1] == ' ') &&
		    (at[n] == ',' || at[n] == '\0'))
			return;
		at += n;
	}
	if (have + n + 3 < sizeof(p->seen))
		snprintf(p->seen + have, sizeof(p->seen) - have, "%s%s",
			 have ? ", " : "", name);
}

static void on_log(struct plot *p, const struct dpt__event_line *l)
{
	json_t *sc = dpt__event_object(l, DPT_EVF_SCALARS), *v;
	int64_t step = (int64_t)dpt__event_num(l, DPT_EVF_STEP, -1);
	const char *k;

	if (step < 0 || !sc)
		return;
	p->logs++;
	saw_step(p, step);
	json_object_foreach(sc, k, v)
	{
		note_name(p, k);
		if (!json_is_number(v))
			continue;
		for (size_t i = 0; i < p->nys; i++)
			if (!strcmp(k, p->ys[i])) {
				fprintf(p->y[i], "%" PRId64 " %.9g\n", step,
					json_number_value(v));
				p->ny[i]++;
			}
		if (!strcmp(k, SPS)) {
			fprintf(p->sps, "%" PRId64 " %.9g\n", step,
				json_number_value(v));
			p->nsps++;
		}
	}
}

static void on_generation(struct plot *p, const struct dpt__event_line *l)
{
	uint32_t run = (uint32_t)dpt__event_num(l, DPT_EVF_RESTARTS, 0) + 1,
		 world = (uint32_t)dpt__event_num(l, DPT_EVF_WORLD, 0);

	if (!world || (p->nmarks && run == p->cur_run && world == p->cur_world))
		return;
	p->cur_run = run;
	p->cur_world = world;
	if (p->nmarks == PLOT_MARKS_MAX)
		return;
	/* Placed by the next resume, log or commit: a new run's
	 * generation comes before its load says where it resumes. */
	p->marks[p->nmarks++] =
		(struct mark){.step = -1, .run = run, .world = world};
}

static void on_commit(struct plot *p, const struct dpt__event_line *l)
{
	int64_t step = (int64_t)dpt__event_num(l, DPT_EVF_STEP, -1);
	double t = dpt__event_num(l, DPT_EVF_TIME, 0);
	uint32_t job = (uint32_t)dpt__event_num(l, DPT_EVF_JOB, 0),
		 restarts = (uint32_t)dpt__event_num(l, DPT_EVF_RESTARTS, 0);

	if (step < 0)
		return;
	saw_step(p, step);
	/* A rate between two commits of the same coordinator only: a
	 * restart's gap is not training. */
	if (p->commit_step >= 0 && job == p->commit_job &&
	    restarts == p->commit_restarts && step > p->commit_step &&
	    t > p->commit_time) {
		fprintf(p->rate, "%" PRId64 " %.9g\n", step,
			(double)(step - p->commit_step) / (t - p->commit_time));
		p->nrate++;
	}
	p->commit_step = step;
	p->commit_time = t;
	p->commit_job = job;
	p->commit_restarts = restarts;
}

static void plot_line(void *arg, const char *line, size_t len)
{
	struct plot *p = arg;
	struct dpt__event_line l;
	int64_t step;

	if (dpt__event_line_parse(&l, line, len))
		return;
	switch (l.event) {
	case DPT_EV_LOG:
		on_log(p, &l);
		break;
	case DPT_EV_GENERATION:
		on_generation(p, &l);
		break;
	case DPT_EV_COMMIT:
		on_commit(p, &l);
		break;
	case DPT_EV_RESUME:
		step = (int64_t)dpt__event_num(&l, DPT_EVF_STEP, -1);
		/* A fresh start is step 0. */
		if (p->nmarks && p->marks[p->nmarks - 1].step < 0)
			p->marks[p->nmarks - 1].step = step < 0 ? 0 : step;
		break;
	case DPT_EV_START:
		p->commit_step = -1;
		break;
	default: /* the others draw nothing */
		break;
	}
	dpt__event_line_release(&l);
}

/* The first control character of S (C0 or DEL), or NULL. gnuplot reads
 * its script a line at a time: a newline inside a quoted string ends the
 * string and the command, and the next line runs as a command of its own
 * (`system "..."` included). No quoting can carry one. */
static const char *control_in(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return s;
	return NULL;
}

/* S as a gnuplot single-quoted string: '' is a quote; inside single
 * quotes gnuplot substitutes no `command` and no @macro. DPT_EINVAL for
 * a control character, which the callers have refused already. */
static int put_quoted(struct dpt__buf *b, const char *s)
{
	int rc = control_in(s) ? DPT_EINVAL : dpt__buf_puts(b, "'");

	for (; !rc && *s; s++)
		rc = *s == '\'' ? dpt__buf_puts(b, "''")
				: dpt__buf_append(b, s, 1);
	return rc ? rc : dpt__buf_puts(b, "'");
}

/* Refuse WHAT (the run's URI or the output's name, WHICH) when it holds a
 * control character, saying what to rename; it is shown with each control
 * character as '?'. Returns 0 or -1. */
static int refuse_control(const char *which, const char *what, const char *fix)
{
	char shown[PATH_MAX + 32];

	if (!control_in(what))
		return 0;
	fprintf(stderr,
		"dptrain: %s '%s' holds a control character (shown as '?': a "
		"newline, say), which gnuplot would run as a command: %s\n",
		which, dpt__status_clean(what, shown, sizeof(shown)), fix);
	return -1;
}

/* The run URI and the output file's name, which go into gnuplot's
 * script: 0, or -1 after saying which holds a control character. */
static int names_ok(const char *uri, const char *out)
{
	if (refuse_control("the run", uri,
			   "rename its directory (or object prefix) "
			   "without it") != 0 ||
	    refuse_control("the output file", out,
			   "name another one with -o") != 0)
		return -1;
	return 0;
}

static int script_of(struct plot *p, const char *dir, const char *out,
		     const char *title, struct dpt__buf *b)
{
	char path[PATH_MAX];
	bool lower = p->nsps || p->nrate;
	int rc = 0;

	rc = dpt__buf_puts(b, "set terminal pngcairo noenhanced size 1100,");
	if (!rc)
		rc = dpt__buf_printf(b, "%d", lower ? 800 : 450);
	if (!rc)
		rc = dpt__buf_puts(b, " font ',10'\nset output ");
	if (!rc)
		rc = put_quoted(b, out);
	if (!rc)
		rc = dpt__buf_puts(b, "\nset grid\nset key below\n"
				      "set xlabel 'global step'\n"
				      "set lmargin 10\nset rmargin 3\n");
	/* The marks inside the range: a fresh start's is at step 0. */
	for (size_t i = 0; i < p->nmarks; i++)
		if (p->marks[i].step >= 0 && p->marks[i].step < p->min_step)
			p->min_step = p->marks[i].step;
	if (!rc && p->max_step > p->min_step)
		rc = dpt__buf_printf(b,
				     "set xrange [%" PRId64 ":%" PRId64 "]\n",
				     p->min_step, p->max_step);
	for (size_t i = 0; !rc && i < p->nmarks; i++) {
		const struct mark *m = &p->marks[i];
		int64_t x = m->step < 0 ? p->last_step : m->step;

		/* A label in the last quarter goes left of its line, where
		 * it is not cut by the frame. */
		bool left =
			p->max_step > p->min_step &&
			(x - p->min_step) * 4 > (p->max_step - p->min_step) * 3;

		if (x < 0)
			x = 0;
		rc = dpt__buf_printf(
			b,
			"set arrow from %" PRId64 ", graph 0 to %" PRId64
			", graph 1 nohead lc rgb '#999999' dt 2\n"
			"set label 'run %" PRIu32 ": %" PRIu32
			" rank%s' at %" PRId64 ", graph 0.96 %s offset "
			"%s,0 font ',9' tc rgb '#555555'\n",
			x, x, m->run, m->world, m->world == 1 ? "" : "s", x,
			left ? "right" : "left", left ? "-0.5" : "0.5");
	}
	if (!rc && lower)
		rc = dpt__buf_puts(b, "set multiplot layout 2,1 title ");
	else if (!rc)
		rc = dpt__buf_puts(b, "set title ");
	if (!rc)
		rc = put_quoted(b, title);
	if (!rc)
		rc = dpt__buf_printf(b, "\nset ylabel '%s'\nplot ",
				     p->nys == 1 ? p->ys[0] : "value");
	for (size_t i = 0; !rc && i < p->nys; i++) {
		snprintf(path, sizeof(path), "%s/y%zu.dat", dir, i);
		rc = dpt__buf_puts(b, i ? ", " : "");
		if (!rc)
			rc = put_quoted(b, path);
		if (!rc)
			rc = dpt__buf_printf(b,
					     " using 1:2 with lines lw 1.5 "
					     "title '%s'",
					     p->ys[i]);
	}
	if (!rc && lower) {
		bool logged = p->nsps > 0;

		snprintf(path, sizeof(path), "%s/%s.dat", dir,
			 logged ? "sps" : "rate");
		rc = dpt__buf_printf(b,
				     "\nset title ''\nset ylabel '%s'\n"
				     "plot ",
				     logged ? "samples/s" : "steps/s");
		if (!rc)
			rc = put_quoted(b, path);
		if (!rc)
			rc = dpt__buf_printf(
				b,
				" using 1:2 with linespoints pt 7 ps 0.4 "
				"title '%s'\nunset multiplot",
				logged ? "samples/s (logged)"
				       : "steps/s between commits (no "
					 "samples_per_s logged)");
	}
	return rc ? rc : dpt__buf_puts(b, "\n");
}

/* Run gnuplot on SCRIPT. Returns 0, 127 when there is no gnuplot, or 1. */
static int run_gnuplot(const char *script)
{
	const char *gp = getenv("DPTRAIN_GNUPLOT");
	char *argv[] = {(char *)(gp && *gp ? gp : "gnuplot"), (char *)script,
			NULL};
	pid_t pid;
	int st, rc;

	rc = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
	if (rc == ENOENT)
		return 127;
	if (rc) {
		fprintf(stderr, "dptrain: cannot run '%s': %s\n", argv[0],
			strerror(rc));
		return 1;
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
		return 127;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

static const char *base_name(const char *uri, char *buf, size_t size)
{
	size_t n = strlen(uri);
	const char *s;

	while (n > 1 && uri[n - 1] == '/')
		n--;
	s = uri + n;
	while (s > uri && s[-1] != '/')
		s--;
	snprintf(buf, size, "%.*s", (int)(uri + n - s), s);
	return buf[0] ? buf : "run";
}

/* The data file of each curve in DIR, opened (OPEN) or closed; 0, or -1
 * after a message. */
static int data_files(struct plot *p, const char *dir, bool open)
{
	char path[PATH_MAX];

	for (size_t i = 0; i <= p->nys + 1; i++) {
		FILE **fp = i < p->nys	  ? &p->y[i]
			    : i == p->nys ? &p->sps
					  : &p->rate;

		if (i < p->nys)
			snprintf(path, sizeof(path), "%s/y%zu.dat", dir, i);
		else
			snprintf(path, sizeof(path), "%s/%s.dat", dir,
				 i == p->nys ? "sps" : "rate");
		if (open && !(*fp = fopen(path, "we"))) {
			fprintf(stderr, "dptrain: cannot create '%s': %s\n",
				path, strerror(errno));
			return -1;
		}
		if (!open && fclose(*fp) != 0) {
			*fp = NULL;
			fprintf(stderr, "dptrain: cannot write in '%s': %s\n",
				dir, strerror(errno));
			return -1;
		}
		if (!open)
			*fp = NULL;
	}
	return 0;
}

/* DIR and what dpt__plot_main wrote in it, its files closed first. */
static void remove_dir(struct plot *p, const char *dir)
{
	static const char *const fixed[] = {"sps.dat", "rate.dat", "plot.gp"};
	char path[PATH_MAX];

	for (size_t i = 0; i < PLOT_Y_MAX; i++)
		if (p->y[i])
			fclose(p->y[i]);
	if (p->sps)
		fclose(p->sps);
	if (p->rate)
		fclose(p->rate);
	for (size_t i = 0; i < p->nys; i++) {
		snprintf(path, sizeof(path), "%s/y%zu.dat", dir, i);
		unlink(path);
	}
	for (size_t i = 0; i < sizeof(fixed) / sizeof(*fixed); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, fixed[i]);
		unlink(path);
	}
	rmdir(dir);
}

/* The gnuplot script of P in DIR/plot.gp, run to draw OUT; 0, or -1
 * after a message. */
static int draw(struct plot *p, const char *dir, const char *out,
		const char *uri)
{
	struct dpt__buf script;
	char path[PATH_MAX];
	FILE *f;
	int erc = -1, rc = -1;

	dpt__buf_init(&script, 1 << 20);
	snprintf(path, sizeof(path), "%s/plot.gp", dir);
	if (script_of(p, dir, out, uri, &script) == 0 &&
	    (f = fopen(path, "we"))) {
		bool whole =
			fwrite(script.data, 1, script.len, f) == script.len;

		if (fclose(f) == 0 && whole)
			erc = 0;
	}
	if (erc) {
		fprintf(stderr, "dptrain: cannot write '%s'\n", path);
		goto done;
	}
	erc = run_gnuplot(path);
	if (erc == 127) {
		fprintf(stderr,
			"dptrain: gnuplot is not installed: apt-get install "
			"gnuplot-nox (or set DPTRAIN_GNUPLOT to one)\n");
		goto done;
	}
	if (erc) {
		fprintf(stderr,
			"dptrain: gnuplot failed to draw '%s' (its messages "
			"are above)\n",
			out);
		goto done;
	}
	rc = 0;
done:
	dpt__buf_release(&script);
	return rc;
}

int dpt__plot_main(const char *what, const char *out, const char **ys,
		   size_t nys)
{
	static const char *loss[] = {"loss"};
	char uri[PATH_MAX + 16], dir[] = "/tmp/dptrain-plot.XXXXXX";
	char name[256], outbuf[PATH_MAX], abs[PATH_MAX];
	struct plot p = {.min_step = -1,
			 .max_step = -1,
			 .last_step = -1,
			 .commit_step = -1};
	bool have_dir = false;
	int rc = 1, erc;

	if (!nys) {
		ys = loss;
		nys = 1;
	}
	if (nys > PLOT_Y_MAX) {
		fprintf(stderr, "dptrain: 'plot' draws at most %d --y\n",
			PLOT_Y_MAX);
		return 2;
	}
	for (size_t i = 0; i < nys; i++)
		if (!dpt__scalars_name_ok(ys[i])) {
			fprintf(stderr,
				"dptrain: --y '%s' is not a scalar's name "
				"(1 to 31 of A-Z a-z 0-9 _ . -)\n",
				ys[i]);
			return 2;
		}
	p.ys = ys;
	p.nys = nys;
	if (dpt__run_uri(what, uri, sizeof(uri)) != 0)
		return 1;
	if (!out) {
		snprintf(outbuf, sizeof(outbuf), "%s.png",
			 base_name(uri, name, sizeof(name)));
		out = outbuf;
	}
	if (names_ok(uri, out) != 0)
		return 1;
	if (!mkdtemp(dir)) {
		fprintf(stderr, "dptrain: cannot create '%s': %s\n", dir,
			strerror(errno));
		goto out;
	}
	have_dir = true;
	if (data_files(&p, dir, true) != 0)
		goto out;

	erc = dpt__run_events_each(uri, plot_line, &p);
	if (erc == DPT_ENOENT) {
		fprintf(stderr,
			"dptrain: no events of a run at '%s': not a run, or "
			"one that has not started (check the URI)\n",
			uri);
		goto out;
	} else if (erc) {
		fprintf(stderr, "dptrain: cannot read the events of '%s': %s\n",
			uri, dpt_strerror(erc));
		goto out;
	}
	for (size_t i = 0; i < nys; i++)
		if (!p.ny[i]) {
			fprintf(stderr,
				"dptrain: the run '%s' logged no '%s' (%s%s): "
				"its program records values with dpt_log or "
				"dptrain.torch's Checkpoint.log(step, %s=...)"
				"\n",
				uri, ys[i], p.logs ? "it logged: " : "",
				p.logs ? p.seen : "no log lines at all", ys[i]);
			goto out;
		}
	if (data_files(&p, dir, false) != 0)
		goto out;

	if (draw(&p, dir, out, uri) != 0)
		goto out;
	printf("%s\n", realpath(out, abs) ? abs : out);
	rc = 0;
out:
	if (have_dir)
		remove_dir(&p, dir);
	return rc;
}

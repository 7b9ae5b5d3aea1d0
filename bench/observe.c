/*
 * bench/observe: what watching a job costs it (doc/PERFORMANCE.md,
 * "Watching a job"). Five jobs of N workers (CPU backend) against the
 * real coordinator, one after the other, each the same training loop: a
 * step is COMPUTE ms of device time (a sleep: the host waits for the GPU),
 * an allreduce of 1 MiB and dpt_should_stop (a vote through the
 * coordinator, the path a busy coordinator would slow), and every K steps
 * a checkpoint save of 4 MiB.
 *
 *   quiet    nobody watches: the peer of the two others
 *   status   `dptrain status JOB` every second, the real client, through
 *            a status file the bench writes as the coordinator would
 *   log      nobody watches, and every rank calls dpt_log with two scalars
 *            (loss, samples_per_s) every step: the events' log lines
 *   metrics  the coordinator with --metrics 0, and `curl /metrics` every
 *            second
 *   flood    bench/flooder at the coordinator's port: 3000 connections
 *            held without the step's secret and C clients (20) churning
 *            CURVE handshakes with keys nobody has, each every 20 ms;
 *            with --flood-cycle S, the flooder runs S seconds and rests S
 *            seconds in turn for the whole job, and the steps of the two
 *            kinds of window (less the first 2 s of each, while the
 *            flood builds up or drains) are compared: the same job and
 *            coordinator flooded and not, interleaved, so that the
 *            machine's drift falls on both sides alike
 *
 * It prints rank 0's median and mean step time for each job and the
 * ratio to the quiet job's, then the run's events: bytes of events.jsonl
 * per step, per save (its save and commit lines) and the rest (start,
 * joins, generation, end: once per run).
 *
 *   bench/observe [--ranks N] [--steps S] [--compute-ms MS] [--every K]
 *                 [--flood-churn C] [--flood-cycle S] [--jobs J,J...]
 *                 [--dir DIR]
 *
 * --jobs runs only the jobs named (default: all five, in the order
 * above); the ratios to the quiet job need it.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#define _DEFAULT_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>

#include "bench.h"
#include "join.h"
#include "wire.h"

#ifndef DPT_COORDINATOR_BIN
#define DPT_COORDINATOR_BIN "coordinator/dptrain-coordinator"
#endif
#ifndef DPT_DPTRAIN_BIN
#define DPT_DPTRAIN_BIN "dptrain"
#endif
#define JOB_ID	    "4242"	 /* the status file's name; no Slurm involved */
#define WARMUP	    10		 /* steps not timed */
#define REDUCE_N    (256 * 1024) /* floats: 1 MiB */
#define STATE_BYTES (4 * 1024 * 1024) /* the checkpoint */

enum watch { W_QUIET, W_STATUS, W_METRICS, W_LOG, W_FLOOD };
static const char *const watch_names[] = {"quiet", "status", "metrics", "log",
					  "flood"};
#ifndef DPT_FLOODER_BIN
#define DPT_FLOODER_BIN "bench/flooder"
#endif
#define FLOOD_CONNS "3000"
#define SETTLE_S    2.0 /* seconds of a flood window not counted */

struct config {
	int ranks, steps, every;
	double compute_ms;
	long flood_churn;      /* the flooder's handshaking clients */
	int flood_cycle;       /* seconds on and off; 0: on for the whole job */
	bool run[W_FLOOD + 1]; /* the jobs to run */
	char dir[PATH_MAX - 64];
};

static _Noreturn void die(const char *what)
{
	fprintf(stderr, "bench/observe: %s\n", what);
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------ a worker */

/* Rank 0 writes each timed step's end (CLOCK_MONOTONIC) and seconds, one
 * step per line, to FD. */
static int worker(const struct config *c, const char *run, const char *ep,
		  const char *secret, int task, int fd)
{
	struct dpt_ctx *ctx = NULL;
	struct dpt_ckpt *ck = NULL;
	struct dpt_ckpt_opts co;
	char uri[PATH_MAX];
	uint64_t shape[1];
	float *grad = calloc(REDUCE_N, sizeof(float));
	uint8_t *state = NULL;
	int rc, rank, world, stop = 0;
	const bool logging = strcmp(run, "log") == 0;
	const char *names[2] = {"loss", "samples_per_s"};

	if (!grad || bench_join(&ctx, ep, secret, task) != 0)
		return 1;
	rank = dpt_rank(ctx);
	world = dpt_world_size(ctx);
	snprintf(uri, sizeof(uri), "file://%s/ckpt", c->dir);
	dpt_ckpt_opts_default(&co);
	co.uri = uri;
	co.run = run;
	co.keep_last = 2;
	shape[0] = STATE_BYTES;
	state = calloc(1, STATE_BYTES);
	rc = state ? dpt_ckpt_new(&ck, ctx, &co) : DPT_ENOMEM;
	if (!rc)
		rc = dpt_ckpt_register(ck, &(struct dpt_ckpt_tensor){
						   .name = "params",
						   .dtype = DPT_UINT8,
						   .kind = DPT_CKPT_REPLICATED,
						   .ndim = 1,
						   .shape = shape,
						   .data = state,
					   });
	for (int step = 1; !rc && step <= c->steps && !stop; step++) {
		double t0 = now_s();

		usleep((useconds_t)(c->compute_ms * 1000));
		rc = dpt_allreduce(ctx, grad, grad, REDUCE_N, DPT_FLOAT32,
				   DPT_AVG);
		if (!rc && logging) {
			double v[2] = {grad[0], 1e3 / c->compute_ms};

			rc = dpt_log(ctx, (uint64_t)step, 2, names, v);
		}
		if (!rc && c->every && step % c->every == 0) {
			rc = dpt_ckpt_wait(ck);
			state[0] = (uint8_t)step;
			rc = rc ? rc
				: dpt_ckpt_save(
					  ck, &(struct dpt_ckpt_meta){
						      .step = (uint64_t)step});
		}
		rc = rc ? rc : dpt_should_stop(ctx, &stop);
		if (!rc && rank == 0 && step > WARMUP) {
			double t1 = now_s();

			dprintf(fd, "%.9f %.9f\n", t1, t1 - t0);
		}
	}
	rc = rc ? rc : dpt_ckpt_wait(ck);
	(void)world;
	dpt_ckpt_destroy(&ck);
	dpt_finalize(&ctx);
	free(state);
	free(grad);
	if (rc)
		fprintf(stderr, "bench/observe: rank %d: %s\n", rank,
			dpt_strerror(rc));
	return rc ? 1 : 0;
}

/* ------------------------------------------------------------ watchers */

/* Runs ARGV and waits; whether it exited 0 and printed NEEDLE. */
static bool ask(char *const argv[], const char *needle)
{
	static char out[65536];
	size_t len = 0;
	int fds[2], st;
	pid_t pid;

	if (pipe(fds))
		return false;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(fds[1], 1);
		if (null >= 0)
			dup2(null, 2);
		close(fds[0]);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		ssize_t n = read(fds[0], out + len, sizeof(out) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue; /* SIGTERM: the answer is still counted */
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(fds[0]);
	if (pid < 0)
		return false;
	while (waitpid(pid, &st, 0) != pid)
		if (errno != EINTR)
			return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, needle);
}

static volatile sig_atomic_t watching = 1;

/* Execs the flooder at the coordinator's endpoint EP. */
static _Noreturn void exec_flooder(const struct config *c, const char *ep)
{
	const char *colon = strrchr(ep, ':');
	char churn[24];

	snprintf(churn, sizeof(churn), "%ld", c->flood_churn);
	execl(DPT_FLOODER_BIN, DPT_FLOODER_BIN, "127.0.0.1",
	      colon ? colon + 1 : "0", FLOOD_CONNS, "86400", churn,
	      (char *)NULL);
	_exit(127);
}

static void stop_watching(int sig)
{
	(void)sig;
	watching = 0;
}

/* Asks ARGV every second until SIGTERM, then writes how many answers
 * were right (printed NEEDLE) and how many asked to FD. */
static _Noreturn void watcher(char *const argv[], const char *needle, int fd)
{
	long asked = 0, right = 0;

	signal(SIGTERM, stop_watching);
	while (watching) {
		double t0 = now_s(), left;

		right += ask(argv, needle);
		asked++;
		left = 1.0 - (now_s() - t0);
		if (left > 0 && watching)
			usleep((useconds_t)(left * 1e6));
	}
	dprintf(fd, "%ld %ld\n", right, asked);
	_exit(0);
}

/* --flood-cycle: the flooder for C->flood_cycle seconds, then none for as
 * long, until SIGTERM; writes "on T" and "off T" (CLOCK_MONOTONIC) to FD
 * as each window starts, and the flooder its counts when it ends. */
static _Noreturn void cycler(const struct config *c, const char *ep, int fd)
{
	signal(SIGTERM, stop_watching);
	while (watching) {
		pid_t flood = fork();

		if (flood == 0) {
			dup2(fd, 1);
			exec_flooder(c, ep);
		}
		dprintf(fd, "on %.9f\n", now_s());
		sleep((unsigned)c->flood_cycle); /* SIGTERM cuts it short */
		kill(flood, SIGTERM);
		waitpid(flood, NULL, 0);
		dprintf(fd, "off %.9f\n", now_s());
		if (watching)
			sleep((unsigned)c->flood_cycle);
	}
	_exit(0);
}

/* The status file dptrain status reads (doc/protocol.md, "Status
 * requests"), as the coordinator writes it with --job-id. */
static void write_status_file(const struct config *c, const char *ep,
			      const char *secret)
{
	struct dpt__curve_keys k;
	char dir[PATH_MAX - 64], path[PATH_MAX];
	FILE *f;

	if (dpt__wire_derive_keys(secret, &k) != 0)
		die("cannot derive the keys");
	if (snprintf(dir, sizeof(dir), "%s/status", c->dir) >= (int)sizeof(dir))
		die("the directory's name is too long");
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		die("cannot create the status directory");
	snprintf(path, sizeof(path), "%s/" JOB_ID ".live", dir);
	f = fopen(path, "w");
	if (!f ||
	    fprintf(f,
		    "endpoint=%s\nserver_key=%s\npublic_key=%s\n"
		    "secret_key=%s\n",
		    ep, k.coord_public, k.status_public, k.status_secret) < 0 ||
	    fclose(f))
		die("cannot write the status file");
	chmod(path, 0600);
	setenv("DPTRAIN_STATUS_DIR", dir, 1);
}

/* ------------------------------------------------------------ one job */

static int cmp_double(const void *a, const void *b)
{
	return bench_cmp_double(a, b);
}

struct result {
	double median, mean;
	int n;
	long asked, right; /* the watcher's questions, and right answers */
	/* --flood-cycle: the steps in flooded and in quiet windows */
	double on_median, off_median;
	int on_n, off_n, cycles;
};

/* The window (1: flooded, 0: quiet, -1: settling or none) of a step that
 * ended at T, from the cycler's transitions AT[N] (flooded from the
 * even ones on). */
static int window_of(double t, const double *at, int n)
{
	int i = n - 1;

	while (i >= 0 && at[i] > t)
		i--;
	if (i < 0 || t < at[i] + SETTLE_S)
		return -1;
	return i % 2 == 0;
}

/* Splits the steps (END[i], T[i]) by the cycler's lines in WF into R's
 * flooded and quiet medians; R->right: the fewest connections a flooder
 * held at once. */
static void split_by_window(FILE *wf, const double *end, const double *t, int n,
			    struct result *r)
{
	char line[128];
	double at[4096], *on = malloc((size_t)n * sizeof(*on)),
			 *off = malloc((size_t)n * sizeof(*off));
	int nat = 0;

	if (!on || !off)
		die("out of memory");
	r->right = -1;
	while (wf && nat < 4096 && fgets(line, sizeof(line), wf)) {
		long held;

		if (!strncmp(line, "on ", 3) && nat % 2 == 0)
			at[nat++] = strtod(line + 3, NULL);
		else if (!strncmp(line, "off ", 4) && nat % 2 == 1)
			at[nat++] = strtod(line + 4, NULL);
		else if (!strncmp(line, "flood held=", 11)) {
			held = strtol(line + 11, NULL, 10);
			if (r->right < 0 || held < r->right)
				r->right = held;
		}
	}
	r->cycles = nat / 2;
	r->on_n = r->off_n = 0;
	for (int i = 0; i < n; i++) {
		int w = window_of(end[i], at, nat);

		if (w == 1)
			on[r->on_n++] = t[i];
		else if (w == 0)
			off[r->off_n++] = t[i];
	}
	if (!r->on_n || !r->off_n)
		die("--flood-cycle: no step in a flooded or a quiet window: "
		    "more steps or a shorter cycle");
	r->on_median = bench_median(on, r->on_n);
	r->off_median = bench_median(off, r->off_n);
	free(on);
	free(off);
}

/* Runs one job watched as W; its steps' times (rank 0) in *R. */
static void run_job(const struct config *c, enum watch w, struct result *r)
{
	char secret[65], secret_file[PATH_MAX], ep_file[PATH_MAX],
		log_file[PATH_MAX], ep[256] = "", world[16], url[128] = "",
				    line[512], run[32];
	unsigned char b[32];
	pid_t coord, watch = -1, pids[64];
	int fds[2], wfds[2] = {-1, -1}, failed = 0, port = 0;
	double *t = NULL, *end = NULL;
	size_t cap = 0;
	FILE *f;

	if (getrandom(b, sizeof(b), 0) != sizeof(b))
		die("getrandom failed");
	for (int i = 0; i < 32; i++)
		snprintf(secret + 2 * i, 3, "%02x", b[i]);
	snprintf(secret_file, sizeof(secret_file), "%s/secret", c->dir);
	snprintf(ep_file, sizeof(ep_file), "%s/endpoint", c->dir);
	snprintf(log_file, sizeof(log_file), "%s/coordinator.log", c->dir);
	snprintf(run, sizeof(run), "%s", watch_names[w]);
	f = fopen(secret_file, "w");
	if (!f || fprintf(f, "%s\n", secret) < 0 || fclose(f))
		die("cannot write the secret file");
	chmod(secret_file, 0600);
	unlink(ep_file);
	snprintf(world, sizeof(world), "%d", c->ranks);
	coord = fork();
	if (coord == 0) {
		int null = open("/dev/null", O_WRONLY);
		int log = open(log_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (null >= 0)
			dup2(null, 1);
		if (log >= 0)
			dup2(log, 2);
		execl(DPT_COORDINATOR_BIN, DPT_COORDINATOR_BIN, "--world-size",
		      world, "--bind", "tcp://127.0.0.1:*", "--advertise",
		      "127.0.0.1", "--secret-file", secret_file,
		      "--endpoint-file", ep_file, "--timeout-ms", "30000",
		      "--metrics", w == W_METRICS ? "0" : "off", "--log-level",
		      "info", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200 && !ep[0]; i++) {
		f = fopen(ep_file, "r");
		if (f) {
			if (!fgets(ep, sizeof(ep), f))
				ep[0] = '\0';
			fclose(f);
		}
		ep[strcspn(ep, "\n")] = '\0';
		if (!ep[0])
			usleep(20000);
	}
	if (!ep[0])
		die("the coordinator did not start (see its log in the "
		    "directory)");
	if (w == W_METRICS) {
		f = fopen(log_file, "r");
		while (f && fgets(line, sizeof(line), f)) {
			const char *p =
				strstr(line, "serving metrics at http://");
			const char *colon = p ? strrchr(p, ':') : NULL;
			if (colon)
				port = (int)strtol(colon + 1, NULL, 10);
		}
		if (f)
			fclose(f);
		if (port <= 0)
			die("the coordinator's log names no metrics port");
		snprintf(url, sizeof(url), "http://127.0.0.1:%d/metrics", port);
	}
	if (w == W_STATUS)
		write_status_file(c, ep, secret);

	if (pipe(fds))
		die("pipe failed");
	for (int i = 0; i < c->ranks; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(fds[0]);
			_exit(worker(c, run, ep, secret, i, fds[1]));
		}
	}
	close(fds[1]);
	if (w == W_STATUS || w == W_METRICS || w == W_FLOOD) {
		if (pipe(wfds))
			die("pipe failed");
		watch = fork();
		if (watch == 0) {
			char *status[] = {DPT_DPTRAIN_BIN, "status", "--json",
					  JOB_ID, NULL};
			char *curl[] = {"curl", "-sf", "-m", "2", url, NULL};
			close(fds[0]);
			close(wfds[0]);
			if (w == W_FLOOD && c->flood_cycle)
				cycler(c, ep, wfds[1]);
			if (w == W_FLOOD) { /* it reports on its stdout */
				dup2(wfds[1], 1);
				exec_flooder(c, ep);
			}
			/* The coordinator's answer, not the events'. */
			if (w == W_STATUS)
				watcher(status, "coordinator", wfds[1]);
			watcher(curl, "dptrain_world_size{", wfds[1]);
		}
		close(wfds[1]);
	}
	f = fdopen(fds[0], "r");
	r->n = 0;
	while (f && fgets(line, sizeof(line), f)) {
		char *sp;

		if ((size_t)r->n == cap) {
			cap = cap ? 2 * cap : 1024;
			t = realloc(t, cap * sizeof(*t));
			end = realloc(end, cap * sizeof(*end));
			if (!t || !end)
				die("out of memory");
		}
		end[r->n] = strtod(line, &sp);
		t[r->n++] = strtod(sp, NULL);
	}
	if (f)
		fclose(f);
	for (int i = 0; i < c->ranks; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	r->asked = r->right = 0;
	if (watch > 0) {
		FILE *wf;

		kill(watch, SIGTERM);
		wf = fdopen(wfds[0], "r");
		if (w == W_FLOOD && c->flood_cycle) {
			r->asked = strtol(FLOOD_CONNS, NULL, 10);
			split_by_window(wf, end, t, r->n, r);
		} else if (w ==
			   W_FLOOD) { /* "established N", then its counts */
			r->asked = strtol(FLOOD_CONNS, NULL, 10);
			while (wf && fgets(line, sizeof(line), wf))
				if (!strncmp(line, "flood held=", 11))
					r->right = strtol(line + 11, NULL, 10);
		} else if (!wf ||
			   fscanf(wf, "%ld %ld", &r->right, &r->asked) != 2) {
			die("the watcher reported nothing");
		}
		waitpid(watch, NULL, 0);
		if (wf)
			fclose(wf);
	}
	kill(coord, SIGTERM);
	waitpid(coord, NULL, 0);
	if (failed || r->n == 0)
		die("a worker failed (its messages are above)");
	r->mean = 0;
	for (int i = 0; i < r->n; i++)
		r->mean += t[i];
	r->mean /= r->n;
	qsort(t, (size_t)r->n, sizeof(*t), cmp_double);
	r->median = bench_median(t, r->n);
	free(t);
	free(end);
}

/* ------------------------------------------------------------ events */

/* Bytes of the run's events.jsonl: all, the save and commit lines, and
 * how many saves. */
static void events_size(const struct config *c, const char *run)
{
	char path[PATH_MAX], line[4096];
	long total = 0, per_save = 0, saves = 0, lines = 0, logs = 0;
	long log_bytes = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/ckpt/%s/events.jsonl", c->dir, run);
	f = fopen(path, "r");
	if (!f) {
		printf("events: cannot read %s: %s\n", path, strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		long n = (long)strlen(line);

		total += n;
		lines++;
		if (strstr(line, "\"event\":\"save\"")) {
			per_save += n;
			saves++;
		} else if (strstr(line, "\"event\":\"commit\"")) {
			per_save += n;
		} else if (strstr(line, "\"event\":\"log\"")) {
			log_bytes += n;
			logs++;
		}
	}
	fclose(f);
	printf("events (%s run): %ld lines, %ld bytes for %d steps: %.1f "
	       "bytes/step; %ld saves at %.0f bytes each (save + commit "
	       "lines); %ld log lines at %.0f bytes each; %ld bytes once "
	       "per run (start, joins, generation, end)\n",
	       run, lines, total, c->steps, (double)total / c->steps, saves,
	       saves ? (double)per_save / (double)saves : 0.0, logs,
	       logs ? (double)log_bytes / (double)logs : 0.0,
	       total - per_save - log_bytes);
}

static int remove_entry(const char *path, const struct stat *sb, int type,
			struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* ------------------------------------------------------------ main */

static void usage(void)
{
	fputs("usage: bench/observe [--ranks N] [--steps S] [--compute-ms MS] "
	      "[--every K] [--flood-churn C] [--flood-cycle S]\n"
	      "       [--jobs quiet,status,metrics,log,flood] [--dir DIR]\n"
	      "ranks: 1 to 64 (default 4); steps: at least 50 (default 500); "
	      "compute-ms: 0 to 1000 (default 20);\nevery: a save every K "
	      "steps, 0 for none (default 10); flood-churn: the flood job's "
	      "handshaking clients,\n0 to 1000 (default 20); flood-cycle: "
	      "the flood job floods S seconds and rests S in turn,\n"
	      "comparing the two (1 to 600; default 0: floods all along); "
	      "dir: a new directory under it\n(default /tmp)\n",
	      stderr);
	exit(2);
}

/* --jobs: a comma-separated list of job names. */
static void parse_jobs(struct config *c, const char *list)
{
	char buf[128], *save = NULL;

	if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
		usage();
	for (int w = W_QUIET; w <= W_FLOOD; w++)
		c->run[w] = false;
	for (char *name = strtok_r(buf, ",", &save); name;
	     name = strtok_r(NULL, ",", &save)) {
		int w = W_QUIET;

		while (w <= W_FLOOD && strcmp(name, watch_names[w]))
			w++;
		if (w > W_FLOOD) {
			fprintf(stderr, "bench/observe: --jobs: no job '%s'\n",
				name);
			usage();
		}
		c->run[w] = true;
	}
}

int main(int argc, char **argv)
{
	struct config c = {.ranks = 4,
			   .steps = 500,
			   .every = 10,
			   .compute_ms = 20,
			   .flood_churn = 20,
			   .run = {true, true, true, true, true}};
	const char *base = "/tmp";
	struct result r[W_FLOOD + 1];
	char tmpl[PATH_MAX - 64];

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "--ranks"))
			c.ranks = (int)bench_arg("--ranks", argv[++i]);
		else if (!strcmp(argv[i], "--steps"))
			c.steps = (int)bench_arg("--steps", argv[++i]);
		else if (!strcmp(argv[i], "--compute-ms"))
			c.compute_ms = bench_arg("--compute-ms", argv[++i]);
		else if (!strcmp(argv[i], "--every"))
			c.every = (int)bench_arg("--every", argv[++i]);
		else if (!strcmp(argv[i], "--flood-churn"))
			c.flood_churn =
				(long)bench_arg("--flood-churn", argv[++i]);
		else if (!strcmp(argv[i], "--flood-cycle"))
			c.flood_cycle =
				(int)bench_arg("--flood-cycle", argv[++i]);
		else if (!strcmp(argv[i], "--jobs"))
			parse_jobs(&c, argv[++i]);
		else if (!strcmp(argv[i], "--dir"))
			base = argv[++i];
		else
			usage();
	}
	if (c.ranks < 1 || c.ranks > 64 || c.steps < 50 || c.compute_ms < 0 ||
	    c.compute_ms > 1000 || c.every < 0 || c.flood_churn < 0 ||
	    c.flood_churn > 1000 || c.flood_cycle < 0 || c.flood_cycle > 600)
		usage();
	if (snprintf(tmpl, sizeof(tmpl), "%s/dptrain-observe.XXXXXX", base) >=
		    (int)sizeof(tmpl) ||
	    !mkdtemp(tmpl))
		die("cannot create the work directory");
	snprintf(c.dir, sizeof(c.dir), "%s", tmpl);
	signal(SIGPIPE, SIG_IGN);
	/* The library's commit lines would bury the figures. */
	setenv("DPTRAIN_LOG_LEVEL", "warn", 1);

	printf("bench/observe: %d ranks, %d steps (%d timed) of %.0f ms + "
	       "allreduce 1 MiB + vote, a %d MiB save every %d steps, in "
	       "%s\n",
	       c.ranks, c.steps, c.steps - WARMUP, c.compute_ms,
	       STATE_BYTES >> 20, c.every, c.dir);
	fflush(stdout);
	for (int w = W_QUIET; w <= W_FLOOD; w++) {
		if (!c.run[w])
			continue;
		run_job(&c, (enum watch)w, &r[w]);
		printf("%-8s step median %.3f ms, mean %.3f ms (%d steps)",
		       watch_names[w], r[w].median * 1e3, r[w].mean * 1e3,
		       r[w].n);
		if (w != W_QUIET && c.run[W_QUIET])
			printf("; vs quiet: median x%.4f, mean x%.4f",
			       r[w].median / r[W_QUIET].median,
			       r[w].mean / r[W_QUIET].mean);
		if (w == W_STATUS || w == W_METRICS)
			printf("; %ld of %ld asked answered", r[w].right,
			       r[w].asked);
		if (w == W_FLOOD && c.flood_cycle)
			printf("\nflood-cycle %d s: %d cycles; flooded windows "
			       "%d steps, median %.3f ms; quiet windows %d "
			       "steps, median %.3f ms; flooded / quiet x%.4f; "
			       "each flooder held at least %ld of %ld "
			       "connections at once",
			       c.flood_cycle, r[w].cycles, r[w].on_n,
			       r[w].on_median * 1e3, r[w].off_n,
			       r[w].off_median * 1e3,
			       r[w].on_median / r[w].off_median, r[w].right,
			       r[w].asked);
		else if (w == W_FLOOD)
			printf("; %ld of %ld connections held at once",
			       r[w].right, r[w].asked);
		printf("\n");
		fflush(stdout);
	}
	if (c.run[W_QUIET])
		events_size(&c, "quiet");
	if (c.run[W_LOG])
		events_size(&c, "log");
	if (nftw(c.dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
		fprintf(stderr, "bench/observe: cannot remove %s\n", c.dir);
	return 0;
}

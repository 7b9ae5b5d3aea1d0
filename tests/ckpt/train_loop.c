/*
 * A training loop that survives its walltime (doc/walltime.md), for the
 * tests: it resumes from the newest committed checkpoint, runs steps until
 * --steps, asks dpt_should_stop after every step and, when told to stop,
 * saves, waits for the commit and exits 0.
 *
 *   train_loop [--steps N] [--step-ms MS | --global-ms MS] [--every K]
 *              [--linger-ms MS] [--auto]
 *              [--trace] [--stop-signals] [--extra-mib N]
 *              [--fail-after-load] [--stop-without-save] [--hang-save S]
 *              [--log K] [--total N]
 *
 * The state (a replicated int64 vector and an int64 matrix sharded by rows
 * across the ranks) is a pure function of the step: each step mixes the
 * step number into every element. On resume the loaded state is checked
 * against that function computed from step 0, so a lost or repeated step
 * shows. --step-ms MS: each step sleeps MS (100); --global-ms MS: MS
 * over the world size, the time of a fixed global batch shared by the
 * ranks, as a run that scales perfectly with its world (bench/shapes).
 * --every K also saves every K steps (0: only at a stop and at the
 * end). --auto: dpt_ckpt_step after every step instead, which saves when
 * srun --dp-ckpt-every (DPTRAIN_CKPT_EVERY, the coordinator's
 * --ckpt-every) says so and at the stop; each such save prints "saved
 * step=S rank=R". --trace prints "step S" as each step ends. --linger-ms
 * MS: after dpt_finalize the program winds down for MS (logs flushed,
 * files closed...) before it prints "bye rank=R" and exits: a requeue must
 * not cut that short. --stop-signals: SIGUSR1 and SIGTERM ask for a stop
 * (dpt_request_stop from the handler), as a program that must survive
 * preemption and scancel --signal does. --extra-mib N: each rank also
 * saves N MiB of ballast (a sharded uint8 tensor, never checked), so that
 * a save costs the training a measurable time (tests/ckpt/policy.sh,
 * --dp-ckpt-every=auto). Two faulty programs, for the requeue guard:
 * --fail-after-load exits 1 right after its load; --stop-without-save
 * exits 0 at a stop without saving ("stopped step=S rank=R unsaved"), as
 * a program that swallows its save's error does. --hang-save S: rank 1
 * starts the save of step S (with --every), prints "saving step=S rank=1"
 * and sleeps instead of waiting for the commit, so that a test can kill it
 * in the middle of a save. --log K: every K steps, dpt_log of "loss"
 * (a pure function of the step) and "samples_per_s" (64 samples a step
 * over the step's measured time), on every rank; --total N:
 * dpt_set_total_steps(N) after the load; --global-batch B:
 * dpt_set_global_batch(B) after the load. Checkpoint root and run:
 * DPTRAIN_CKPT_URI and DPTRAIN_RUN, as srun --dp-train sets them.
 *
 * Output: "fresh start rank=R world=W" or "resumed step=S rank=R world=W
 * restart=C exact", then "stopped step=S rank=R committed" or "finished
 * step=S rank=R committed"; "FAIL what: error" on failure.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>

#define NREP 1024
#define ROWS 64
#define COLS 32

static int64_t rep[NREP];
static int64_t *rows; /* this rank's rows of the ROWS x COLS matrix */
static uint64_t row0, nrows;

/* The context the signal handler asks to stop; NULL before dpt_init and
 * from dpt_finalize on. */
static struct dpt_ctx *volatile stop_ctx;

static void on_stop_signal(int sig)
{
	(void)sig;
	dpt_request_stop(stop_ctx);
}

/* One step of "training": every element mixes in the step number. */
static int64_t mix(int64_t x, uint64_t step, uint64_t i)
{
	return (int64_t)((uint64_t)x * 6364136223846793005u +
			 step * 1442695040888963407u + i);
}

static void train_step(uint64_t step)
{
	for (uint64_t i = 0; i < NREP; i++)
		rep[i] = mix(rep[i], step, i);
	for (uint64_t i = 0; i < nrows * COLS; i++)
		rows[i] = mix(rows[i], step, row0 * COLS + i);
}

/* Whether the state is exactly what STEP steps from zero make. */
static int state_is(uint64_t step)
{
	int64_t want;
	int ok = 1;

	for (uint64_t i = 0; i < NREP; i++) {
		want = 0;
		for (uint64_t s = 1; s <= step; s++)
			want = mix(want, s, i);
		ok &= want == rep[i];
	}
	for (uint64_t i = 0; i < nrows * COLS; i++) {
		want = 0;
		for (uint64_t s = 1; s <= step; s++)
			want = mix(want, s, row0 * COLS + i);
		ok &= want == rows[i];
	}
	return ok;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int fail(const char *what, int rc)
{
	printf("FAIL %s: %s\n", what, dpt_strerror(rc));
	fflush(stdout);
	return 1;
}

static int save(struct dpt_ckpt *ck, uint64_t step)
{
	int rc = dpt_ckpt_save(ck, &(struct dpt_ckpt_meta){.step = step});

	return rc ? rc : dpt_ckpt_wait(ck);
}

int main(int argc, char **argv)
{
	uint64_t steps = 100, every = 0, step = 0, saved = 0, extra = 0;
	uint64_t hang_save = 0, log_every = 0, total = 0, batch = 0;
	double t_prev = 0;
	unsigned char *ballast = NULL;
	long step_ms = 100, global_ms = 0, linger_ms = 0;
	struct dpt_ctx *ctx = NULL;
	struct dpt_ckpt *ck = NULL;
	struct dpt_ckpt_opts co;
	struct dpt_ckpt_info info;
	int rc, rank, world, stop = 0, autosave = 0, trace = 0;
	int stop_signals = 0, fail_after_load = 0, stop_without_save = 0;
	const char *restarts = getenv("SLURM_RESTART_COUNT");

	for (int i = 1; i < argc; i += 2) {
		if (!strcmp(argv[i], "--auto")) {
			autosave = 1;
			i--; /* no value */
		} else if (!strcmp(argv[i], "--trace")) {
			trace = 1;
			i--;
		} else if (!strcmp(argv[i], "--stop-signals")) {
			stop_signals = 1;
			i--;
		} else if (!strcmp(argv[i], "--fail-after-load")) {
			fail_after_load = 1;
			i--;
		} else if (!strcmp(argv[i], "--stop-without-save")) {
			stop_without_save = 1;
			i--;
		} else if (i + 1 >= argc) {
			fprintf(stderr, "train_loop: %s needs a value\n",
				argv[i]);
			return 2;
		} else if (!strcmp(argv[i], "--steps"))
			steps = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--step-ms"))
			step_ms = strtol(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--global-ms"))
			global_ms = strtol(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--linger-ms"))
			linger_ms = strtol(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--every"))
			every = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--hang-save"))
			hang_save = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--log"))
			log_every = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--total"))
			total = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--global-batch"))
			batch = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--extra-mib"))
			extra = strtoull(argv[i + 1], NULL, 10) << 20;
		else {
			fprintf(stderr, "train_loop: unknown option '%s'\n",
				argv[i]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = dpt_init(&ctx, NULL);
	if (rc)
		return fail("dpt_init", rc);
	rank = dpt_rank(ctx);
	world = dpt_world_size(ctx);
	if (global_ms)
		step_ms = global_ms / world;
	if (stop_signals) {
		struct sigaction sa = {.sa_handler = on_stop_signal};

		sigemptyset(&sa.sa_mask);
		stop_ctx = ctx;
		sigaction(SIGUSR1, &sa, NULL);
		sigaction(SIGTERM, &sa, NULL);
	}
	row0 = (uint64_t)ROWS * rank / world;
	nrows = (uint64_t)ROWS * (rank + 1) / world - row0;
	rows = calloc(nrows * COLS + 1, sizeof(*rows));
	dpt_ckpt_opts_default(&co);
	rc = dpt_ckpt_new(&ck, ctx, &co);
	if (!rc)
		rc = dpt_ckpt_register(ck, &(struct dpt_ckpt_tensor){
						   .name = "rep",
						   .dtype = DPT_INT64,
						   .kind = DPT_CKPT_REPLICATED,
						   .ndim = 1,
						   .shape = (uint64_t[]){NREP},
						   .data = rep});
	if (!rc)
		rc = dpt_ckpt_register(
			ck, &(struct dpt_ckpt_tensor){
				    .name = "rows",
				    .dtype = DPT_INT64,
				    .kind = DPT_CKPT_SHARDED,
				    .ndim = 2,
				    .shape = (uint64_t[]){ROWS, COLS},
				    .offset = (uint64_t[]){row0, 0},
				    .count = (uint64_t[]){nrows, COLS},
				    .data = rows});
	if (!rc && extra) {
		ballast = malloc(extra);
		if (!ballast)
			return fail("ballast", DPT_ENOMEM);
		memset(ballast, 0x5a, extra);
		rc = dpt_ckpt_register(
			ck,
			&(struct dpt_ckpt_tensor){
				.name = "ballast",
				.dtype = DPT_UINT8,
				.kind = DPT_CKPT_SHARDED,
				.ndim = 1,
				.shape = (uint64_t[]){extra * (uint64_t)world},
				.offset = (uint64_t[]){extra * (uint64_t)rank},
				.count = (uint64_t[]){extra},
				.data = ballast});
	}
	if (rc)
		return fail("register", rc);

	rc = dpt_ckpt_load(ck, DPT_CKPT_LATEST, &info);
	if (rc == DPT_ENOENT) {
		printf("fresh start rank=%d world=%d\n", rank, world);
	} else if (rc) {
		return fail("dpt_ckpt_load", rc);
	} else {
		step = saved = info.step;
		if (!state_is(step))
			return fail("resume", DPT_ECORRUPT);
		printf("resumed step=%" PRIu64
		       " rank=%d world=%d restart=%s exact\n",
		       step, rank, world, restarts ? restarts : "0");
	}
	if (total && (rc = dpt_set_total_steps(ctx, total)) != 0)
		return fail("dpt_set_total_steps", rc);
	if (batch && (rc = dpt_set_global_batch(ctx, batch)) != 0)
		return fail("dpt_set_global_batch", rc);
	t_prev = now_s();
	if (fail_after_load) {
		printf("failing on purpose rank=%d\n", rank);
		return 1;
	}

	while (step < steps) {
		train_step(++step);
		usleep((useconds_t)step_ms * 1000);
		if (trace)
			printf("step %" PRIu64 "\n", step);
		if (log_every && step % log_every == 0) {
			double t = now_s();
			const char *names[] = {"loss", "samples_per_s"};
			double values[] = {1.0 / (double)step,
					   64.0 * (double)log_every /
						   (t - t_prev)};

			t_prev = t;
			rc = dpt_log(ctx, step, 2, names, values);
			if (rc)
				return fail("dpt_log", rc);
		}
		if (autosave) {
			int now_saved;

			rc = dpt_ckpt_step(
				ck, &(struct dpt_ckpt_meta){.step = step},
				&stop, &now_saved);
			if (rc)
				return fail("dpt_ckpt_step", rc);
			if (now_saved) {
				saved = step;
				printf("saved step=%" PRIu64 " rank=%d\n", step,
				       rank);
			}
			if (stop)
				break;
			continue;
		}
		if (every && step % every == 0 && step == hang_save &&
		    rank == 1) {
			rc = dpt_ckpt_save(
				ck, &(struct dpt_ckpt_meta){.step = step});
			printf("saving step=%" PRIu64 " rank=%d\n", step, rank);
			if (rc)
				return fail("save", rc);
			sleep(600); /* the test kills it */
		}
		if (every && step % every == 0) {
			rc = save(ck, step);
			if (rc)
				return fail("save", rc);
			saved = step;
		}
		rc = dpt_should_stop(ctx, &stop);
		if (rc)
			return fail("dpt_should_stop", rc);
		if (stop)
			break;
	}
	if (stop && stop_without_save) {
		printf("stopped step=%" PRIu64 " rank=%d unsaved\n", step,
		       rank);
		dpt_ckpt_destroy(&ck);
		stop_ctx = NULL;
		rc = dpt_finalize(&ctx);
		free(rows);
		return rc ? fail("dpt_finalize", rc) : 0;
	}
	rc = saved == step ? dpt_ckpt_wait(ck) : save(ck, step);
	if (rc)
		return fail("save", rc);
	printf("%s step=%" PRIu64 " rank=%d committed\n",
	       stop ? "stopped" : "finished", step, rank);
	dpt_ckpt_destroy(&ck);
	stop_ctx = NULL; /* before the context is freed */
	rc = dpt_finalize(&ctx);
	free(rows);
	free(ballast);
	if (rc)
		return fail("dpt_finalize", rc);
	usleep((useconds_t)linger_ms * 1000);
	printf("bye rank=%d\n", rank);
	return 0;
}

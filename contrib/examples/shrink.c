/*
 * Live shrink (doc/shrink.md): a data-parallel training loop that goes on
 * with the survivors when a rank or a node dies, from the state in memory,
 * without a requeue.
 *
 *   srun --dp-train=fit --dp-ckpt=file:///scratch/$USER/ckpt \
 *        --dp-ckpt-every=10steps shrink --steps 200
 *
 * The model is a linear regression of DIM features fitted by SGD with
 * momentum to a synthetic dataset whose sample I is a pure function of I.
 * dpt_sampler deals each global step's batch across the ranks; the
 * gradients and the loss are summed with dpt_allreduce, so the result does
 * not depend on the world size but for the order of the additions. When a
 * collective, a vote or a commit returns DPT_EPEERLOST or DPT_EGENERATION,
 * the rank rejoins, takes the new rank 0's state (parameters, momentum,
 * step, sampler position) by dpt_broadcast, tells its sampler its new
 * place and repeats the step after the adopted one. Checkpoints
 * (dpt_ckpt_step: --dp-ckpt-every, the walltime) are written by whatever
 * world size is current; a start resumes from the newest.
 *
 * Options: --steps N (default 200), --step-ms MS (sleep per step, standing
 * in for compute; default 0), --batch B (global batch, default 48),
 * --seed S (sample order, default 7).
 *
 * Output (one line each, for tests/shrink/check.py):
 *   trained step=S gen=G rank=R world=W loss=L idx=I,I,...
 *     after step S's update (L: the global mean loss; I: this rank's
 *     sample indices);
 *   adopted step=S gen=G rank=R world=W   after a recovery;
 *   final step=S gen=G rank=R world=W params=P,P,...   at the end;
 *   "FAIL what: error" on an error that ends the program (exit 1).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>
#include <dptrain/sampler.h>

#define DIM	  16	    /* features; the model has DIM + 1 parameters */
#define NPARAM	  (DIM + 1) /* weights, then the bias */
#define DATASET	  4800	    /* samples */
#define LR	  0.05	    /* learning rate */
#define MOMENTUM  0.9	    /* SGD momentum */
#define MAX_SHARE DATASET   /* a rank's share of a global batch, at most */

static double params[NPARAM], velocity[NPARAM];

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15u;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

/* A number in [-1, 1) that only depends on KEY. */
static double uniform(uint64_t key)
{
	return (double)(splitmix64(key) >> 11) * 0x1p-52 - 1.0;
}

/* Sample I: features X[DIM] and the target. */
static double sample(uint64_t i, double *x)
{
	double y = 0.5 + 0.01 * uniform(~i);

	for (int j = 0; j < DIM; j++) {
		x[j] = uniform(i * DIM + (uint64_t)j);
		y += (double)(j % 5 - 2) * x[j];
	}
	return y;
}

static int fail(const char *what, int rc)
{
	printf("FAIL %s: %s\n", what, dpt_strerror(rc));
	return 1;
}

static int restartable(int rc)
{
	return rc == DPT_EPEERLOST || rc == DPT_EGENERATION;
}

/*
 * Global step STEP: this rank's share of the batch, the global gradient
 * and loss by one allreduce, then the update. The state changes only when
 * every collective of the step succeeded on this rank.
 */
static int train_step(struct dpt_ctx *ctx, struct dpt_sampler *s,
		      uint64_t batch, uint64_t step, long step_ms)
{
	static uint64_t idx[MAX_SHARE];
	double acc[NPARAM + 1] = {0}; /* gradient, then the loss */
	double x[DIM];
	uint64_t share = batch / (uint64_t)dpt_world_size(ctx);
	char list[MAX_SHARE * 8];
	size_t len = 0;
	int rc = dpt_sampler_next(s, idx);

	if (rc)
		return rc;
	for (uint64_t k = 0; k < share; k++) {
		double y = sample(idx[k], x), err = params[DIM] - y;

		for (int j = 0; j < DIM; j++)
			err += params[j] * x[j];
		for (int j = 0; j < DIM; j++)
			acc[j] += 2 * err * x[j] / (double)batch;
		acc[DIM] += 2 * err / (double)batch;
		acc[NPARAM] += err * err / (double)batch;
	}
	if (step_ms)
		usleep((useconds_t)step_ms * 1000);
	rc = dpt_allreduce(ctx, acc, acc, NPARAM + 1, DPT_FLOAT64, DPT_SUM);
	if (rc)
		return rc;
	for (int j = 0; j < NPARAM; j++) {
		velocity[j] = MOMENTUM * velocity[j] + acc[j];
		params[j] -= LR * velocity[j];
	}
	for (uint64_t k = 0; k < share && len < sizeof(list) - 24; k++)
		len += (size_t)snprintf(list + len, sizeof(list) - len,
					"%s%" PRIu64, k ? "," : "", idx[k]);
	printf("trained step=%" PRIu64 " gen=%" PRIu32
	       " rank=%d world=%d loss=%.17g idx=%s\n",
	       step, dpt_generation(ctx), dpt_rank(ctx), dpt_world_size(ctx),
	       acc[NPARAM], list);
	return 0;
}

/* What the survivors take from the new rank 0 after a rejoin. */
struct shared {
	uint64_t step;
	struct dpt_sampler_state at; /* the sampler's position after STEP */
	double params[NPARAM], velocity[NPARAM];
};

/*
 * Rejoin, then make this rank's state rank 0's: *STEP and *AT (the
 * sampler's position after *STEP) in, the adopted ones out. Returns 0 or
 * the error that ends the program (fewer than --dp-min-workers left,
 * another kind of error); a restartable error of the broadcast (one more
 * rank died) rejoins again.
 */
static int recover(struct dpt_ctx *ctx, struct dpt_ckpt *ck,
		   struct dpt_sampler *s, uint64_t *step,
		   struct dpt_sampler_state *at)
{
	struct shared sh;
	int rc;

	/* A save in flight is not committed: its wait returns the error. */
	(void)dpt_ckpt_wait(ck);
	do {
		rc = dpt_rejoin(ctx);
		if (rc)
			return rc;
		sh.step = *step;
		sh.at = *at;
		memcpy(sh.params, params, sizeof(params));
		memcpy(sh.velocity, velocity, sizeof(velocity));
		rc = dpt_broadcast(ctx, &sh, sizeof(sh), DPT_UINT8, 0);
	} while (restartable(rc));
	if (rc)
		return rc;
	*step = sh.step;
	*at = sh.at;
	memcpy(params, sh.params, sizeof(params));
	memcpy(velocity, sh.velocity, sizeof(velocity));
	rc = dpt_sampler_set_world(s, dpt_rank(ctx), dpt_world_size(ctx));
	if (!rc)
		rc = dpt_sampler_set_state(s, at);
	if (!rc)
		printf("adopted step=%" PRIu64 " gen=%" PRIu32
		       " rank=%d world=%d\n",
		       *step, dpt_generation(ctx), dpt_rank(ctx),
		       dpt_world_size(ctx));
	return rc;
}

static int register_state(struct dpt_ckpt *ck)
{
	int rc = dpt_ckpt_register(
		ck, &(struct dpt_ckpt_tensor){.name = "params",
					      .dtype = DPT_FLOAT64,
					      .kind = DPT_CKPT_REPLICATED,
					      .ndim = 1,
					      .shape = (uint64_t[]){NPARAM},
					      .data = params});

	return rc ? rc
		  : dpt_ckpt_register(ck, &(struct dpt_ckpt_tensor){
						  .name = "velocity",
						  .dtype = DPT_FLOAT64,
						  .kind = DPT_CKPT_REPLICATED,
						  .ndim = 1,
						  .shape = (uint64_t[]){NPARAM},
						  .data = velocity});
}

struct args {
	uint64_t steps, batch, seed;
	long step_ms;
};

/* --steps N --step-ms N --batch N --seed N into A; 0, or 2 (said why). */
static int parse_args(int argc, char **argv, struct args *a)
{
	for (int i = 1; i < argc; i += 2) {
		char *end = NULL;
		unsigned long long v =
			i + 1 < argc ? strtoull(argv[i + 1], &end, 10) : 0;

		if (!end || *end || end == argv[i + 1]) {
			fprintf(stderr, "shrink: %s needs a number\n", argv[i]);
			return 2;
		}
		if (!strcmp(argv[i], "--steps"))
			a->steps = v;
		else if (!strcmp(argv[i], "--step-ms"))
			a->step_ms = (long)v;
		else if (!strcmp(argv[i], "--batch"))
			a->batch = v;
		else if (!strcmp(argv[i], "--seed"))
			a->seed = v;
		else {
			fprintf(stderr,
				"shrink: unknown option '%s' (--steps, "
				"--step-ms, --batch, --seed)\n",
				argv[i]);
			return 2;
		}
	}
	if (a->batch == 0 || a->batch > MAX_SHARE) {
		fprintf(stderr, "shrink: --batch must be 1..%d\n", MAX_SHARE);
		return 2;
	}
	return 0;
}

/* The latest committed checkpoint into S, *STEP, *AT and *LAST_SAVED;
 * none: 0, and nothing changed. */
static int resume(struct dpt_ckpt *ck, struct dpt_sampler *s, uint64_t *step,
		  struct dpt_sampler_state *at, uint64_t *last_saved)
{
	struct dpt_ckpt_info info;
	int rc = dpt_ckpt_load(ck, DPT_CKPT_LATEST, &info);

	if (!rc && info.user_len == sizeof(*at)) {
		memcpy(at, info.user, sizeof(*at));
		*step = *last_saved = info.step;
		return dpt_sampler_set_state(s, at);
	}
	if (!rc)
		return DPT_ECORRUPT; /* not this program's checkpoint */
	return rc == DPT_ENOENT ? 0 : rc;
}

int main(int argc, char **argv)
{
	struct args args = {.steps = 200, .batch = 48, .seed = 7};
	uint64_t step = 0;
	uint64_t last_saved = UINT64_MAX; /* the step committed or in flight */
	struct dpt_ctx *ctx = NULL;
	struct dpt_ckpt *ck = NULL;
	struct dpt_sampler *s = NULL;
	struct dpt_sampler_state at;
	struct dpt_ckpt_opts co;
	int rc, stop = 0, saved = 0;

	if (parse_args(argc, argv, &args))
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = dpt_init(&ctx, NULL);
	if (rc)
		return fail("dpt_init", rc);
	rc = dpt_sampler_new(&s, DATASET, args.batch, args.seed, 1);
	if (!rc)
		rc = dpt_sampler_set_world(s, dpt_rank(ctx),
					   dpt_world_size(ctx));
	if (rc)
		return fail("sampler", rc);
	dpt_ckpt_opts_default(&co);
	rc = dpt_ckpt_new(&ck, ctx, &co);
	if (!rc)
		rc = register_state(ck);
	if (rc)
		return fail("checkpoint", rc);

	rc = resume(ck, s, &step, &at, &last_saved);
	if (rc)
		return fail("load", rc);
	printf("%s step=%" PRIu64 " rank=%d world=%d\n",
	       step ? "resumed" : "fresh", step, dpt_rank(ctx),
	       dpt_world_size(ctx));

	while (step < args.steps && !stop) {
		dpt_sampler_get_state(s, &at); /* the position after STEP */
		rc = train_step(ctx, s, args.batch, step + 1, args.step_ms);
		if (!rc) {
			struct dpt_sampler_state next;

			dpt_sampler_get_state(s, &next);
			rc = dpt_ckpt_step(
				ck,
				&(struct dpt_ckpt_meta){
					.step = step + 1,
					.sample_cursor =
						dpt_sampler_sample_cursor(s),
					.user = &next,
					.user_len = sizeof(next)},
				&stop, &saved);
			/* The update is applied: the step counts even when
			 * the vote after it failed. */
			step++;
			at = next;
			if (saved)
				last_saved = step;
		}
		if (restartable(rc)) {
			last_saved = UINT64_MAX; /* not committed */
			rc = recover(ctx, ck, s, &step, &at);
			if (rc)
				return fail("recover", rc);
			continue;
		}
		if (rc)
			return fail("step", rc);
	}
	if (last_saved != step) {
		rc = dpt_ckpt_save(
			ck,
			&(struct dpt_ckpt_meta){
				.step = step,
				.sample_cursor = dpt_sampler_sample_cursor(s),
				.user = &at,
				.user_len = sizeof(at)});
		if (!rc)
			rc = dpt_ckpt_wait(ck);
		if (rc)
			return fail("final save", rc);
	} else if ((rc = dpt_ckpt_wait(ck)) != 0) {
		return fail("final commit", rc);
	}
	printf("final step=%" PRIu64 " gen=%" PRIu32
	       " rank=%d world=%d params=",
	       step, dpt_generation(ctx), dpt_rank(ctx), dpt_world_size(ctx));
	for (int j = 0; j < NPARAM; j++)
		printf("%s%.17g", j ? "," : "", params[j]);
	printf("\n");
	dpt_ckpt_destroy(&ck);
	dpt_sampler_destroy(&s);
	rc = dpt_finalize(&ctx);
	return rc ? fail("dpt_finalize", rc) : 0;
}

/*
 * dptrain: the command-line tool. `dptrain ckpt ls|show|verify|gc URI`
 * inspects and maintains checkpoints (doc/checkpoint-format.md) on both
 * storage backends, without a job.
 */
#include "config.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/dptrain.h>

#include "ckpt/ckpt_int.h"
#include "log.h"
#include "parse.h"

static void usage(FILE *f)
{
	fputs("usage: dptrain ckpt ls URI\n"
	      "       dptrain ckpt show URI [--step N]\n"
	      "       dptrain ckpt verify URI [--step N]\n"
	      "       dptrain ckpt gc URI [--keep-last K] [--keep-every N] "
	      "[--age SECONDS]\n"
	      "\n"
	      "URI is file:///path or s3://bucket/prefix: for ls, a root of\n"
	      "runs (or a run); for the others, one run (ROOT/RUN).\n"
	      "  ls      list the runs and their committed, uncommitted and\n"
	      "          damaged (quarantined by a load) steps\n"
	      "  show    the manifest of the newest committed step (or N)\n"
	      "  verify  read every chunk of every committed step (or N) and\n"
	      "          check its checksums; exit status 1 names the damage\n"
	      "  gc      delete damaged steps, uncommitted steps older than\n"
	      "          the newest commit and leftovers of crashed writers\n"
	      "          older than --age\n"
	      "          (default 3600); with --keep-last, also committed steps\n"
	      "          beyond the K newest (multiples of --keep-every stay)\n"
	      "S3 settings come from the AWS environment variables and\n"
	      "DPTRAIN_S3_ENDPOINT (doc/storage.md).\n",
	      f);
}

/* ------------------------------------------------------------ ls */

struct ls_entry {
	char *run;
	uint64_t step;
	bool committed, damaged;
};

struct ls_ctx {
	struct ls_entry *v;
	size_t n, cap;
};

static int ls_one(void *ctx_p, const char *key, uint64_t size)
{
	struct ls_ctx *ctx = ctx_p;
	const char *p = strstr(key, "step-"), *slash;
	char canon[32];
	uint64_t step;
	char *end;

	(void)size;
	/* "[RUN/]step-N/NAME": the step component starts the key or follows
	 * a '/'; RUN is whatever comes before it. */
	while (p && p != key && p[-1] != '/')
		p = strstr(p + 1, "step-");
	if (!p || p[5] < '0' || p[5] > '9')
		return 0;
	step = strtoull(p + 5, &end, 10);
	dpt__step_dir(step, canon, sizeof(canon));
	if (*end != '/' || (size_t)(end - p) != strlen(canon))
		return 0;
	slash = strchr(end + 1, '/');
	if (slash)
		return 0;
	if (ctx->n > 0) {
		struct ls_entry *last = &ctx->v[ctx->n - 1];
		if (last->step == step &&
		    strlen(last->run) == (size_t)(p - key) &&
		    strncmp(last->run, key, (size_t)(p - key)) == 0) {
			last->committed |= strcmp(end + 1, DPT__CKPT_MANIFEST) == 0;
			last->damaged |= strcmp(end + 1, DPT__CKPT_DAMAGED) == 0;
			return 0;
		}
	}
	if (dpt__array_room(&ctx->v, ctx->n, &ctx->cap, sizeof(*ctx->v)))
		return DPT_ENOMEM;
	ctx->v[ctx->n].run = strndup(key, (size_t)(p - key));
	if (!ctx->v[ctx->n].run)
		return DPT_ENOMEM;
	ctx->v[ctx->n].step = step;
	ctx->v[ctx->n].committed = strcmp(end + 1, DPT__CKPT_MANIFEST) == 0;
	ctx->v[ctx->n].damaged = strcmp(end + 1, DPT__CKPT_DAMAGED) == 0;
	ctx->n++;
	return 0;
}

static int cmd_ls(struct dpt__storage *s)
{
	struct ls_ctx ctx = {0};
	int rc = dpt__storage_list(s, "", ls_one, &ctx);

	if (!rc) {
		printf("%-24s %12s  %s\n", "RUN", "STEP", "STATE");
		for (size_t i = 0; i < ctx.n; i++) {
			size_t n = strlen(ctx.v[i].run);
			printf("%-24.*s %12" PRIu64 "  %s\n",
			       n ? (int)n - 1 : 1, n ? ctx.v[i].run : ".",
			       ctx.v[i].step,
			       ctx.v[i].committed ? "committed" :
			       ctx.v[i].damaged ? "damaged" : "uncommitted");
		}
		/* An empty listing is also what a mistyped root gives. */
		if (ctx.n == 0)
			fprintf(stderr,
				"dptrain: no checkpoint steps under '%s' (is "
				"it the right root?)\n",
				dpt__storage_uri(s));
	}
	for (size_t i = 0; i < ctx.n; i++)
		free(ctx.v[i].run);
	free(ctx.v);
	return rc;
}

/* ------------------------------------------------------------ show */

static int newest(struct dpt__storage *s, uint64_t *step)
{
	struct dpt__step_list l;
	int rc = dpt__ckpt_list(s, "", &l);

	if (rc)
		return rc;
	if (l.ncommitted == 0) {
		dpt__error("no committed step in '%s'", dpt__storage_uri(s));
		rc = DPT_ENOENT;
	} else {
		*step = l.committed[l.ncommitted - 1];
	}
	dpt__step_list_release(&l);
	return rc;
}

static void print_dims(const uint64_t *v, int n)
{
	putchar('[');
	for (int d = 0; d < n; d++)
		printf("%s%" PRIu64, d ? ", " : "", v[d]);
	putchar(']');
}

static int cmd_show(struct dpt__storage *s, uint64_t step)
{
	struct dpt__manifest m;
	uint64_t total = 0;
	int rc = dpt__ckpt_read_manifest(s, step, &m);

	if (rc) {
		if (rc == DPT_ENOENT)
			dpt__error("step %" PRIu64 " is not committed in '%s'",
				   step, dpt__storage_uri(s));
		return rc;
	}
	printf("step:          %" PRIu64 "\n", m.step);
	printf("format:        %s version %d\n", DPT__CKPT_FORMAT, m.version);
	printf("world size:    %" PRIu32 " (written with)\n", m.world_size);
	printf("sample cursor: %" PRIu64 "\n", m.sample_cursor);
	printf("rng state:     %zu bytes\n", m.rng_len);
	printf("user blob:     %zu bytes\n", m.user_len);
	printf("checksums:     xxh3-64 per %" PRIu64 " bytes\n", m.block_size);
	printf("files:\n");
	for (size_t i = 0; i < m.nfiles; i++) {
		printf("  %-40s rank %-5" PRIu32 " %14" PRIu64 " bytes\n",
		       m.files[i].name, m.files[i].rank, m.files[i].size);
		total += m.files[i].size;
	}
	printf("tensors:\n");
	for (size_t i = 0; i < m.ntensors; i++) {
		const struct dpt__tensor_desc *t = &m.tensors[i];
		uint64_t bytes = 0;

		for (size_t j = 0; j < t->nchunks; j++)
			bytes += t->chunks[j].length;
		printf("  %-32s %-10s %-10s ", t->name, dpt__dtype_name(t->dtype),
		       t->kind == DPT_CKPT_SHARDED ? "sharded" : "replicated");
		print_dims(t->shape, t->ndim);
		printf("  %zu chunk(s), %" PRIu64 " bytes\n", t->nchunks, bytes);
	}
	printf("total:         %" PRIu64 " bytes in %zu file(s)\n", total,
	       m.nfiles);
	dpt__manifest_release(&m);
	return 0;
}

/* ------------------------------------------------------------ verify */

static int cmd_verify(struct dpt__storage *s, uint64_t step, bool all)
{
	struct dpt__step_list l = {0};
	uint64_t one = step;
	const uint64_t *steps = &one;
	size_t n = 1, damaged = 0;
	int rc, first = 0;

	if (all) {
		rc = dpt__ckpt_list(s, "", &l);
		if (rc)
			return rc;
		steps = l.committed;
		n = l.ncommitted;
		if (n == 0) {
			dpt__error("no committed step in '%s'", dpt__storage_uri(s));
			first = DPT_ENOENT;
		}
	}
	for (size_t i = 0; i < n; i++) {
		char why[600];
		size_t bad = 0;

		rc = dpt__ckpt_verify(s, steps[i], &bad, why, sizeof(why));
		if (rc && why[0]) {
			/* Refused before any chunk was read: no chunk count,
			 * and the cause rather than a checksum mismatch. */
			printf("step %" PRIu64 ": DAMAGED: %s\n", steps[i], why);
			damaged++;
			if (!first)
				first = rc;
		} else if (rc) {
			printf("step %" PRIu64 ": DAMAGED (%zu chunk(s)): %s\n",
			       steps[i], bad, dpt_strerror(rc));
			damaged++;
			if (!first)
				first = rc;
		} else {
			printf("step %" PRIu64 ": ok\n", steps[i]);
		}
	}
	if (damaged)
		printf("%zu of %zu step(s) damaged\n", damaged, n);
	dpt__step_list_release(&l);
	return first;
}

/* ------------------------------------------------------------ main */

static int parse_u64(const char *opt, const char *v, uint64_t *out)
{
	long x;

	if (!v || dpt__parse_long(v, 0, LONG_MAX, &x)) {
		fprintf(stderr, "dptrain: %s needs a non-negative number\n", opt);
		return -1;
	}
	*out = (uint64_t)x;
	return 0;
}

int main(int argc, char **argv)
{
	struct dpt__storage *s = NULL;
	uint64_t step = 0, keep_last = 0, keep_every = 0, age = 3600;
	bool have_step = false;
	const char *cmd, *uri;
	int rc;

	dpt__log_set_ident("dptrain");
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "--version")) {
		printf("dptrain %s\n", dpt_version());
		return 0;
	}
	if (argc < 4 || strcmp(argv[1], "ckpt")) {
		usage(stderr);
		return 2;
	}
	cmd = argv[2];
	uri = argv[3];
	for (int i = 4; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t *dst;

		if (!strcmp(argv[i], "--step")) {
			dst = &step;
			have_step = true;
		} else if (!strcmp(argv[i], "--keep-last")) {
			dst = &keep_last;
		} else if (!strcmp(argv[i], "--keep-every")) {
			dst = &keep_every;
		} else if (!strcmp(argv[i], "--age")) {
			dst = &age;
		} else {
			fprintf(stderr, "dptrain: unknown option '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
		if (parse_u64(argv[i], v, dst))
			return 2;
		i++;
	}
	if (strcmp(cmd, "ls") && strcmp(cmd, "show") && strcmp(cmd, "verify") &&
	    strcmp(cmd, "gc")) {
		fprintf(stderr, "dptrain: unknown command 'ckpt %s'\n", cmd);
		usage(stderr);
		return 2;
	}
	rc = dpt__storage_open(uri, NULL, &s);
	if (rc)
		return 1;
	if (!strcmp(cmd, "ls")) {
		rc = cmd_ls(s);
	} else if (!strcmp(cmd, "show")) {
		rc = have_step ? 0 : newest(s, &step);
		if (!rc)
			rc = cmd_show(s, step);
	} else if (!strcmp(cmd, "verify")) {
		rc = cmd_verify(s, step, !have_step);
	} else {
		size_t deleted = 0;
		int k = keep_last == 0 ? INT_MAX :
			keep_last > INT_MAX ? INT_MAX : (int)keep_last;
		rc = dpt__ckpt_retain(s, k, keep_every, (long)age, false,
				      &deleted);
		printf("%zu step(s) deleted\n", deleted);
	}
	dpt__storage_destroy(&s);
	return rc ? 1 : 0;
}

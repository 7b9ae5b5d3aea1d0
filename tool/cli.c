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
#include "plot.h"
#include "status.h"

/* The subcommands of `dptrain ckpt`, their options and their help. */
struct command {
	const char *name;
	const char *options; /* the options it takes, each followed by ' ' */
	const char *synopsis;
	const char *help;
};

static const struct command commands[] = {
	{"ls", "", "URI",
	 "List the runs under URI, a root of runs (or one run), and their\n"
	 "committed, uncommitted and damaged (quarantined by a load) steps.\n"},
	{"show", "--step ", "URI [--step N]",
	 "Print the manifest of the newest committed step of the run URI\n"
	 "(ROOT/RUN): its files, tensors and meta.\n"
	 "  --step N   that step instead\n"},
	{"verify", "--step ", "URI [--step N]",
	 "Read every chunk of every committed step of the run URI and check\n"
	 "its checksums; exit status 1 names the damage.\n"
	 "  --step N   that step only\n"},
	{"gc", "--keep-last --keep-every --age ",
	 "URI [--keep-last K] [--keep-every N] [--age SECONDS]",
	 "Delete from the run URI its damaged steps, its uncommitted steps\n"
	 "older than the newest commit and the leftovers of crashed writers.\n"
	 "  --keep-last K     also delete the committed steps beyond the K\n"
	 "                    newest (K >= 1; without it every committed step\n"
	 "                    stays)\n"
	 "  --keep-every N    with --keep-last: steps that are multiples of N\n"
	 "                    stay\n"
	 "  --age SECONDS     leftovers younger than this stay (default 3600:\n"
	 "                    a writer may still be at work)\n"},
};

static const char uri_help[] =
	"URI is file:///path (an existing directory) or s3://bucket/prefix;\n"
	"S3 settings come from the AWS environment variables and\n"
	"DPTRAIN_S3_ENDPOINT (doc/storage.md).\n";

static void usage(FILE *f)
{
	fputs("usage: dptrain ckpt COMMAND URI [OPTION...]\n"
	      "       dptrain ckpt COMMAND --help\n"
	      "       dptrain status [JOBID | RUN | URI] [--json]\n"
	      "       dptrain plot RUN | URI [-o FILE.png] [--y NAME]...\n"
	      "       dptrain --help | --version\n"
	      "\n"
	      "Inspect and maintain the checkpoints of dptrain runs, without a "
	      "job.\n"
	      "\n"
	      "Commands:\n",
	      f);
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  dptrain ckpt %s %s\n", commands[i].name,
			commands[i].synopsis);
	fputs("\n", f);
	fputs(uri_help, f);
}

static void usage_command(FILE *f, const struct command *c)
{
	fprintf(f, "usage: dptrain ckpt %s %s\n\n%s\n%s", c->name, c->synopsis,
		c->help, uri_help);
}

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static bool is_help(const char *arg)
{
	return !strcmp(arg, "--help") || !strcmp(arg, "-h");
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
			last->committed |=
				strcmp(end + 1, DPT__CKPT_MANIFEST) == 0;
			last->damaged |=
				strcmp(end + 1, DPT__CKPT_DAMAGED) == 0;
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
			       ctx.v[i].committed ? "committed"
			       : ctx.v[i].damaged ? "damaged"
						  : "uncommitted");
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
		printf("  %-32s %-10s %-10s ", t->name,
		       dpt__dtype_name(t->dtype),
		       t->kind == DPT_CKPT_SHARDED ? "sharded" : "replicated");
		print_dims(t->shape, t->ndim);
		printf("  %zu chunk(s), %" PRIu64 " bytes\n", t->nchunks,
		       bytes);
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
			dpt__error("no committed step in '%s'",
				   dpt__storage_uri(s));
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
			printf("step %" PRIu64 ": DAMAGED: %s\n", steps[i],
			       why);
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
		fprintf(stderr, "dptrain: %s needs a non-negative number\n",
			opt);
		return -1;
	}
	*out = (uint64_t)x;
	return 0;
}

/* Whether C takes OPT ("--step" and the like). */
static bool takes(const struct command *c, const char *opt)
{
	size_t n = strlen(opt);
	const char *p = c->options;

	while ((p = strstr(p, opt)) != NULL) {
		if (p[n] == ' ' && (p == c->options || p[-1] == ' '))
			return true;
		p += n;
	}
	return false;
}

static int open_root(const char *uri, struct dpt__storage **s)
{
	struct dpt__storage_opts so;
	int rc;

	/* Looking at checkpoints must not create a directory: a mistyped
	 * path is reported, not made. */
	dpt__storage_opts_init(&so);
	so.no_create = true;
	rc = dpt__storage_open(uri, &so, s);
	if (rc == DPT_ENOENT)
		fprintf(stderr, "dptrain: no such checkpoint directory: %s\n",
			strncmp(uri, "file://", 7) ? uri : uri + 7);
	return rc;
}

static const char status_help[] =
	"usage: dptrain status [JOBID | RUN | URI] [--json]\n"
	"\n"
	"A running job's state from its coordinator: generation, world size\n"
	"and nodes, step (with samples/s and the progress toward the total\n"
	"steps, when the program logs and declares them), last committed\n"
	"step and its age, end time and time left, when the step will stop\n"
	"for the walltime (--dp-grace before the end), when the next\n"
	"periodic checkpoint is due, restarts and why the last generation\n"
	"ended. Only the job's owner and root can ask. A queued or finished\n"
	"job, a run name (under $DPTRAIN_CKPT_URI, or a directory) or a run\n"
	"URI: the story of the run from its events. Without an argument:\n"
	"$SLURM_JOB_ID.\n"
	"  --json     one JSON object, for scripts\n";

static int status_command(int argc, char **argv)
{
	const char *what = NULL;
	bool json = false;

	for (int i = 0; i < argc; i++) {
		if (is_help(argv[i])) {
			fputs(status_help, stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (argv[i][0] == '-') {
			fprintf(stderr,
				"dptrain: 'status' has no option '%s'\n\n",
				argv[i]);
			fputs(status_help, stderr);
			return 2;
		} else if (what) {
			fprintf(stderr,
				"dptrain: 'status' takes one JOBID, RUN or "
				"URI, not '%s' and '%s'\n",
				what, argv[i]);
			return 2;
		} else {
			what = argv[i];
		}
	}
	if (!what)
		what = getenv("SLURM_JOB_ID");
	if (!what || !*what) {
		fprintf(stderr, "dptrain: 'status' needs a JOBID, RUN or URI "
				"(outside a job)\n\n");
		fputs(status_help, stderr);
		return 2;
	}
	return dpt__status_main(what, json);
}

static const char plot_help[] =
	"usage: dptrain plot RUN | URI [-o FILE.png] [--y NAME]...\n"
	"\n"
	"A PNG of the run's logged scalars (the program's dpt_log or\n"
	"Checkpoint.log) and of its samples/s against the global step, each\n"
	"start of the run and change of world size marked \"run N: W ranks\",\n"
	"drawn by gnuplot (apt-get install gnuplot-nox). Samples/s are the\n"
	"logged samples_per_s, else steps/s between commits. Prints the PNG's\n"
	"path.\n"
	"  -o, --output FILE.png  where to write it (default: RUN.png here)\n"
	"  --y NAME               a scalar to draw (default: loss); "
	"repeatable\n";

static int plot_command(int argc, char **argv)
{
	const char *what = NULL, *out = NULL, *ys[16];
	size_t nys = 0;

	for (int i = 0; i < argc; i++) {
		if (is_help(argv[i])) {
			fputs(plot_help, stdout);
			return 0;
		}
		if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output") ||
		    !strcmp(argv[i], "--y")) {
			if (i + 1 >= argc) {
				fprintf(stderr,
					"dptrain: 'plot %s' needs a value\n",
					argv[i]);
				return 2;
			}
			if (!strcmp(argv[i], "--y")) {
				if (nys == sizeof(ys) / sizeof(ys[0])) {
					fprintf(stderr, "dptrain: too many "
							"--y\n");
					return 2;
				}
				ys[nys++] = argv[++i];
			} else {
				out = argv[++i];
			}
		} else if (argv[i][0] == '-') {
			fprintf(stderr,
				"dptrain: 'plot' has no option '%s'\n\n",
				argv[i]);
			fputs(plot_help, stderr);
			return 2;
		} else if (what) {
			fprintf(stderr,
				"dptrain: 'plot' takes one RUN or URI, not "
				"'%s' and '%s'\n",
				what, argv[i]);
			return 2;
		} else {
			what = argv[i];
		}
	}
	if (!what) {
		fprintf(stderr, "dptrain: 'plot' needs a RUN or URI\n\n");
		fputs(plot_help, stderr);
		return 2;
	}
	return dpt__plot_main(what, out, ys, nys);
}

/* What `dptrain ckpt C ...` was given. */
struct ckpt_args {
	const char *uri;
	uint64_t step, keep_last, keep_every, age;
	bool have_step, have_keep_last;
};

/* ARGV[3..] of `dptrain ckpt C` into A; 0, or 2 (the exit status of a
 * usage error) after a message. */
static int ckpt_args(int argc, char **argv, const struct command *c,
		     struct ckpt_args *a)
{
	*a = (struct ckpt_args){.age = 3600};
	for (int i = 3; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t *dst;

		if (argv[i][0] != '-') {
			if (a->uri) {
				fprintf(stderr,
					"dptrain: 'ckpt %s' takes one URI, "
					"not '%s' and '%s'\n",
					c->name, a->uri, argv[i]);
				return 2;
			}
			a->uri = argv[i];
			continue;
		}
		if (!takes(c, argv[i])) {
			fprintf(stderr,
				"dptrain: 'ckpt %s' has no option '%s'\n\n",
				c->name, argv[i]);
			usage_command(stderr, c);
			return 2;
		}
		if (!strcmp(argv[i], "--step")) {
			dst = &a->step;
			a->have_step = true;
		} else if (!strcmp(argv[i], "--keep-last")) {
			dst = &a->keep_last;
			a->have_keep_last = true;
		} else if (!strcmp(argv[i], "--keep-every")) {
			dst = &a->keep_every;
		} else {
			dst = &a->age;
		}
		if (parse_u64(argv[i], v, dst))
			return 2;
		i++;
	}
	if (!a->uri) {
		fprintf(stderr, "dptrain: 'ckpt %s' needs a URI\n\n", c->name);
		usage_command(stderr, c);
		return 2;
	}
	/* Keeping the 0 newest steps would delete every committed step, the
	 * one a requeued job resumes from included: no one means that. */
	if (a->have_keep_last && a->keep_last == 0) {
		fprintf(stderr,
			"dptrain: --keep-last 0 would delete every committed "
			"step: give K >= 1, or leave --keep-last out to keep "
			"every committed step\n");
		return 2;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct dpt__storage *s = NULL;
	const struct command *c;
	struct ckpt_args a;
	int rc;

	dpt__log_set_ident("dptrain");
	if (argc >= 2 && is_help(argv[1])) {
		usage(stdout);
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "--version")) {
		printf("dptrain %s\n", dpt_version());
		return 0;
	}
	if (argc >= 2 && !strcmp(argv[1], "status"))
		return status_command(argc - 2, argv + 2);
	if (argc >= 2 && !strcmp(argv[1], "plot"))
		return plot_command(argc - 2, argv + 2);
	if (argc < 2 || strcmp(argv[1], "ckpt")) {
		if (argc >= 2)
			fprintf(stderr, "dptrain: unknown command '%s'\n",
				argv[1]);
		usage(stderr);
		return 2;
	}
	if (argc < 3 || is_help(argv[2])) {
		usage(argc < 3 ? stderr : stdout);
		return argc < 3 ? 2 : 0;
	}
	c = find_command(argv[2]);
	if (!c) {
		fprintf(stderr, "dptrain: unknown command 'ckpt %s'\n",
			argv[2]);
		usage(stderr);
		return 2;
	}
	for (int i = 3; i < argc; i++) {
		if (is_help(argv[i])) {
			usage_command(stdout, c);
			return 0;
		}
	}
	rc = ckpt_args(argc, argv, c, &a);
	if (rc)
		return rc;
	rc = open_root(a.uri, &s);
	if (rc)
		return 1;
	if (!strcmp(c->name, "ls")) {
		rc = cmd_ls(s);
	} else if (!strcmp(c->name, "show")) {
		rc = a.have_step ? 0 : newest(s, &a.step);
		if (!rc)
			rc = cmd_show(s, a.step);
	} else if (!strcmp(c->name, "verify")) {
		rc = cmd_verify(s, a.step, !a.have_step);
	} else {
		size_t deleted = 0;
		int k = !a.have_keep_last	? INT_MAX
			: a.keep_last > INT_MAX ? INT_MAX
						: (int)a.keep_last;
		rc = dpt__ckpt_retain(s, k, a.keep_every, (long)a.age, false,
				      &deleted);
		printf("%zu step(s) deleted\n", deleted);
	}
	dpt__storage_destroy(&s);
	return rc ? 1 : 0;
}

/*
 * The coordinator's options: see options.h.
 */
#include "config.h"

#include <getopt.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "assertion.h"
#include "log.h"
#include "options.h"
#include "parse.h"
#include "setting_names.h"
#include "wire.h"

/*
 * The coordinator's options, in the order of its --help: each a setting
 * (common/settings.def, whose flag names the option, which srun's plugin
 * passes, and whose COORD column gives its argument, kind, field,
 * bounds, default and help) and its environment variable. NULL is the
 * setting's own, which the tasks get too; a name here is the
 * coordinator's alone, where the tasks' variable means something else or
 * there is none. Both are the coordinator's, not the rows': the order in
 * which --help lists them, and the variables it reads.
 */
/* clang-format off */
#define COORD_OPTIONS(X)                                                      \
	X(WORLD, WORLD_SIZE, "DPTRAIN_WORLD_SIZE")                            \
	X(BIND, BIND, "DPTRAIN_BIND")                                         \
	X(ADVERTISE, ADVERTISE, "DPTRAIN_ADVERTISE")                          \
	X(SECRET_FILE, SECRET_FILE, "DPTRAIN_SECRET_FILE")                    \
	X(ENDPOINT_FILE, ENDPOINT_FILE, "DPTRAIN_ENDPOINT_FILE")              \
	X(PARENT, PARENT_PID, "DPTRAIN_PARENT_PID")                           \
	X(HEARTBEAT, HEARTBEAT_MS, "DPTRAIN_HEARTBEAT_MS")                    \
	X(TIMEOUT, TIMEOUT_MS, "DPTRAIN_TIMEOUT_MS")                          \
	X(MIN, MIN_WORKERS, NULL)                                             \
	X(JOIN_TIMEOUT, JOIN_TIMEOUT_MS, "DPTRAIN_JOIN_TIMEOUT_MS")           \
	X(IO_THREADS, IO_THREADS, "DPTRAIN_IO_THREADS")                       \
	X(JOB_ID, JOB_ID, "DPTRAIN_JOB_ID")                                   \
	X(STEP_ID, STEP_ID, "DPTRAIN_STEP_ID")                                \
	X(END_TIME, END_TIME, "DPTRAIN_END_TIME")                             \
	X(GRACE, GRACE, NULL)                                                 \
	X(REQUEUE, REQUEUE, NULL)                                             \
	X(MAX_REQUEUES, MAX_REQUEUES, NULL)                                   \
	X(NODES, NODES, "DPTRAIN_NODES")                                      \
	X(SHAPES, SHAPES, "DPTRAIN_SHAPES")                                   \
	X(GLOBAL_BATCH, GLOBAL_BATCH, "DPTRAIN_GLOBAL_BATCH")                 \
	X(SCALING, SCALING_EFFICIENCY, "DPTRAIN_SCALING_EFFICIENCY")          \
	X(GROW_CHECK, GROW_CHECK, "DPTRAIN_GROW_CHECK")                       \
	X(GROW_MARGIN, GROW_MARGIN, "DPTRAIN_GROW_MARGIN")                    \
	X(MIN_SHAPE_INTERVAL, MIN_SHAPE_INTERVAL, "DPTRAIN_MIN_SHAPE_INTERVAL") \
	X(MAX_SHAPE_CHANGES, MAX_SHAPE_CHANGES, "DPTRAIN_MAX_SHAPE_CHANGES")  \
	X(RESTART_COUNT, RESTART_COUNT, "SLURM_RESTART_COUNT")                \
	X(CKPT_EVERY, CKPT_EVERY, NULL)                                       \
	X(METRICS, METRICS, "DPTRAIN_METRICS")                                \
	X(LOG, LOG_LEVEL, NULL)
/* clang-format on */

enum {
#define X(id, setting, env) OPT_##id,
	COORD_OPTIONS(X)
#undef X
		OPT_COUNT,
	OPT_HELP = OPT_COUNT,
	OPT_VERSION,
};

/* How a value is read (the rows' kinds that the coordinator takes). */
enum kind {
	K_NONE,	    /* no option of the coordinator */
	K_LONG,	    /* a number from MIN to MAX */
	K_STRING,   /* any string */
	K_DURATION, /* a duration, in seconds */
	K_REQUEUE,  /* auto or off: true for auto */
	K_RANGE,    /* a node count or MIN-MAX, from MIN to MAX: two longs */
	K_EVERY,    /* auto, a duration or Nsteps: seconds, 0 for Nsteps */
	K_PORT,	    /* off (-1) or a port from MIN to MAX (0: any free one) */
	K_LEVEL,    /* a log level */
	K_SHAPES,   /* a list of shapes: struct dpt__shapes */
};

/* Every setting's COORD column: its argument, kind, field of struct
 * options, bounds, default, the words of --help instead of a default
 * (where it has none), and its help. */
static const struct coord_option {
	const char *arg;
	enum kind kind;
	size_t offset;
	long min, max;
	const char *def, *note, *help;
} rows[DPT_SET_COUNT] = {
#define COORD(arg, kind, field, min, max, def, note, help)                     \
	{                                                                      \
		arg, kind, offsetof(struct options, field), min, max, def,     \
			note, help                                             \
	}
#define NO_COORD                                                               \
	{                                                                      \
		NULL, K_NONE, 0, 0, 0, NULL, NULL, NULL                        \
	}
#define X(id, option, env, flag, srun, user, keys, coord)                      \
	[DPT_SET_##id] = coord,
	DPT_SETTINGS(X)
#include "settings_end.h"
};

/* The option's setting, by option. */
static const enum dpt__setting settings[OPT_COUNT] = {
#define X(id, setting, env) DPT_SET_##setting,
	COORD_OPTIONS(X)
#undef X
};

/* The coordinator's own variables, by option (NULL: the setting's). */
static const char *const envs[OPT_COUNT] = {
#define X(id, setting, env) env,
	COORD_OPTIONS(X)
#undef X
};

static const char *opt_name(int i)
{
	return dpt__setting_names[settings[i]].flag;
}

static const char *opt_env(int i)
{
	return envs[i] ? envs[i] : dpt__setting_names[settings[i]].env;
}

static const struct coord_option *opt(int i)
{
	return &rows[settings[i]];
}

/* WORDS from column INDENT on (where the caller stands), wrapped at 79
 * with continuation lines indented to INDENT. */
static void print_wrapped(FILE *f, const char *words, int indent)
{
	const char *p = words;
	int col = indent;

	while (*p) {
		size_t n = strcspn(p, " ");

		if (col > indent && col + 1 + (int)n > 79) {
			fprintf(f, "\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', f);
			col++;
		}
		fprintf(f, "%.*s", (int)n, p);
		col += (int)n;
		p += n;
		p += strspn(p, " ");
	}
	fputc('\n', f);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " --world-size N [options]\n\n"
		   "The rendezvous and liveness service of one dptrain job "
		   "step (doc/protocol.md).\n"
		   "Each option can also be given in the environment variable "
		   "shown.\n\n");
	for (int i = 0; i < OPT_COUNT; i++) {
		char head[64], text[512];

		const struct coord_option *o = opt(i);

		snprintf(head, sizeof(head), "  --%s %s", opt_name(i), o->arg);
		if (o->def)
			snprintf(text, sizeof(text), "%s (%s; default %s)",
				 o->help, opt_env(i), o->def);
		else
			snprintf(text, sizeof(text), "%s (%s%s%s)", o->help,
				 opt_env(i), o->note[0] ? "; " : "", o->note);
		/* A long head puts the text on the next line. */
		if (fprintf(f, "%-25s", head) > 25)
			fprintf(f, "\n%25s", "");
		print_wrapped(f, text, 25);
	}
	fprintf(f, "  --help, --version\n\n"
		   "The endpoint is printed on standard output once bound. "
		   "Exit status: 0 when\n"
		   "every worker left cleanly, 1 when the job failed, 2 for a "
		   "usage error.\n");
}

/* Each CURVE handshake costs the coordinator about 0.3 ms of elliptic
 * curve arithmetic, done by ZeroMQ's I/O threads: with one, thousands of
 * workers joining at once queue behind a single core (doc/PERFORMANCE.md,
 * "Rendezvous"). Connections are spread over the threads. */
static long default_io_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 4 ? 4 : n;
}

/* Each option's value into VAL, and the name that messages give it into
 * NAME (its variable, or the option as written, in OPTNAME): command-line
 * options override the environment. --help and --version exit. */
static int read_options(int argc, char **argv, const char *val[OPT_COUNT],
			const char *name[OPT_COUNT],
			char optname[OPT_COUNT][24])
{
	struct option longopts[OPT_VERSION + 2] = {
		[OPT_HELP] = {"help", no_argument, NULL, OPT_HELP},
		[OPT_VERSION] = {"version", no_argument, NULL, OPT_VERSION},
	};
	int c;

	for (int i = 0; i < OPT_COUNT; i++) {
		/* Its row has a flag and a COORD column. */
		DPT_ASSERT(opt_name(i) && opt(i)->kind != K_NONE);
		longopts[i] = (struct option){opt_name(i), required_argument,
					      NULL, i};
		val[i] = getenv(opt_env(i));
		name[i] = opt_env(i);
		if (val[i] && !val[i][0])
			val[i] = NULL;
	}
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == OPT_HELP) {
			usage(stdout);
			exit(0);
		}
		if (c == OPT_VERSION) {
			printf(PROG " %s (protocol %d)\n", PACKAGE_VERSION,
			       DPT_WIRE_VERSION);
			exit(0);
		}
		if (c < 0 || c >= OPT_COUNT) {
			fprintf(stderr,
				PROG ": unknown or incomplete option '%s' "
				     "(see --help)\n",
				argv[optind - 1]);
			return DPT_EINVAL;
		}
		val[c] = optarg;
		/* Messages name the option as the user wrote it. */
		snprintf(optname[c], sizeof(optname[0]), "--%s", opt_name(c));
		name[c] = optname[c];
	}
	if (optind < argc) {
		fprintf(stderr,
			PROG ": unexpected argument '%s' (see --help)\n",
			argv[optind]);
		return DPT_EINVAL;
	}
	return 0;
}

/* What a bad value of each kind is told to be: WHAT, or its bounds
 * between BEFORE and AFTER, separated by SEP. */
static const struct {
	const char *what, *before, *sep, *after;
} wants[] = {
	[K_LONG] = {NULL, "a number in [", ", ", "]"},
	[K_DURATION] = {"a duration (minutes, MM:SS, HH:MM:SS, "
			"D-HH[:MM[:SS]], or with a unit: 30s, 10m, 2h, 1d)"},
	[K_REQUEUE] = {"auto or off"},
	[K_RANGE] = {NULL, "a node count or a range MIN-MAX (", " to ", ")"},
	[K_EVERY] = {"auto, a duration or Nsteps"},
	[K_PORT] = {NULL, "a port (", " to ", ", 0: any free one) or off"},
	[K_LEVEL] = {"one of error, warn, info, debug"},
	[K_SHAPES] = {"a list of shapes: " DPT_SHAPE_FORMS},
};

/* VALUE into FIELD, by C's kind; 0 or DPT_EINVAL. */
static int parse_value(const struct coord_option *c, const char *value,
		       void *field)
{
	enum dpt__log_level level;

	switch (c->kind) {
	case K_LONG:
		return dpt__parse_long(value, c->min, c->max, field);
	case K_STRING:
		*(const char **)field = value;
		return 0;
	case K_DURATION:
		return dpt__parse_duration(value, field);
	case K_REQUEUE:
		*(bool *)field = !strcmp(value, "auto");
		return strcmp(value, "auto") && strcmp(value, "off")
			       ? DPT_EINVAL
			       : 0;
	case K_RANGE:
		return dpt__parse_range(value, c->min, c->max, field,
					(long *)field + 1);
	case K_EVERY:
		return dpt__parse_ckpt_every(value, field, NULL);
	case K_PORT:
		if (strcmp(value, "off") == 0) {
			*(long *)field = -1;
			return 0;
		}
		return dpt__parse_long(value, c->min, c->max, field);
	case K_LEVEL:
		if (dpt__log_parse_level(value, &level))
			return DPT_EINVAL;
		*(long *)field = level;
		return 0;
	case K_SHAPES: {
		char why[256];

		return dpt__shapes_parse(value, field, why, sizeof(why));
	}
	case K_NONE:
		break;
	}
	DPT_ASSERT(!"an option without its row's COORD column");
	return DPT_EINVAL;
}

/* VALUE of option I (named NAME in messages) into its field of O; 0, or
 * DPT_EINVAL after a message that says what it must be. */
static int set_value(int i, const char *value, const char *name,
		     struct options *o)
{
	const struct coord_option *c = opt(i);

	if (parse_value(c, value, (char *)o + c->offset) == 0)
		return 0;
	if (wants[c->kind].what)
		fprintf(stderr, PROG ": %s: '%s' is not %s\n", name, value,
			wants[c->kind].what);
	else
		fprintf(stderr, PROG ": %s: '%s' is not %s%ld%s%ld%s\n", name,
			value, wants[c->kind].before, c->min,
			wants[c->kind].sep, c->max, wants[c->kind].after);
	return DPT_EINVAL;
}

/* The values VAL (named NAME in messages) into O, over the defaults of
 * the rows (what they say is their default) and the values that are no
 * option's. */
static int convert(const char *const val[OPT_COUNT],
		   const char *const name[OPT_COUNT], struct options *o)
{
	int rc = 0;

	*o = (struct options){
		.io_threads = default_io_threads(),
		.max_requeues = -1, /* no limit */
		.step_id = -1,	    /* none */
	};
	for (int i = 0; i < OPT_COUNT && !rc; i++)
		if (opt(i)->def)
			rc = set_value(i, opt(i)->def, "default", o);
	DPT_ASSERT(rc == 0); /* a row's default its kind refuses */
	if (!val[OPT_WORLD]) {
		fprintf(stderr,
			PROG ": --world-size is required (see --help)\n");
		return DPT_EINVAL;
	}
	for (int i = 0; i < OPT_COUNT && !rc; i++)
		if (val[i])
			rc = set_value(i, val[i], name[i], o);
	if (!rc)
		dpt__log_set_level((enum dpt__log_level)o->log_level);
	return rc;
}

/* What one option says of another. */
static int check_together(const struct options *o)
{
	if (o->timeout_ms <= o->heartbeat_ms) {
		fprintf(stderr,
			PROG ": --timeout-ms (%ld) must be longer than "
			     "--heartbeat-ms (%ld)\n",
			o->timeout_ms, o->heartbeat_ms);
		return DPT_EINVAL;
	}
	if (o->job_id && o->end_time) {
		fprintf(stderr, PROG ": --job-id and --end-time exclude each "
				     "other\n");
		return DPT_EINVAL;
	}
	if (o->step_id >= 0 && !o->job_id) {
		fprintf(stderr, PROG ": --step-id needs the job (--job-id)\n");
		return DPT_EINVAL;
	}
	if (o->requeue && !o->job_id) {
		fprintf(stderr,
			PROG ": --requeue auto needs the job to requeue "
			     "(--job-id)\n");
		return DPT_EINVAL;
	}
	if (o->min_workers > o->world_size) {
		fprintf(stderr,
			PROG ": --min-workers (%ld) is larger than "
			     "--world-size (%ld)\n",
			o->min_workers, o->world_size);
		return DPT_EINVAL;
	}
	return 0;
}

int dpt__coord_parse_options(int argc, char **argv, struct options *o)
{
	const char *val[OPT_COUNT] = {NULL}, *name[OPT_COUNT];
	char optname[OPT_COUNT][24]; /* "--world-size" */
	int rc = read_options(argc, argv, val, name, optname);

	if (!rc)
		rc = convert(val, name, o);
	return rc ? rc : check_together(o);
}

int dpt__coord_load_secret(const struct options *o,
			   char secret[DPT_SECRET_HEX_LEN + 1])
{
	const char *env = getenv("DPTRAIN_SECRET");
	struct stat st;
	int rc;

	if (o->secret_file) {
		rc = dpt__wire_read_secret_file(o->secret_file, secret);
		if (rc)
			return rc;
		if (stat(o->secret_file, &st) == 0 && (st.st_mode & 077))
			dpt__warn("secret file '%s' can be read by other "
				  "users: chmod 600 it",
				  o->secret_file);
		return 0;
	}
	if (!env) {
		dpt__error("no secret: set DPTRAIN_SECRET or use "
			   "--secret-file");
		return DPT_EINVAL;
	}
	if (strlen(env) != DPT_SECRET_HEX_LEN) {
		dpt__error("DPTRAIN_SECRET must be 64 hex characters");
		return DPT_EINVAL;
	}
	memcpy(secret, env, DPT_SECRET_HEX_LEN + 1);
	return 0;
}

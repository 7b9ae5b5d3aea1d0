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

#include "log.h"
#include "options.h"
#include "parse.h"
#include "setting_names.h"
#include "wire.h"

/*
 * Every option, once: its setting in common/setting_names.h (whose flag is
 * the option's name, which srun's plugin passes), its environment variable
 * (NULL: the setting's, which the tasks get too), its argument, what it
 * does and its default, for getopt, the environment and --help.
 */
/* clang-format off */
#define COORD_OPTIONS(X)                                                      \
	X(WORLD, WORLD_SIZE, "DPTRAIN_WORLD_SIZE", "N",                     \
	  "workers in generation 1", "required")                              \
	X(BIND, BIND, "DPTRAIN_BIND", "ENDPOINT",                           \
	  "where to listen: tcp://ADDRESS:PORT or tcp://INTERFACE:PORT",      \
	  "default tcp://0.0.0.0:*")                                          \
	X(ADVERTISE, ADVERTISE, "DPTRAIN_ADVERTISE", "HOST",                \
	  "host name or address workers connect to",                          \
	  "default: this host's address")                                     \
	X(SECRET_FILE, SECRET_FILE, "DPTRAIN_SECRET_FILE", "FILE",          \
	  "file holding the step secret, 64 hex characters",                  \
	  "else DPTRAIN_SECRET holds it")                                     \
	X(ENDPOINT_FILE, ENDPOINT_FILE, "DPTRAIN_ENDPOINT_FILE", "FILE",    \
	  "write the endpoint there once listening", "")                      \
	X(PARENT, PARENT_PID, "DPTRAIN_PARENT_PID", "PID",                  \
	  "exit when PID exits", "")                                          \
	X(HEARTBEAT, HEARTBEAT_MS, "DPTRAIN_HEARTBEAT_MS", "MS",            \
	  "heartbeat interval", "default 500")                                \
	X(TIMEOUT, TIMEOUT_MS, "DPTRAIN_TIMEOUT_MS", "MS",                  \
	  "silence that evicts a worker", "default 2000")                     \
	X(MIN, MIN_WORKERS, NULL, "N",                     \
	  "smallest generation allowed", "default 1")                         \
	X(JOIN_TIMEOUT, JOIN_TIMEOUT_MS, "DPTRAIN_JOIN_TIMEOUT_MS", "MS",   \
	  "longest wait for (re-)joins, 0 for none", "default 300000")        \
	X(IO_THREADS, IO_THREADS, "DPTRAIN_IO_THREADS", "N",                \
	  "threads for connections and CURVE handshakes",                     \
	  "default: the CPUs, at most 4")                                     \
	X(JOB_ID, JOB_ID, "DPTRAIN_JOB_ID", "ID",                           \
	  "the Slurm job whose end time stops the step, and which is "        \
	  "requeued", "")                                                     \
	X(STEP_ID, STEP_ID, "DPTRAIN_STEP_ID", "ID",                        \
	  "the step of that job: ended when the coordinator gives up on "    \
	  "the job and a task still runs 30 s later", "")                    \
	X(END_TIME, END_TIME, "DPTRAIN_END_TIME", "EPOCH",                  \
	  "a fixed end time instead, in seconds since the epoch", "")         \
	X(GRACE, GRACE, NULL, "DURATION",                        \
	  "stop the step this long before the end time", "default 10m")       \
	X(REQUEUE, REQUEUE, NULL, "auto|off",                  \
	  "requeue the job (--job-id) after a stopped step ended cleanly",    \
	  "default off")                                                      \
	X(MAX_REQUEUES, MAX_REQUEUES, NULL, "N",          \
	  "not when the job was requeued N times already",                    \
	  "default: no limit")                                                \
	X(NODES, NODES, "DPTRAIN_NODES", "MIN[-MAX]",                       \
	  "after a requeue, give the job this node range back (and "         \
	  "MIN x its tasks per node as its task count)",                      \
	  "default: Slurm's pinned count")                                    \
	X(RESTART_COUNT, RESTART_COUNT, "SLURM_RESTART_COUNT", "N",         \
	  "the job's requeues so far", "default 0")                           \
	X(CKPT_EVERY, CKPT_EVERY, NULL,                     \
	  "auto|DURATION|Nsteps",                                             \
	  "tell the workers a checkpoint is due this often; auto: every 30m " \
	  "at most, the workers ask sooner from the save's cost and the "     \
	  "MTBF; Nsteps is the workers' own count", "default: never")         \
	X(METRICS, METRICS, "DPTRAIN_METRICS", "PORT|off",                  \
	  "serve Prometheus metrics at http://HOST:PORT/metrics, HOST the "  \
	  "bind address's; 0: any free port, written to the log and the "    \
	  "status file", "default off")                                       \
	X(LOG, LOG_LEVEL, NULL, "LEVEL",                     \
	  "error, warn, info or debug", "default info")
/* clang-format on */

enum {
#define X(id, setting, env, arg, help, def) OPT_##id,
	COORD_OPTIONS(X)
#undef X
		OPT_COUNT,
	OPT_HELP = OPT_COUNT,
	OPT_VERSION,
};

static const struct {
	enum dpt__setting setting;
	const char *env, *arg, *help, *def;
} options[OPT_COUNT] = {
#define X(id, setting, env, arg, help, def)                                    \
	{DPT_SET_##setting, env, arg, help, def},
	COORD_OPTIONS(X)
#undef X
};

static const char *opt_name(int i)
{
	return dpt__setting_names[options[i].setting].flag;
}

static const char *opt_env(int i)
{
	return options[i].env ? options[i].env
			      : dpt__setting_names[options[i].setting].env;
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

		snprintf(head, sizeof(head), "  --%s %s", opt_name(i),
			 options[i].arg);
		snprintf(text, sizeof(text), "%s (%s%s%s)", options[i].help,
			 opt_env(i), options[i].def[0] ? "; " : "",
			 options[i].def);
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

static int number(const char *opt, const char *s, long min, long max, long *out)
{
	int rc = dpt__parse_long(s, min, max, out);
	if (rc)
		fprintf(stderr,
			PROG ": %s: '%s' is not a number in [%ld, %ld]\n", opt,
			s, min, max);
	return rc;
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

/* The options that are numbers: their bounds and their field. */
static const struct number_option {
	int opt;
	long min, max;
	size_t offset;
} numbers[] = {
	{OPT_WORLD, 1, DPT_WIRE_WORLD_MAX,
	 offsetof(struct options, world_size)},
	{OPT_PARENT, 1, INT_MAX, offsetof(struct options, parent_pid)},
	{OPT_HEARTBEAT, 10, 60000, offsetof(struct options, heartbeat_ms)},
	{OPT_TIMEOUT, 20, 3600000, offsetof(struct options, timeout_ms)},
	{OPT_MIN, 1, DPT_WIRE_WORLD_MAX, offsetof(struct options, min_workers)},
	{OPT_JOIN_TIMEOUT, 0, INT32_MAX,
	 offsetof(struct options, join_timeout_ms)},
	{OPT_IO_THREADS, 1, 64, offsetof(struct options, io_threads)},
	{OPT_JOB_ID, 1, UINT32_MAX - 1, offsetof(struct options, job_id)},
	{OPT_STEP_ID, 0, UINT32_MAX - 1, offsetof(struct options, step_id)},
	{OPT_END_TIME, 1, LONG_MAX, offsetof(struct options, end_time)},
	{OPT_MAX_REQUEUES, 0, 65535, offsetof(struct options, max_requeues)},
	{OPT_RESTART_COUNT, 0, INT_MAX,
	 offsetof(struct options, restart_count)},
};

/* The values VAL (named NAME in messages) into O, over the defaults. */
static int convert(const char *const val[OPT_COUNT],
		   const char *const name[OPT_COUNT], struct options *o)
{
	enum dpt__log_level level;
	int rc = 0;

#define V(opt) val[opt]
#define N(opt) name[opt]
	*o = (struct options){
		.bind = V(OPT_BIND) ? V(OPT_BIND) : "tcp://0.0.0.0:*",
		.advertise = V(OPT_ADVERTISE),
		.secret_file = V(OPT_SECRET_FILE),
		.endpoint_file = V(OPT_ENDPOINT_FILE),
		.parent_pid = 0,
		.heartbeat_ms = 500,
		.timeout_ms = 2000,
		.min_workers = 1,
		.join_timeout_ms = 300000,
		.io_threads = default_io_threads(),
		.grace = 600,
		.max_requeues = -1,
		.metrics_port = -1,
		.step_id = -1,
	};
	if (!V(OPT_WORLD)) {
		fprintf(stderr,
			PROG ": --world-size is required (see --help)\n");
		return DPT_EINVAL;
	}
	for (size_t i = 0; i < sizeof(numbers) / sizeof(*numbers) && !rc; i++) {
		const struct number_option *n = &numbers[i];

		if (V(n->opt))
			rc = number(N(n->opt), V(n->opt), n->min, n->max,
				    (long *)((char *)o + n->offset));
	}
	if (!rc && V(OPT_GRACE) &&
	    (rc = dpt__parse_duration(V(OPT_GRACE), &o->grace)) != 0)
		fprintf(stderr,
			PROG ": %s: '%s' is not a duration (minutes, MM:SS, "
			     "HH:MM:SS, D-HH[:MM[:SS]], or with a unit: 30s, "
			     "10m, 2h, 1d)\n",
			N(OPT_GRACE), V(OPT_GRACE));
	if (!rc && V(OPT_REQUEUE)) {
		if (strcmp(V(OPT_REQUEUE), "auto") &&
		    strcmp(V(OPT_REQUEUE), "off")) {
			fprintf(stderr, PROG ": %s: '%s' is not auto or off\n",
				N(OPT_REQUEUE), V(OPT_REQUEUE));
			rc = DPT_EINVAL;
		}
		o->requeue = !strcmp(V(OPT_REQUEUE), "auto");
	}
	if (!rc && V(OPT_NODES) &&
	    (rc = dpt__parse_range(V(OPT_NODES), 1, DPT_MAX_NODES,
				   &o->nodes_min, &o->nodes_max)) != 0)
		fprintf(stderr,
			PROG ": %s: '%s' is not a node count or a range "
			     "MIN-MAX (1 to %d)\n",
			N(OPT_NODES), V(OPT_NODES), DPT_MAX_NODES);
	if (!rc && V(OPT_CKPT_EVERY)) {
		rc = dpt__parse_ckpt_every(V(OPT_CKPT_EVERY), &o->ckpt_every,
					   NULL);
		if (rc)
			fprintf(stderr,
				PROG ": %s: '%s' is not auto, a duration or "
				     "Nsteps\n",
				N(OPT_CKPT_EVERY), V(OPT_CKPT_EVERY));
	}
	if (!rc && V(OPT_METRICS) && strcmp(V(OPT_METRICS), "off") &&
	    dpt__parse_long(V(OPT_METRICS), 0, 65535, &o->metrics_port)) {
		fprintf(stderr,
			PROG ": %s: '%s' is not a port (0 to 65535, 0: any "
			     "free one) or off\n",
			N(OPT_METRICS), V(OPT_METRICS));
		rc = DPT_EINVAL;
	}
	if (!rc && V(OPT_LOG)) {
		rc = dpt__log_parse_level(V(OPT_LOG), &level);
		if (rc)
			fprintf(stderr,
				PROG ": %s: '%s' is not one of error, warn, "
				     "info, debug\n",
				N(OPT_LOG), V(OPT_LOG));
		else
			dpt__log_set_level(level);
	}
#undef V
#undef N
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

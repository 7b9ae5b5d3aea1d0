/*
 * The coordinator's options: see options.h.
 */
#include "config.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "log.h"
#include "options.h"
#include "parse.h"
#include "wire.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " --world-size N [options]\n"
		"\n"
		"The rendezvous and liveness service of one dptrain job step "
		"(doc/protocol.md).\n"
		"Each option can also be given in the environment variable "
		"shown.\n"
		"\n"
		"  --world-size N         workers in generation 1 "
		"(DPTRAIN_WORLD_SIZE)\n"
		"  --bind ENDPOINT        where to listen (DPTRAIN_BIND; "
		"default tcp://0.0.0.0:*)\n"
		"  --advertise HOST       host name or address workers "
		"connect to\n"
		"                         (DPTRAIN_ADVERTISE; default: this "
		"host's address)\n"
		"  --secret-file FILE     file holding the step secret, 64 "
		"hex characters\n"
		"                         (DPTRAIN_SECRET_FILE; else "
		"DPTRAIN_SECRET holds it)\n"
		"  --endpoint-file FILE   write the endpoint there once "
		"listening (DPTRAIN_ENDPOINT_FILE)\n"
		"  --parent-pid PID       exit when PID exits "
		"(DPTRAIN_PARENT_PID)\n"
		"  --heartbeat-ms MS      heartbeat interval "
		"(DPTRAIN_HEARTBEAT_MS; default 500)\n"
		"  --timeout-ms MS        silence that evicts a worker "
		"(DPTRAIN_TIMEOUT_MS; default 2000)\n"
		"  --min-workers N        smallest generation allowed "
		"(DPTRAIN_MIN_WORKERS; default 1)\n"
		"  --join-timeout-ms MS   longest wait for (re-)joins, 0 for "
		"none\n"
		"                         (DPTRAIN_JOIN_TIMEOUT_MS; default "
		"300000)\n"
		"  --io-threads N         threads for connections and CURVE "
		"handshakes\n"
		"                         (DPTRAIN_IO_THREADS; default: the "
		"CPUs, at most 4)\n"
		"  --job-id ID            the Slurm job whose end time stops "
		"the step\n"
		"                         (DPTRAIN_JOB_ID; doc/walltime.md)\n"
		"  --end-time EPOCH       a fixed end time instead, in seconds "
		"since the epoch\n"
		"                         (DPTRAIN_END_TIME)\n"
		"  --grace DURATION       stop the step this long before the "
		"end time\n"
		"                         (DPTRAIN_GRACE; default 10m)\n"
		"  --requeue auto|off     requeue the job (--job-id) after a "
		"stopped step ended\n"
		"                         cleanly (DPTRAIN_REQUEUE; default "
		"off)\n"
		"  --max-requeues N       not when the job was requeued N "
		"times already\n"
		"                         (DPTRAIN_MAX_REQUEUES; default: no "
		"limit)\n"
		"  --restart-count N      the job's requeues so far "
		"(SLURM_RESTART_COUNT; default 0)\n"
		"  --ckpt-every auto|DURATION|Nsteps\n"
		"                         tell the workers a checkpoint is due "
		"this often\n"
		"                         (DPTRAIN_CKPT_EVERY; auto: every 30m "
		"at most, the\n"
		"                         workers ask sooner from the save's "
		"cost and the\n"
		"                         MTBF; Nsteps is the workers' own "
		"count; default:\n"
		"                         never)\n"
		"  --log-level LEVEL      error, warn, info or debug "
		"(DPTRAIN_LOG_LEVEL; default info)\n"
		"  --help, --version\n"
		"\n"
		"The endpoint is printed on standard output once bound. Exit "
		"status: 0 when\n"
		"every worker left cleanly, 1 when the job failed, 2 for a "
		"usage error.\n");
}

static int number(const char *opt, const char *s, long min, long max,
		  long *out)
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

/* Command-line options override the environment, which overrides the
 * defaults. */
int dpt__coord_parse_options(int argc, char **argv, struct options *o)
{
	enum {
		OPT_WORLD = 256,
		OPT_BIND,
		OPT_ADVERTISE,
		OPT_SECRET_FILE,
		OPT_ENDPOINT_FILE,
		OPT_PARENT,
		OPT_HEARTBEAT,
		OPT_TIMEOUT,
		OPT_MIN,
		OPT_JOIN_TIMEOUT,
		OPT_IO_THREADS,
		OPT_JOB_ID,
		OPT_END_TIME,
		OPT_GRACE,
		OPT_REQUEUE,
		OPT_MAX_REQUEUES,
		OPT_RESTART_COUNT,
		OPT_CKPT_EVERY,
		OPT_LOG,
		OPT_HELP,
		OPT_VERSION,
	};
	static const struct option longopts[] = {
		{"world-size", required_argument, NULL, OPT_WORLD},
		{"bind", required_argument, NULL, OPT_BIND},
		{"advertise", required_argument, NULL, OPT_ADVERTISE},
		{"secret-file", required_argument, NULL, OPT_SECRET_FILE},
		{"endpoint-file", required_argument, NULL, OPT_ENDPOINT_FILE},
		{"parent-pid", required_argument, NULL, OPT_PARENT},
		{"heartbeat-ms", required_argument, NULL, OPT_HEARTBEAT},
		{"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
		{"min-workers", required_argument, NULL, OPT_MIN},
		{"join-timeout-ms", required_argument, NULL, OPT_JOIN_TIMEOUT},
		{"io-threads", required_argument, NULL, OPT_IO_THREADS},
		{"job-id", required_argument, NULL, OPT_JOB_ID},
		{"end-time", required_argument, NULL, OPT_END_TIME},
		{"grace", required_argument, NULL, OPT_GRACE},
		{"requeue", required_argument, NULL, OPT_REQUEUE},
		{"max-requeues", required_argument, NULL, OPT_MAX_REQUEUES},
		{"restart-count", required_argument, NULL, OPT_RESTART_COUNT},
		{"ckpt-every", required_argument, NULL, OPT_CKPT_EVERY},
		{"log-level", required_argument, NULL, OPT_LOG},
		{"help", no_argument, NULL, OPT_HELP},
		{"version", no_argument, NULL, OPT_VERSION},
		{NULL, 0, NULL, 0},
	};
	/* Each option's environment variable, in the order of the enum. */
	static const char *const env_names[] = {
		"DPTRAIN_WORLD_SIZE",	  "DPTRAIN_BIND",
		"DPTRAIN_ADVERTISE",	  "DPTRAIN_SECRET_FILE",
		"DPTRAIN_ENDPOINT_FILE",  "DPTRAIN_PARENT_PID",
		"DPTRAIN_HEARTBEAT_MS",	  "DPTRAIN_TIMEOUT_MS",
		"DPTRAIN_MIN_WORKERS",	  "DPTRAIN_JOIN_TIMEOUT_MS",
		"DPTRAIN_IO_THREADS",	  "DPTRAIN_JOB_ID",
		"DPTRAIN_END_TIME",	  "DPTRAIN_GRACE",
		"DPTRAIN_REQUEUE",	  "DPTRAIN_MAX_REQUEUES",
		"SLURM_RESTART_COUNT",	  "DPTRAIN_CKPT_EVERY",
		"DPTRAIN_LOG_LEVEL",
	};
	const char *val[OPT_LOG - OPT_WORLD + 1] = {NULL};
	const char *name[OPT_LOG - OPT_WORLD + 1];
	char optname[OPT_LOG - OPT_WORLD + 1][24]; /* "--world-size" */
	enum dpt__log_level level;
	int c, rc = 0;

	for (int i = 0; i <= OPT_LOG - OPT_WORLD; i++) {
		val[i] = getenv(env_names[i]);
		name[i] = env_names[i];
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
		if (c < OPT_WORLD || c > OPT_LOG) {
			fprintf(stderr,
				PROG ": unknown or incomplete option '%s' "
				     "(see --help)\n",
				argv[optind - 1]);
			return DPT_EINVAL;
		}
		val[c - OPT_WORLD] = optarg;
		/* Messages name the option as the user wrote it. */
		snprintf(optname[c - OPT_WORLD], sizeof(optname[0]), "--%s",
			 longopts[c - OPT_WORLD].name);
		name[c - OPT_WORLD] = optname[c - OPT_WORLD];
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s' (see --help)\n",
			argv[optind]);
		return DPT_EINVAL;
	}

#define V(opt) val[(opt) - OPT_WORLD]
#define N(opt) name[(opt) - OPT_WORLD]
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
	};
	if (!V(OPT_WORLD)) {
		fprintf(stderr, PROG ": --world-size is required (see --help)\n");
		return DPT_EINVAL;
	}
	rc = number(N(OPT_WORLD), V(OPT_WORLD), 1, DPT_WIRE_WORLD_MAX,
		    &o->world_size);
	if (!rc && V(OPT_PARENT))
		rc = number(N(OPT_PARENT), V(OPT_PARENT), 1, INT_MAX,
			    &o->parent_pid);
	if (!rc && V(OPT_HEARTBEAT))
		rc = number(N(OPT_HEARTBEAT), V(OPT_HEARTBEAT), 10, 60000,
			    &o->heartbeat_ms);
	if (!rc && V(OPT_TIMEOUT))
		rc = number(N(OPT_TIMEOUT), V(OPT_TIMEOUT), 20, 3600000,
			    &o->timeout_ms);
	if (!rc && V(OPT_MIN))
		rc = number(N(OPT_MIN), V(OPT_MIN), 1, DPT_WIRE_WORLD_MAX,
			    &o->min_workers);
	if (!rc && V(OPT_JOIN_TIMEOUT))
		rc = number(N(OPT_JOIN_TIMEOUT), V(OPT_JOIN_TIMEOUT), 0,
			    INT32_MAX, &o->join_timeout_ms);
	if (!rc && V(OPT_IO_THREADS))
		rc = number(N(OPT_IO_THREADS), V(OPT_IO_THREADS), 1, 64,
			    &o->io_threads);
	if (!rc && V(OPT_JOB_ID))
		rc = number(N(OPT_JOB_ID), V(OPT_JOB_ID), 1, UINT32_MAX - 1,
			    &o->job_id);
	if (!rc && V(OPT_END_TIME))
		rc = number(N(OPT_END_TIME), V(OPT_END_TIME), 1, LONG_MAX,
			    &o->end_time);
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
	if (!rc && V(OPT_MAX_REQUEUES))
		rc = number(N(OPT_MAX_REQUEUES), V(OPT_MAX_REQUEUES), 0, 65535,
			    &o->max_requeues);
	if (!rc && V(OPT_RESTART_COUNT))
		rc = number(N(OPT_RESTART_COUNT), V(OPT_RESTART_COUNT), 0,
			    INT_MAX, &o->restart_count);
	if (!rc && V(OPT_CKPT_EVERY)) {
		rc = dpt__parse_ckpt_every(V(OPT_CKPT_EVERY), &o->ckpt_every,
					   NULL);
		if (rc)
			fprintf(stderr,
				PROG ": %s: '%s' is not auto, a duration or "
				     "Nsteps\n",
				N(OPT_CKPT_EVERY), V(OPT_CKPT_EVERY));
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
	if (rc)
		return rc;
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
#undef V
#undef N
	return 0;
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

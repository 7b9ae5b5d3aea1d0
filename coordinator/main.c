/*
 * dptrain-coordinator: one per job step. Parses its options, binds one
 * CURVE-secured ROUTER socket, answers ZAP requests, and runs the event
 * loop that feeds the state machine of coordinator/coord.c.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include <dptrain/error.h>

#include "coord.h"
#include "log.h"
#include "parse.h"
#include "walltime.h"
#include "wire.h"

#define PROG "dptrain-coordinator"
#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define MONITOR_ENDPOINT "inproc://dptrain-coordinator-monitor"
#define ENDPOINT_MAX 512

struct options {
	long world_size;
	const char *bind;
	const char *advertise;
	const char *secret_file;
	const char *endpoint_file;
	long parent_pid;
	long heartbeat_ms;
	long timeout_ms;
	long min_workers;
	long join_timeout_ms;
	long io_threads;
	long job_id;
	long end_time;
	long grace;
	bool requeue;
	long max_requeues;  /* -1: no cap */
	long restart_count; /* the job's requeues so far */
	long ckpt_every; /* seconds; 0: no periodic SAVE */
};

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
		"                         (DPTRAIN_CKPT_EVERY; auto: 30m; Nsteps "
		"is the\n"
		"                         workers' own count; default: never)\n"
		"  --log-level LEVEL      error, warn, info or debug "
		"(DPTRAIN_LOG_LEVEL; default info)\n"
		"  --help, --version\n"
		"\n"
		"The endpoint is printed on standard output once bound. Exit "
		"status: 0 when\n"
		"every worker left cleanly, 1 when the job failed, 2 for a "
		"usage error.\n");
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------ options */

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
static int parse_options(int argc, char **argv, struct options *o)
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

static int load_secret(const struct options *o,
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

/* ------------------------------------------------------------ endpoint */

static bool is_wildcard(const char *host)
{
	return !strcmp(host, "*") || !strcmp(host, "0.0.0.0") ||
	       !strcmp(host, "[::]") || !strcmp(host, "::");
}

/* This host's address for workers to connect to when the bind address is
 * a wildcard: the host name's address unless it is a loopback one (Debian
 * maps the host name to 127.0.1.1), else the first non-loopback IPv4
 * interface, else loopback. An admin with several networks passes
 * --advertise. */
static void default_host(char *buf, size_t size)
{
	char name[256];
	struct addrinfo hints = {.ai_family = AF_INET,
				 .ai_socktype = SOCK_STREAM};
	struct addrinfo *res = NULL;
	struct ifaddrs *ifs = NULL;

	snprintf(buf, size, "127.0.0.1");
	if (gethostname(name, sizeof(name)) == 0 &&
	    getaddrinfo(name, NULL, &hints, &res) == 0) {
		for (struct addrinfo *a = res; a; a = a->ai_next) {
			struct sockaddr_in *in = (void *)a->ai_addr;
			if ((ntohl(in->sin_addr.s_addr) >> 24) == 127)
				continue;
			inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t)size);
			freeaddrinfo(res);
			return;
		}
		freeaddrinfo(res);
	}
	if (getifaddrs(&ifs) == 0) {
		for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
			struct sockaddr_in *in = (void *)i->ifa_addr;
			if (!in || in->sin_family != AF_INET ||
			    (ntohl(in->sin_addr.s_addr) >> 24) == 127)
				continue;
			inet_ntop(AF_INET, &in->sin_addr, buf, (socklen_t)size);
			break;
		}
		freeifaddrs(ifs);
	}
}

/* The endpoint workers use: the bound port with the advertised host. */
static int make_endpoint(void *router, const struct options *o, char *out,
			 size_t size)
{
	char last[ENDPOINT_MAX], host[256];
	const char *port, *h;
	size_t hlen;
	size_t len = sizeof(last);
	int n;

	if (zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, last, &len) != 0)
		return DPT_ESYS;
	last[sizeof(last) - 1] = '\0';
	port = strrchr(last, ':');
	h = strstr(last, "://");
	if (!port || !h)
		return DPT_EINVAL;
	h += 3;
	hlen = (size_t)(port - h);
	if (hlen >= sizeof(host))
		return DPT_EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	if (o->advertise)
		snprintf(host, sizeof(host), "%s", o->advertise);
	else if (is_wildcard(host))
		default_host(host, sizeof(host));
	/* A bare IPv6 address needs brackets in an endpoint. */
	n = snprintf(out, size,
		     strchr(host, ':') && host[0] != '[' ? "tcp://[%s]%s" :
							  "tcp://%s%s",
		     host, port);
	return n < 0 || (size_t)n >= size ? DPT_ETOOBIG : 0;
}

/* Write the endpoint so that a reader never sees half of it: a temporary
 * file in the same directory, renamed over the target. */
static int write_endpoint_file(const char *path, const char *endpoint)
{
	char tmp[PATH_MAX];
	int fd, n, rc = 0;

	n = snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return DPT_ETOOBIG;
	fd = mkstemp(tmp);
	if (fd < 0) {
		dpt__error("cannot create '%s': %s", tmp, strerror(errno));
		return DPT_EIO;
	}
	if (dprintf(fd, "%s\n", endpoint) < 0 || fsync(fd) != 0 ||
	    fchmod(fd, 0644) != 0) {
		dpt__error("cannot write '%s': %s", tmp, strerror(errno));
		rc = DPT_EIO;
	}
	close(fd);
	if (!rc && rename(tmp, path) != 0) {
		dpt__error("cannot rename '%s' to '%s': %s", tmp, path,
			   strerror(errno));
		rc = DPT_EIO;
	}
	if (rc)
		unlink(tmp);
	return rc;
}

/* ------------------------------------------------------------ ZAP */

/*
 * One ZAP request (RFC 27): accept the CURVE client key derived from the
 * step secret, refuse anything else. A reply is always sent, or the
 * handshake would hang until ZMQ_HANDSHAKE_IVL.
 */
static void zap_handle(void *zap, const uint8_t *worker_key, int64_t now)
{
	static int64_t window;
	static long refused;
	zmq_msg_t frames[8];
	int n = 0, more = 1;
	bool ok;
	char addr[64] = "?";

	while (more && n < 8) {
		zmq_msg_init(&frames[n]);
		if (zmq_msg_recv(&frames[n], zap, 0) < 0) {
			zmq_msg_close(&frames[n]);
			break;
		}
		more = zmq_msg_more(&frames[n]);
		n++;
	}
	while (more) { /* more frames than the protocol has: drain */
		zmq_msg_t extra;
		zmq_msg_init(&extra);
		if (zmq_msg_recv(&extra, zap, 0) < 0)
			more = 0;
		else
			more = zmq_msg_more(&extra);
		zmq_msg_close(&extra);
	}
	/* version, request id, domain, address, identity, mechanism,
	 * credentials */
	ok = n == 7 && zmq_msg_size(&frames[0]) == 3 &&
	     !memcmp(zmq_msg_data(&frames[0]), "1.0", 3) &&
	     zmq_msg_size(&frames[5]) == 5 &&
	     !memcmp(zmq_msg_data(&frames[5]), "CURVE", 5) &&
	     zmq_msg_size(&frames[6]) == 32 &&
	     !memcmp(zmq_msg_data(&frames[6]), worker_key, 32);
	if (n >= 4) {
		size_t len = zmq_msg_size(&frames[3]);
		if (len >= sizeof(addr))
			len = sizeof(addr) - 1;
		memcpy(addr, zmq_msg_data(&frames[3]), len);
		addr[len] = '\0';
		for (size_t i = 0; i < len; i++)
			if (addr[i] < 0x20 || addr[i] > 0x7e)
				addr[i] = '?';
	}
	if (!ok) {
		/* At most one line per second, whatever an attacker does. */
		refused++;
		if (now - window >= 1000) {
			dpt__warn("refused %ld connection(s), the last from "
				  "'%s': not a worker of this job step "
				  "(wrong secret)",
				  refused, addr);
			window = now;
			refused = 0;
		}
	}
	zmq_send(zap, "1.0", 3, ZMQ_SNDMORE);
	if (n >= 2)
		zmq_send(zap, zmq_msg_data(&frames[1]), zmq_msg_size(&frames[1]),
			 ZMQ_SNDMORE);
	else
		zmq_send(zap, "", 0, ZMQ_SNDMORE);
	zmq_send(zap, ok ? "200" : "400", 3, ZMQ_SNDMORE);
	zmq_send(zap, ok ? "OK" : "not a worker of this step",
		 ok ? 2 : 25, ZMQ_SNDMORE);
	zmq_send(zap, "", 0, ZMQ_SNDMORE);
	zmq_send(zap, "", 0, 0);
	for (int i = 0; i < n; i++)
		zmq_msg_close(&frames[i]);
}

/* The ZAP requests waiting, 64 at most: one batch per loop turn. */
static void serve_zap(void *zap, const uint8_t *worker_key, int64_t now)
{
	for (int i = 0; i < 64; i++) {
		int more = 0;
		size_t sz = sizeof(more);

		zap_handle(zap, worker_key, now);
		if (zmq_getsockopt(zap, ZMQ_EVENTS, &more, &sz) ||
		    !(more & ZMQ_POLLIN))
			break;
	}
}

/* Every event waiting on the ROUTER's monitor. A closed connection goes
 * to the state machine (its value is the descriptor); a failed handshake
 * (wrong secret, garbage, a port scanner) is logged at most once a
 * second. Called before each message is handled: see
 * dpt__coord_on_disconnect. */
static void monitor_drain(void *mon, struct dpt__coord *c, int64_t now)
{
	static int64_t window;
	static long failed;
	static uint16_t last;

	for (;;) {
		zmq_msg_t ev, where;
		uint16_t event = 0;
		uint32_t value = 0;
		int rc;

		zmq_msg_init(&ev);
		rc = zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT);
		if (rc >= 0 && zmq_msg_more(&ev)) {
			zmq_msg_init(&where);
			zmq_msg_recv(&where, mon, 0);
			zmq_msg_close(&where);
		}
		if (rc >= 6) {
			memcpy(&event, zmq_msg_data(&ev), 2);
			memcpy(&value, (char *)zmq_msg_data(&ev) + 2, 4);
		}
		zmq_msg_close(&ev);
		if (rc < 0)
			break;
		if (event == ZMQ_EVENT_DISCONNECTED) {
			dpt__coord_on_disconnect(c, (int)value, now);
		} else {
			failed++;
			last = event;
		}
	}
	if (failed && now - window >= 1000) {
		dpt__warn("%ld connection(s) failed the handshake (last: %s): "
			  "wrong secret or not a dptrain client",
			  failed,
			  last == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ? "refused" :
			  last == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ?
								 "protocol error" :
								 "no detail");
		window = now;
		failed = 0;
	}
}

/* ------------------------------------------------------------ main */

/* Each worker holds one connection, so one descriptor: raise the soft
 * limit to the hard one for large jobs. */
static void raise_fd_limit(long world)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur < world + 64)
		dpt__warn("the open file limit (%ld) is too low for %ld "
			  "workers: raise it (ulimit -n)",
			  (long)rl.rlim_cur, world);
}

static int setup_router(void *router, const struct dpt__curve_keys *keys,
			const struct options *o)
{
	int one = 1, zero = 0;
	int backlog = o->world_size < 4096 ? (int)o->world_size + 64 : 4096;
	int hwm = 10000, handshake = 10000, linger = 1000;
	int64_t maxmsg = DPT_WIRE_IN_MAX;

	if (zmq_setsockopt(router, ZMQ_CURVE_SERVER, &one, sizeof(one)) ||
	    zmq_setsockopt(router, ZMQ_CURVE_SECRETKEY, keys->coord_secret,
			   DPT_Z85_KEY_LEN) ||
	    zmq_setsockopt(router, ZMQ_ZAP_DOMAIN, "dptrain", 7) ||
	    zmq_setsockopt(router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg)) ||
	    /* A connection storm from thousands of workers must not
	     * overflow the listen queue: a dropped SYN costs a worker 1 s. */
	    zmq_setsockopt(router, ZMQ_BACKLOG, &backlog, sizeof(backlog)) ||
	    zmq_setsockopt(router, ZMQ_HANDSHAKE_IVL, &handshake,
			   sizeof(handshake)) ||
	    zmq_setsockopt(router, ZMQ_SNDHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(router, ZMQ_RCVHWM, &hwm, sizeof(hwm)) ||
	    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof(linger)) ||
	    /* Workers name their connection: one that reconnects after a
	     * network glitch takes its place back instead of being a
	     * stranger. */
	    zmq_setsockopt(router, ZMQ_ROUTER_HANDOVER, &one, sizeof(one)) ||
	    zmq_setsockopt(router, ZMQ_IPV6, strchr(o->bind, '[') ? &one : &zero,
			   sizeof(int))) {
		dpt__error("cannot configure the router socket: %s",
			   zmq_strerror(errno));
		return DPT_ESYS;
	}
	return 0;
}

/* The state machine's sender (struct dpt__coord_sender): the routing id
 * frame, then the message. Never blocks: ZMQ_DONTWAIT. */
static int router_send(void *router, const uint8_t *id, size_t id_len,
		       zmq_msg_t *msg)
{
	zmq_msg_t copy;

	/* A copy shares MSG's buffer (a reference count): the roster is
	 * encoded once and sent to every member. */
	if (zmq_send(router, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
		dpt__debug("cannot send to a peer: %s", zmq_strerror(errno));
		return -1;
	}
	zmq_msg_init(&copy);
	zmq_msg_copy(&copy, msg);
	if (zmq_msg_send(&copy, router, ZMQ_DONTWAIT) < 0) {
		dpt__debug("cannot send to a peer: %s", zmq_strerror(errno));
		zmq_msg_close(&copy);
		return -1;
	}
	return 0;
}

/* Drain the router: one batch of messages per loop turn, so that timers,
 * ZAP and signals are served in between under any load. Returns whether
 * everything that had arrived was read. */
static bool read_router(void *router, void *mon, struct dpt__coord *c)
{
	for (int i = 0; i < 4096; i++) {
		zmq_msg_t id, body;
		int64_t now;
		int fd;

		zmq_msg_init(&id);
		if (zmq_msg_recv(&id, router, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&id);
			return true;
		}
		zmq_msg_init(&body);
		if (!zmq_msg_more(&id) ||
		    zmq_msg_recv(&body, router, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&id);
			zmq_msg_close(&body);
			continue;
		}
		now = now_ms();
		/* The closes that happened before this message arrived, so
		 * that its descriptor is not taken for a closed one's. */
		if (mon)
			monitor_drain(mon, c, now);
		fd = zmq_msg_get(&body, ZMQ_SRCFD);
		if (zmq_msg_more(&body)) {
			/* A protocol message is one frame: drop the lot. */
			zmq_msg_t extra;
			zmq_msg_init(&extra);
			while (zmq_msg_more(&body) &&
			       zmq_msg_recv(&extra, router, ZMQ_DONTWAIT) >= 0)
				zmq_msg_move(&body, &extra);
			zmq_msg_close(&extra);
			dpt__coord_on_message(c, zmq_msg_data(&id),
					      zmq_msg_size(&id), "", 0, fd, now);
		} else {
			dpt__coord_on_message(c, zmq_msg_data(&id),
					      zmq_msg_size(&id),
					      zmq_msg_data(&body),
					      zmq_msg_size(&body), fd, now);
		}
		zmq_msg_close(&id);
		zmq_msg_close(&body);
	}
	return false;
}

static int open_signalfd(void)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGUSR1);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* A descriptor that becomes readable when PID exits (Linux 5.3+), or -1:
 * then the loop checks PID at every turn. */
static int open_pidfd(long pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#else
	(void)pid;
	return -1;
#endif
}

static bool process_gone(long pid)
{
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/*
 * After the last worker left, and before a requeue ends the job: wait for
 * the step's tasks to exit (slurmstepd's plugin reports each one), for a
 * signal (srun's plugin stops the coordinator once the step is over), for
 * the parent to exit, or LINGER_MS at most, so that a requeue does not
 * kill a program that is still winding down after dpt_finalize. Each
 * report comes on a new connection whose CURVE handshake needs the ZAP
 * handler: it is served here too, or no report would ever arrive.
 */
#define LINGER_MS 30000
static void await_task_exits(void *router, void *zap, void *mon, int sfd,
			     int pidfd, const uint8_t *worker_key,
			     const struct options *o, struct dpt__coord *c)
{
	int64_t until = now_ms() + LINGER_MS;

	while (dpt__coord_tasks_running(c) > 0) {
		zmq_pollitem_t items[4] = {
			{.socket = router, .events = ZMQ_POLLIN},
			{.fd = sfd, .events = sfd >= 0 ? ZMQ_POLLIN : 0},
			{.fd = pidfd, .events = pidfd >= 0 ? ZMQ_POLLIN : 0},
			{.socket = zap, .events = ZMQ_POLLIN},
		};
		int64_t left = until - now_ms();

		if (left <= 0) {
			dpt__warn("%" PRIu32 " tasks still run %d s after the "
				  "last worker left",
				  dpt__coord_tasks_running(c), LINGER_MS / 1000);
			return;
		}
		if (zmq_poll(items, 4, left > 200 ? 200 : (long)left) < 0 &&
		    errno != EINTR)
			return;
		if (items[3].revents & ZMQ_POLLIN)
			serve_zap(zap, worker_key, now_ms());
		if (items[1].revents & ZMQ_POLLIN) {
			struct signalfd_siginfo si;

			/* A late SIGUSR1 asks for a stop that is done:
			 * the wait goes on. Any other signal ends it. */
			if (read(sfd, &si, sizeof(si)) != sizeof(si) ||
			    si.ssi_signo != SIGUSR1)
				return;
		}
		if (items[2].revents & ZMQ_POLLIN)
			return;
		if (o->parent_pid && pidfd < 0 && process_gone(o->parent_pid))
			return;
		if (items[0].revents & ZMQ_POLLIN)
			read_router(router, mon, c);
	}
	dpt__info("every task of the step has exited");
}

/*
 * Remove the endpoint file of a coordinator started with --parent-pid (by
 * srun's plugin, in a directory of the step's own), and the directory when
 * that parent started us or is gone. A coordinator started by hand leaves
 * its file to whoever named it: the next coordinator may already have
 * written the same path (tests/coord/lib.sh starts one after another). srun removes both in slurm_spank_exit, but an srun
 * killed with SIGKILL runs no exit callback; this process is the only one of
 * ours left on srun's host then, and it always notices (PR_SET_PDEATHSIG, the
 * parent's pidfd). slurmstepd's callbacks run on the compute nodes, not on
 * srun's host, and a next step may never come. rmdir removes only an empty
 * directory: a directory that holds anything else is left alone.
 */
static void remove_endpoint_file(const struct options *o, bool parent_dir)
{
	char dir[PATH_MAX], *slash;
	int n;

	if (!o->endpoint_file)
		return;
	if (unlink(o->endpoint_file) != 0 && errno != ENOENT)
		dpt__warn("cannot remove '%s': %s", o->endpoint_file,
			  strerror(errno));
	if (!parent_dir)
		return;
	n = snprintf(dir, sizeof(dir), "%s", o->endpoint_file);
	if (n < 0 || (size_t)n >= sizeof(dir) || !(slash = strrchr(dir, '/')) ||
	    slash == dir)
		return;
	*slash = '\0';
	if (rmdir(dir) != 0 && errno != ENOENT)
		dpt__warn("cannot remove '%s': %s", dir, strerror(errno));
}

/* Stops the step once the job's end time is within the grace; returns
 * whether it did. */
static bool check_end_time(struct dpt__walltime *w, const struct options *o,
			   struct dpt__coord *coord, int64_t now)
{
	time_t end = dpt__walltime_end(w), t = time(NULL);
	char who[32] = "the step", when[32], why[160];
	struct tm tm;

	if (end <= 0 || t < end - o->grace)
		return false;
	localtime_r(&end, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	if (o->job_id)
		snprintf(who, sizeof(who), "job %ld", o->job_id);
	snprintf(why, sizeof(why), "%s ends at %s, in %ld s (grace %ld s)",
		 who, when, (long)(end - t), o->grace);
	dpt__coord_stop(coord, why, now);
	return true;
}

int main(int argc, char **argv)
{
	struct options o;
	struct dpt__curve_keys keys;
	struct dpt__coord_config cfg;
	struct dpt__coord_sender sender;
	struct dpt__coord *coord = NULL;
	struct dpt__walltime *walltime = NULL;
	char secret[DPT_SECRET_HEX_LEN + 1];
	char endpoint[ENDPOINT_MAX];
	uint8_t worker_key[32];
	void *ctx = NULL, *router = NULL, *zap = NULL, *mon = NULL;
	int sfd = -1, pidfd = -1, exit_code = 1, rc;
	bool child_of_parent = false;
	bool stopped = false;

	dpt__log_set_ident(PROG);
	if (parse_options(argc, argv, &o) != 0)
		return 2;
	if (load_secret(&o, secret) != 0)
		return 2;
	rc = dpt__wire_derive_keys(secret, &keys);
	explicit_bzero(secret, sizeof(secret));
	if (rc) {
		dpt__error("cannot derive the keys: %s%s", dpt_strerror(rc),
			   rc == DPT_ENOTSUP ? " (libzmq was built without "
					       "CURVE)" :
					       "");
		return 2;
	}
	zmq_z85_decode(worker_key, keys.worker_public);
	raise_fd_limit(o.world_size);

	ctx = zmq_ctx_new();
	if (!ctx || zmq_ctx_set(ctx, ZMQ_IO_THREADS, (int)o.io_threads) != 0) {
		dpt__error("cannot create a zeromq context: %s",
			   zmq_strerror(errno));
		goto out;
	}
	/* The ZAP handler must be bound before the router accepts anyone. */
	zap = zmq_socket(ctx, ZMQ_REP);
	if (!zap || zmq_bind(zap, ZAP_ENDPOINT) != 0) {
		dpt__error("cannot bind '%s': %s", ZAP_ENDPOINT,
			   zmq_strerror(errno));
		goto out;
	}
	router = zmq_socket(ctx, ZMQ_ROUTER);
	if (!router || setup_router(router, &keys, &o) != 0)
		goto out;
	if (zmq_socket_monitor(router, MONITOR_ENDPOINT,
			       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
				       ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
				       ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
				       ZMQ_EVENT_DISCONNECTED) == 0) {
		mon = zmq_socket(ctx, ZMQ_PAIR);
		if (mon && zmq_connect(mon, MONITOR_ENDPOINT) != 0) {
			zmq_close(mon);
			mon = NULL;
		}
	}
	if (zmq_bind(router, o.bind) != 0) {
		dpt__error("cannot bind '%s': %s", o.bind, zmq_strerror(errno));
		exit_code = 2;
		goto out;
	}
	if (make_endpoint(router, &o, endpoint, sizeof(endpoint)) != 0) {
		dpt__error("cannot tell the bound endpoint of '%s'", o.bind);
		goto out;
	}
	sfd = open_signalfd();
	if (o.parent_pid) {
		child_of_parent = getppid() == (pid_t)o.parent_pid;
		pidfd = open_pidfd(o.parent_pid);
		if (process_gone(o.parent_pid)) {
			dpt__error("parent process %ld is not running",
				   o.parent_pid);
			goto out;
		}
	}
	cfg = (struct dpt__coord_config){
		.world_size = (uint32_t)o.world_size,
		.min_workers = (uint32_t)o.min_workers,
		.heartbeat_ms = (uint32_t)o.heartbeat_ms,
		.timeout_ms = (uint32_t)o.timeout_ms,
		.join_timeout_ms = (uint32_t)o.join_timeout_ms,
		.save_every_ms = o.ckpt_every * 1000,
	};
	sender = (struct dpt__coord_sender){
		.send = router_send,
		.arg = router,
	};
	if (dpt__coord_new(&coord, &cfg, &sender, now_ms()) != 0) {
		dpt__error("out of memory");
		goto out;
	}
	if ((o.job_id || o.end_time) &&
	    dpt__walltime_start(&walltime, (uint32_t)o.job_id,
				(time_t)o.end_time, o.grace) != 0)
		goto out;
	if (o.endpoint_file &&
	    write_endpoint_file(o.endpoint_file, endpoint) != 0)
		goto out;
	printf("%s\n", endpoint);
	fflush(stdout);
	dpt__info("listening on %s for %ld workers (min %ld, heartbeat %ld "
		  "ms, timeout %ld ms, %ld i/o threads)",
		  endpoint, o.world_size, o.min_workers, o.heartbeat_ms,
		  o.timeout_ms, o.io_threads);

	while (!dpt__coord_done(coord, &exit_code)) {
		zmq_pollitem_t items[5] = {
			{.socket = router, .events = ZMQ_POLLIN},
			{.socket = zap, .events = ZMQ_POLLIN},
			{.socket = mon, .fd = -1, .events = mon ? ZMQ_POLLIN : 0},
			{.fd = sfd, .events = sfd >= 0 ? ZMQ_POLLIN : 0},
			{.fd = pidfd, .events = pidfd >= 0 ? ZMQ_POLLIN : 0},
		};
		int64_t now = now_ms();
		int64_t wait = dpt__coord_next_deadline(coord) - now;
		bool drained = true;

		if (wait < 0)
			wait = 0;
		if (o.parent_pid && pidfd < 0 && wait > 200)
			wait = 200;
		if (walltime && !stopped && wait > 1000)
			wait = 1000; /* the end time is checked every second */
		if (zmq_poll(items, 5, (long)wait) < 0 && errno != EINTR) {
			dpt__error("poll failed: %s", zmq_strerror(errno));
			break;
		}
		now = now_ms();
		if (items[1].revents & ZMQ_POLLIN)
			serve_zap(zap, worker_key, now);
		if (mon && (items[2].revents & ZMQ_POLLIN))
			monitor_drain(mon, coord, now);
		if (items[0].revents & ZMQ_POLLIN)
			drained = read_router(router, mon, coord);
		if (sfd >= 0 && (items[3].revents & ZMQ_POLLIN)) {
			struct signalfd_siginfo si;
			char why[64];
			if (read(sfd, &si, sizeof(si)) != sizeof(si)) {
				/* nothing to act on */
			} else if (si.ssi_signo == SIGUSR1) {
				/* scancel --signal=USR1 with --full or -b
				 * reaches the batch step, this process
				 * included: the same stop as a rank's. */
				dpt__coord_stop(coord,
						"the coordinator got SIGUSR1",
						now);
			} else {
				snprintf(why, sizeof(why),
					 "the coordinator got signal %u",
					 si.ssi_signo);
				dpt__coord_shutdown(coord, why, now);
			}
		}
		if (o.parent_pid &&
		    ((pidfd >= 0 && (items[4].revents & ZMQ_POLLIN)) ||
		     (pidfd < 0 && process_gone(o.parent_pid)))) {
			char why[96];
			snprintf(why, sizeof(why),
				 "the coordinator's parent process %ld exited",
				 o.parent_pid);
			dpt__coord_shutdown(coord, why, now);
		}
		if (walltime && !stopped)
			stopped = check_end_time(walltime, &o, coord, now);
		/* While messages wait unread, a peer's silence may be ours:
		 * no eviction until the backlog is read. */
		dpt__coord_on_tick(coord, now_ms(), !drained);
	}
	/* A stopped step that ended cleanly goes back to the queue: its
	 * program committed a checkpoint before it left. */
	if (exit_code == 0 && o.requeue && dpt__coord_stop_sent(coord)) {
		struct dpt__requeue_facts facts = {
			.job_id = (uint32_t)o.job_id,
			.restart_count = o.restart_count,
			.max_requeues = o.max_requeues,
		};

		await_task_exits(router, zap, mon, sfd, pidfd, worker_key, &o,
				 coord);
		facts.resumed = dpt__coord_kv_value(coord, DPT_KV_RESUMED);
		facts.committed = dpt__coord_kv_value(coord, DPT_KV_COMMITTED);
		dpt__walltime_requeue(&facts);
	}
	dpt__info("exiting with status %d", exit_code);
	/* The parent that named itself with --parent-pid and forked this
	 * process made the directory (srun's plugin): remove it whether or
	 * not that parent still runs, because whether it does cannot be
	 * told here. srun killed with SIGKILL sends PR_SET_PDEATHSIG when
	 * the thread that forked us exits, while its other threads may still
	 * be exiting: getppid() and kill(pid, 0) still find it then. A
	 * live srun's own cleanup finds nothing left, which it ignores. */
	if (o.parent_pid) /* not a file someone else made and may reuse */
		remove_endpoint_file(&o, child_of_parent ||
						 process_gone(o.parent_pid));

out:
	dpt__walltime_free(&walltime);
	dpt__coord_destroy(&coord);
	if (mon)
		zmq_close(mon);
	if (router)
		zmq_close(router);
	if (zap)
		zmq_close(zap);
	if (ctx)
		zmq_ctx_term(ctx);
	if (sfd >= 0)
		close(sfd);
	if (pidfd >= 0)
		close(pidfd);
	explicit_bzero(&keys, sizeof(keys));
	return exit_code;
}

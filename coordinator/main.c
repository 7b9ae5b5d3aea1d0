/*
 * dptrain-coordinator: one per job step. Binds one CURVE-secured ROUTER
 * socket and runs the event loop that feeds the state machine of
 * coordinator/coord.c, the ZAP handler (zap.c), the job's end time and
 * requeue (walltime.c); options.c parses what it is told.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
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

#include "clock.h"
#include "coord.h"
#include "events.h"
#include "log.h"
#include "metrics.h"
#include "options.h"
#include "parse.h"
#include "ratelimit.h"
#include "walltime.h"
#include "wire.h"
#include "zap.h"

#define MONITOR_ENDPOINT "inproc://dptrain-coordinator-monitor"
#define ENDPOINT_MAX	 512

/* The status client's public key, accepted by ZAP (doc/protocol.md,
 * "Status requests"). */
static uint8_t status_key[32];

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
		     strchr(host, ':') && host[0] != '[' ? "tcp://[%s]%s"
							 : "tcp://%s%s",
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

/* Every event waiting on the ROUTER's monitor. A closed connection goes
 * to the state machine (its value is the descriptor); a failed handshake
 * (wrong secret, garbage, a port scanner) is logged at most once a
 * second. Called before each message is handled: see
 * dpt__coord_on_disconnect. */
static void monitor_drain(void *mon, struct dpt__coord *c, int64_t now)
{
	static struct dpt__ratelimit rl;

	for (;;) {
		zmq_msg_t ev, where;
		uint16_t event = 0;
		uint32_t value = 0;
		long n;
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
			continue;
		}
		n = dpt__ratelimit(&rl, now, 1, 1000);
		if (n)
			dpt__warn("%ld connection(s) failed the handshake "
				  "(last: %s): wrong secret or not a dptrain "
				  "client",
				  n,
				  event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
					  ? "refused"
				  : event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
					  ? "protocol error"
					  : "no detail");
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
	    zmq_setsockopt(router, ZMQ_IPV6,
			   strchr(o->bind, '[') ? &one : &zero, sizeof(int))) {
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
		now = dpt__now_ms();
		/* The closes that happened before this message arrived, so
		 * that its descriptor is not taken for a closed one's. */
		if (mon)
			monitor_drain(mon, c, now);
		fd = zmq_msg_get(&body, ZMQ_SRCFD);
		/* A status client may ask STATUS and nothing else. */
		const char *user = zmq_msg_gets(&body, "User-Id");
		if (user && !strcmp(user, DPT_ZAP_USER_STATUS) &&
		    (zmq_msg_size(&body) < DPT_WIRE_HDR_SIZE ||
		     ((const uint8_t *)zmq_msg_data(&body))[3] !=
			     DPT_MSG_STATUS)) {
			zmq_msg_close(&id);
			zmq_msg_close(&body);
			continue;
		}
		if (zmq_msg_more(&body)) {
			/* A protocol message is one frame: drop the lot. */
			zmq_msg_t extra;
			zmq_msg_init(&extra);
			while (zmq_msg_more(&body) &&
			       zmq_msg_recv(&extra, router, ZMQ_DONTWAIT) >= 0)
				zmq_msg_move(&body, &extra);
			zmq_msg_close(&extra);
			dpt__coord_on_message(c, zmq_msg_data(&id),
					      zmq_msg_size(&id), "", 0, fd,
					      now);
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
	int64_t until = dpt__now_ms() + LINGER_MS;

	while (dpt__coord_tasks_running(c) > 0) {
		zmq_pollitem_t items[4] = {
			{.socket = router, .events = ZMQ_POLLIN},
			{.fd = sfd, .events = sfd >= 0 ? ZMQ_POLLIN : 0},
			{.fd = pidfd, .events = pidfd >= 0 ? ZMQ_POLLIN : 0},
			{.socket = zap, .events = ZMQ_POLLIN},
		};
		int64_t left = until - dpt__now_ms();

		if (left <= 0) {
			dpt__warn("%" PRIu32 " tasks still run %d s after the "
				  "last worker left",
				  dpt__coord_tasks_running(c),
				  LINGER_MS / 1000);
			return;
		}
		if (zmq_poll(items, 4, left > 200 ? 200 : (long)left) < 0 &&
		    errno != EINTR)
			return;
		if (items[3].revents & ZMQ_POLLIN)
			dpt__zap_serve(zap, worker_key, status_key,
				       dpt__now_ms());
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
 * written the same path (tests/coord/lib.sh starts one after another). srun
 * removes both in slurm_spank_exit, but an srun killed with SIGKILL runs no
 * exit callback; this process is the only one of ours left on srun's host then,
 * and it always notices (PR_SET_PDEATHSIG, the parent's pidfd). slurmstepd's
 * callbacks run on the compute nodes, not on srun's host, and a next step may
 * never come. rmdir removes only an empty directory: a directory that holds
 * anything else is left alone.
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
/* ------------------------------------------------------------ status */

/* The directory of the status files: $DPTRAIN_STATUS_DIR, else
 * ~/.dptrain/jobs (doc/protocol.md, "Status requests"), created 0700. */
static int status_dir(char *buf, size_t size)
{
	const char *d = getenv("DPTRAIN_STATUS_DIR"), *home = getenv("HOME");
	struct passwd *pw;
	char parent[PATH_MAX];

	if (d && *d) {
		if (snprintf(buf, size, "%s", d) >= (int)size)
			return -1;
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return -1;
		return 0;
	}
	if (!home || !*home) {
		pw = getpwuid(getuid());
		home = pw ? pw->pw_dir : NULL;
	}
	if (!home ||
	    snprintf(parent, sizeof(parent), "%s/.dptrain", home) >=
		    (int)sizeof(parent) ||
	    snprintf(buf, size, "%s/jobs", parent) >= (int)size)
		return -1;
	if ((mkdir(parent, 0700) != 0 && errno != EEXIST) ||
	    (mkdir(buf, 0700) != 0 && errno != EEXIST))
		return -1;
	return 0;
}

/* Write DIR/JOB.SUFFIX with TEXT, 0600, through a temporary file and a
 * rename: a reader sees the whole file or none. */
static int write_private(const char *dir, long job, const char *suffix,
			 const char *text)
{
	char tmp[PATH_MAX], path[PATH_MAX];
	size_t len = strlen(text);
	int fd, rc = -1;

	if (snprintf(tmp, sizeof(tmp), "%s/.%ld.%s.XXXXXX", dir, job, suffix) >=
		    (int)sizeof(tmp) ||
	    snprintf(path, sizeof(path), "%s/%ld.%s", dir, job, suffix) >=
		    (int)sizeof(path))
		return -1;
	fd = mkstemp(tmp);
	if (fd < 0)
		return -1;
	if (fchmod(fd, 0600) == 0 && write(fd, text, len) == (ssize_t)len &&
	    rename(tmp, path) == 0)
		rc = 0;
	close(fd);
	if (rc)
		unlink(tmp);
	return rc;
}

/* DIR/JOB.live: where a status client finds this coordinator and the key
 * that lets it ask STATUS, readable by the owner (and root) only. */
static void write_status_file(const struct options *o, const char *endpoint,
			      const struct dpt__curve_keys *keys,
			      int metrics_port, char *dir, size_t size)
{
	char text[ENDPOINT_MAX + 256], port[32] = "";

	dir[0] = '\0';
	if (!o->job_id)
		return;
	if (status_dir(dir, size) != 0) {
		dpt__warn("cannot create the status directory '%s': %s "
			  "(dptrain status cannot reach this job)",
			  dir, strerror(errno));
		dir[0] = '\0';
		return;
	}
	if (metrics_port >= 0)
		snprintf(port, sizeof(port), "metrics_port=%d\n", metrics_port);
	snprintf(text, sizeof(text),
		 "endpoint=%s\nserver_key=%s\npublic_key=%s\nsecret_key=%s\n"
		 "pid=%ld\n%s",
		 endpoint, keys->coord_public, keys->status_public,
		 keys->status_secret, (long)getpid(), port);
	if (write_private(dir, o->job_id, "live", text) != 0)
		dpt__warn("cannot write the status file in '%s': %s (dptrain "
			  "status cannot reach this job)",
			  dir, strerror(errno));
	explicit_bzero(text, sizeof(text));
}

/* The reporter of the state machine: the run's events, at each commit the
 * job's Comment, and the counters of the metrics page. */
struct reporter {
	struct dpt__events *events; /* NULL: none could be opened */
	struct dpt__walltime *walltime;
	struct dpt__coord *coord;
	uint32_t restarts;
	long grace;
	struct dpt__metrics_counters counters;
};

static void count_note(struct dpt__metrics_counters *m,
		       const struct dpt__coord_note *n)
{
	if (!n->event)
		return;
	if (!strcmp(n->event, "save")) {
		m->saves++;
		m->saved_bytes += n->bytes;
	} else if (!strcmp(n->event, "commit")) {
		m->commits++;
	} else if (!strcmp(n->event, "evict")) {
		m->evictions++;
	} else if (!strcmp(n->event, "generation")) {
		m->generations++;
	}
}

static void on_note(void *arg, const struct dpt__coord_note *n)
{
	struct reporter *r = arg;

	count_note(&r->counters, n);
	if (r->events)
		dpt__events_note(r->events, n);
	if (r->walltime && n->event && !strcmp(n->event, "commit")) {
		struct dpt__msg_status st;
		char text[DPT_WALLTIME_MSG_MAX];
		const char *run, *slash;

		dpt__coord_status(r->coord, &st);
		run = st.run;
		slash = strrchr(run, '/');
		if (slash && slash[1])
			run = slash + 1;
		snprintf(text, sizeof(text),
			 "run=%s step=%" PRIu64 " committed=%" PRIu64
			 " restarts=%" PRIu32,
			 run[0] ? run : "?", n->step, n->step, r->restarts);
		dpt__walltime_progress(r->walltime, text);
	}
}

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The metrics page (dpt__metrics_page_fn): a snapshot of the state
 * machine and the reporter's counters, rendered on each scrape. */
static int metrics_page(void *arg, struct dpt__buf *out)
{
	struct reporter *r = arg;
	struct dpt__msg_status st;
	struct dpt__coord_counts cc;
	struct dpt__metrics m;

	dpt__coord_status(r->coord, &st);
	dpt__coord_counts(r->coord, &cc);
	r->counters.status_answered = cc.status_answered;
	r->counters.scrapes++;
	m = (struct dpt__metrics){
		.st = &st,
		.generation = cc.generation,
		.joined = cc.joined,
		.stop_at = st.end_time ? (int64_t)st.end_time - r->grace : 0,
		.now_ms = wall_ms(),
		.counters = r->counters,
	};
	return dpt__metrics_render(&m, out);
}

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
	snprintf(why, sizeof(why), "%s ends at %s, in %ld s (grace %ld s)", who,
		 when, (long)(end - t), o->grace);
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
	struct reporter rep = {0};
	struct dpt__metrics_server *metrics = NULL;
	int metrics_port = -1;
	char sdir[PATH_MAX] = "";
	uint64_t started_ms = wall_ms();
	void *ctx = NULL, *router = NULL, *zap = NULL, *mon = NULL;
	int sfd = -1, pidfd = -1, exit_code = 1, rc;
	bool child_of_parent = false;
	bool stopped = false;

	dpt__log_set_ident(PROG);
	if (dpt__coord_parse_options(argc, argv, &o) != 0)
		return 2;
	if (dpt__coord_load_secret(&o, secret) != 0)
		return 2;
	rc = dpt__wire_derive_keys(secret, &keys);
	explicit_bzero(secret, sizeof(secret));
	if (rc) {
		dpt__error("cannot derive the keys: %s%s", dpt_strerror(rc),
			   rc == DPT_ENOTSUP ? " (libzmq was built without "
					       "CURVE)"
					     : "");
		return 2;
	}
	zmq_z85_decode(worker_key, keys.worker_public);
	zmq_z85_decode(status_key, keys.status_public);
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
		.grace_s = o.grace,
	};
	sender = (struct dpt__coord_sender){
		.send = router_send,
		.arg = router,
	};
	if (dpt__coord_new(&coord, &cfg, &sender, dpt__now_ms()) != 0) {
		dpt__error("out of memory");
		goto out;
	}
	if ((o.job_id || o.end_time) &&
	    dpt__walltime_start(&walltime, (uint32_t)o.job_id,
				(time_t)o.end_time, o.grace) != 0)
		goto out;
	/* Before the endpoint file, which tells srun the start went well.
	 * On the address the router bound: an interface name in --bind is
	 * ZeroMQ's to resolve. */
	if (o.metrics_port >= 0) {
		char bound[ENDPOINT_MAX];
		size_t len = sizeof(bound);

		if (zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, bound, &len))
			snprintf(bound, sizeof(bound), "%s", o.bind);
		dpt__metrics_start(&metrics, bound, endpoint, o.metrics_port,
				   &metrics_port, metrics_page, &rep);
	}
	if (o.endpoint_file &&
	    write_endpoint_file(o.endpoint_file, endpoint) != 0)
		goto out;
	/* The run's events and the status of the job: neither may stop
	 * it, so neither fails the start. */
	dpt__coord_set_job(coord, (uint32_t)o.job_id, (uint32_t)o.restart_count,
			   started_ms);
	rep.walltime = o.job_id ? walltime : NULL;
	rep.coord = coord;
	rep.restarts = (uint32_t)o.restart_count;
	rep.grace = o.grace;
	dpt__coord_set_reporter(coord, on_note, &rep);
	if (dpt__events_new(&rep.events, (uint32_t)o.job_id,
			    (uint32_t)o.restart_count, started_ms) == 0)
		dpt__coord_note(
			coord, &(struct dpt__coord_note){
				       .event = "start",
				       .world = (uint32_t)o.world_size,
				       .end_time = walltime ? dpt__walltime_end(
								      walltime)
							    : 0,
			       });
	write_status_file(&o, endpoint, &keys, metrics_port, sdir,
			  sizeof(sdir));
	printf("%s\n", endpoint);
	fflush(stdout);
	dpt__info("listening on %s for %ld workers (min %ld, heartbeat %ld "
		  "ms, timeout %ld ms, %ld i/o threads)",
		  endpoint, o.world_size, o.min_workers, o.heartbeat_ms,
		  o.timeout_ms, o.io_threads);

	while (!dpt__coord_done(coord, &exit_code)) {
		zmq_pollitem_t items[5 + DPT_METRICS_MAX_CLIENTS + 1] = {
			{.socket = router, .events = ZMQ_POLLIN},
			{.socket = zap, .events = ZMQ_POLLIN},
			{.socket = mon,
			 .fd = -1,
			 .events = mon ? ZMQ_POLLIN : 0},
			{.fd = sfd, .events = sfd >= 0 ? ZMQ_POLLIN : 0},
			{.fd = pidfd, .events = pidfd >= 0 ? ZMQ_POLLIN : 0},
		};
		int64_t now = dpt__now_ms();
		int64_t wait = dpt__coord_next_deadline(coord) - now;
		int64_t mdl =
			metrics ? dpt__metrics_server_deadline(metrics) : 0;
		bool drained = true, mready = false;
		size_t nitems = 5;

		if (metrics) {
			int fds[DPT_METRICS_MAX_CLIENTS + 1];
			short evs[DPT_METRICS_MAX_CLIENTS + 1];
			size_t n = dpt__metrics_server_fds(
				metrics, fds, evs, DPT_METRICS_MAX_CLIENTS + 1);
			for (size_t i = 0; i < n; i++)
				items[nitems++] = (zmq_pollitem_t){
					.fd = fds[i],
					.events = evs[i] & POLLOUT ? ZMQ_POLLOUT
								   : ZMQ_POLLIN,
				};
			if (mdl && mdl - now < wait)
				wait = mdl - now;
		}
		if (wait < 0)
			wait = 0;
		if (o.parent_pid && pidfd < 0 && wait > 200)
			wait = 200;
		if (walltime && !stopped && wait > 1000)
			wait = 1000; /* the end time is checked every second */
		if (zmq_poll(items, (int)nitems, (long)wait) < 0 &&
		    errno != EINTR) {
			dpt__error("poll failed: %s", zmq_strerror(errno));
			break;
		}
		now = dpt__now_ms();
		for (size_t i = 5; i < nitems; i++)
			mready |= items[i].revents != 0;
		/* Scrapes are served after the workers' messages, below. */
		if (items[1].revents & ZMQ_POLLIN)
			dpt__zap_serve(zap, worker_key, status_key, now);
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
		if (walltime)
			dpt__coord_set_end_time(coord,
						dpt__walltime_end(walltime));
		/* While messages wait unread, a peer's silence may be ours:
		 * no eviction until the backlog is read. */
		dpt__coord_on_tick(coord, dpt__now_ms(), !drained);
		if (metrics && (mready || (mdl && now >= mdl)))
			dpt__metrics_server_serve(metrics, dpt__now_ms());
	}
	/* A task that outlives the coordinator's giving up (stopped, stuck
	 * in the kernel, deaf to its error) would hold the step and its
	 * nodes until the walltime: once the others had their time to
	 * leave, the step ends. */
	if (dpt__coord_gave_up(coord) && o.step_id >= 0) {
		await_task_exits(router, zap, mon, sfd, pidfd, worker_key, &o,
				 coord);
		if (dpt__coord_tasks_running(coord) > 0) {
			dpt__error("%" PRIu32
				   " task(s) still run after the job "
				   "failed: ending step %ld.%ld",
				   dpt__coord_tasks_running(coord), o.job_id,
				   o.step_id);
			dpt__walltime_kill_step((uint32_t)o.job_id,
						(uint32_t)o.step_id);
		}
	}
	/* A stopped step that ended cleanly goes back to the queue: its
	 * program committed a checkpoint before it left. */
	if (exit_code == 0 && o.requeue && dpt__coord_stop_sent(coord)) {
		struct dpt__requeue_facts facts = {
			.job_id = (uint32_t)o.job_id,
			.restart_count = o.restart_count,
			.max_requeues = o.max_requeues,
			.nodes_min = o.nodes_min,
			.nodes_max = o.nodes_max,
		};

		await_task_exits(router, zap, mon, sfd, pidfd, worker_key, &o,
				 coord);
		facts.resumed = dpt__coord_kv_value(coord, DPT_KV_RESUMED);
		facts.committed = dpt__coord_kv_value(coord, DPT_KV_COMMITTED);
		enum dpt__requeue_verdict v;
		char why[DPT_WALLTIME_MSG_MAX];
		int rq;

		/* The verdict's comment replaces the progress for good. */
		dpt__walltime_progress_end(walltime);
		rq = dpt__walltime_requeue(&facts, &v, why, sizeof(why));
		dpt__coord_note(coord,
				&(struct dpt__coord_note){
					.event = "requeue",
					.reason = rq ? "refused"
						  : v == DPT_RQ_REQUEUE
							  ? "requeue"
						  : v == DPT_RQ_HOLD ? "hold"
								     : "capped",
					.why = why,
					.step = dpt__coord_committed(coord),
				});
	}
	dpt__info("exiting with status %d", exit_code);
	dpt__coord_note(coord, &(struct dpt__coord_note){
				       .event = "end",
				       .status = exit_code,
			       });
	if (sdir[0]) {
		char path[PATH_MAX + 32];
		const char *run =
			rep.events ? dpt__events_run(rep.events) : NULL;

		/* The run stays findable by job id once the job is queued
		 * again or finished: JOB.run, read by dptrain status. */
		if (run) {
			char text[DPT_WIRE_TEXT_MAX + 8];
			snprintf(text, sizeof(text), "run=%s\n", run);
			write_private(sdir, o.job_id, "run", text);
		}
		snprintf(path, sizeof(path), "%s/%ld.live", sdir, o.job_id);
		unlink(path);
	}
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
	dpt__metrics_server_destroy(&metrics);
	if (coord)
		dpt__coord_set_reporter(coord, NULL, NULL);
	dpt__events_destroy(&rep.events);
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

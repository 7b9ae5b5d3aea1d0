/*
 * Rendezvous and failure-detection benchmark of dptrain-coordinator.
 *
 *   bench/rendezvous --workers 64,512,4096 [--runs R] [--verify]
 *                    [--peer-timeout S]
 *     For each N: start the real coordinator (the built binary) and N
 *     simulated workers (one DEALER socket each, CURVE and all, driven by
 *     one thread per process), and time until the last worker has its
 *     rank and the NCCL unique ID of generation 1. Prints one line per N,
 *     the last being "rendezvous workers=N seconds=S coord_cpu_s=C
 *     coord_cpu_ms_per_join=J" (medians of R runs: the wall time and the
 *     coordinator's own CPU seconds, all its threads).
 *     --verify checks dense unique ranks and one identical ID everywhere.
 *     The peer, measured in the same run: the same rendezvous over
 *     PyTorch's TCPStore (bench/rendezvous_tcpstore.py, one run per N,
 *     given up after S seconds, default 60); ratio = its time / ours.
 *
 *   bench/rendezvous --failure-detection [--workers 4] [--runs 5]
 *     (also --failover) N real libdptrain worker processes train
 *     (allreduce + barrier, or barriers only); one is killed with
 *     SIGKILL; prints the time until every survivor got an error and
 *     until they formed the next generation. Median of R runs per mode;
 *     last line "failure_detection workers=N seconds=S" (barrier loop:
 *     only the coordinator can tell: the dead worker's connection closed).
 *
 * The simulated workers share this process and its cores with the
 * coordinator; on a cluster each worker's CURVE handshake runs on its own
 * node. The coordinator's own CPU time is printed beside the wall time.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include <dptrain/dptrain.h>

#include "bench/join.h"
#include "tests/testlib.h"
#include "client.h"
#include "parse.h"
#include "wire.h"

#ifndef DPT_COORDINATOR_BIN
#define DPT_COORDINATOR_BIN "coordinator/dptrain-coordinator"
#endif
#ifndef DPT_TCPSTORE_SCRIPT
#define DPT_TCPSTORE_SCRIPT "bench/rendezvous_tcpstore.py"
#endif

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double seconds_since(int64_t t0)
{
	return (double)(now_ns() - t0) / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Thousands of sockets here and in the peer (torch 1.13's TCPStore holds
 * about four descriptors per client): 2^17 where allowed (root), else
 * the hard limit. */
static void raise_fd_limit(void)
{
	struct rlimit rl, big = {1 << 17, 1 << 17};

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return;
	if (rl.rlim_max < big.rlim_max && setrlimit(RLIMIT_NOFILE, &big) == 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* ------------------------------------------------------------ coordinator */

struct coordinator {
	pid_t pid;
	char endpoint[256];
};

/* Start the coordinator binary and read the endpoint it prints. */
static int coordinator_start(struct coordinator *c, const char *bin,
			     const char *secret, int world,
			     const char *const *extra)
{
	const char *argv[32];
	char world_s[16];
	int out[2], n = 0, len = 0;
	int64_t deadline;

	snprintf(world_s, sizeof(world_s), "%d", world);
	argv[n++] = bin;
	argv[n++] = "--world-size";
	argv[n++] = world_s;
	argv[n++] = "--bind";
	argv[n++] = "tcp://127.0.0.1:*";
	for (; extra && *extra && n < 30; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	if (pipe(out) != 0)
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		dup2(out[1], 1);
		close(out[0]);
		close(out[1]);
		setenv("DPTRAIN_SECRET", secret, 1);
		execv(bin, (char *const *)argv);
		fprintf(stderr, "cannot run '%s': %s\n", bin, strerror(errno));
		_exit(127);
	}
	close(out[1]);
	deadline = now_ns() + 10 * 1000000000LL;
	while (now_ns() < deadline && len < (int)sizeof(c->endpoint) - 1) {
		struct pollfd p = {.fd = out[0], .events = POLLIN};
		char ch;
		if (poll(&p, 1, 100) <= 0)
			continue;
		if (read(out[0], &ch, 1) != 1)
			break;
		if (ch == '\n')
			break;
		c->endpoint[len++] = ch;
	}
	c->endpoint[len] = '\0';
	close(out[0]);
	if (strncmp(c->endpoint, "tcp://", 6) != 0) {
		fprintf(stderr, "the coordinator printed no endpoint\n");
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
		return -1;
	}
	return 0;
}

/* The CPU seconds process PID has used so far, all its threads: the sum
 * of their run times in nanoseconds (/proc/PID/task/TID/schedstat), not
 * the clock ticks of /proc/PID/stat. -1 when it cannot be read. */
static double process_cpu(pid_t pid)
{
	char path[320];
	double total = 0;
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return -1;
	while ((e = readdir(d))) {
		unsigned long long ns;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat",
			 (int)pid, e->d_name);
		if (!(f = fopen(path, "r")))
			continue; /* a thread that just ended */
		if (fscanf(f, "%llu", &ns) == 1)
			total += (double)ns / 1e9;
		fclose(f);
	}
	closedir(d);
	return total;
}

/* Wait for the coordinator to exit; its status and CPU seconds. */
static int coordinator_wait(struct coordinator *c, int timeout_ms, double *cpu)
{
	int64_t deadline = now_ns() + (int64_t)timeout_ms * 1000000;
	struct rusage ru;
	int status = 0;

	for (;;) {
		pid_t p = wait4(c->pid, &status, WNOHANG, &ru);
		if (p == c->pid)
			break;
		if (now_ns() > deadline) {
			kill(c->pid, SIGKILL);
			wait4(c->pid, &status, 0, &ru);
			return -1;
		}
		usleep(2000);
	}
	if (cpu)
		*cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void random_secret(char out[DPT_SECRET_HEX_LEN + 1])
{
	uint8_t b[32];
	if (getrandom(b, sizeof(b), 0) != sizeof(b))
		abort();
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

/* ------------------------------------------------------------ simulation */

struct sim {
	void *sock;
	int rank, world, local_rank, local_world;
	uint32_t generation;
	bool welcomed, have_id, counted;
	uint8_t id[DPT_NCCL_ID_SIZE];
};

struct swarm {
	void *ctx;
	struct sim *w;
	int n;
	int done;
	int epfd;
	uint8_t sent_id[DPT_NCCL_ID_SIZE];
	bool id_sent;
	int failed; /* workers told to go: the run is lost */
};

static void sim_send(struct sim *s, const struct dpt__msg *m)
{
	uint8_t buf[512];
	long n = dpt__wire_encode(m, buf, sizeof(buf));
	if (n > 0)
		zmq_send(s->sock, buf, (size_t)n, ZMQ_DONTWAIT);
}

/* Everything a worker's socket has for it. ZMQ_FD only signals that the
 * socket's state may have changed: ZMQ_EVENTS says what is there. */
static void sim_drain(struct swarm *sw, struct sim *s)
{
	for (;;) {
		int ev = 0;
		size_t sz = sizeof(ev);
		uint8_t buf[4096];
		struct dpt__msg m;
		int n;

		if (zmq_getsockopt(s->sock, ZMQ_EVENTS, &ev, &sz) != 0 ||
		    !(ev & ZMQ_POLLIN))
			return;
		n = zmq_recv(s->sock, buf, sizeof(buf), ZMQ_DONTWAIT);
		if (n < 0 || (size_t)n > sizeof(buf) ||
		    dpt__wire_decode(buf, (size_t)n, sizeof(buf), &m) != 0)
			continue;
		if (m.type == DPT_MSG_WELCOME && !s->welcomed) {
			s->welcomed = true;
			s->generation = m.generation;
			s->rank = (int)m.u.welcome.rank;
			s->world = (int)m.u.welcome.world;
			s->local_rank = (int)m.u.welcome.local_rank;
			s->local_world = (int)m.u.welcome.local_world;
			if (m.u.welcome.flags & DPT_WELCOME_CREATE_ID) {
				/* The ID is opaque to the coordinator:
				 * random bytes stand for ncclGetUniqueId. */
				struct dpt__msg id;
				dpt__msg_init(&id, DPT_MSG_UNIQUE_ID,
					      m.generation);
				if (getrandom(id.u.unique_id, DPT_NCCL_ID_SIZE,
					      0) != DPT_NCCL_ID_SIZE)
					abort();
				memcpy(sw->sent_id, id.u.unique_id,
				       DPT_NCCL_ID_SIZE);
				sw->id_sent = true;
				sim_send(s, &id);
			}
		} else if (m.type == DPT_MSG_UNIQUE_ID && !s->have_id) {
			s->have_id = true;
			memcpy(s->id, m.u.unique_id, DPT_NCCL_ID_SIZE);
		} else if (m.type == DPT_MSG_ERROR ||
			   m.type == DPT_MSG_GEN_END) {
			if (sw->failed++ < 3)
				fprintf(stderr, "worker %ld: %s: %s\n",
					(long)(s - sw->w),
					dpt__msg_type_name(m.type),
					m.u.text.text);
		}
		if (s->welcomed && s->have_id && !s->counted) {
			sw->done++;
			s->counted = true;
		}
		dpt__msg_release(&m);
	}
}

/* Serve the sockets made so far: their replies, and their heartbeats when
 * due (a joiner that stays silent for the timeout is evicted, as a real
 * worker's agent would not let happen). */
static void swarm_serve(struct swarm *sw, int made, int wait_ms,
			int64_t *next_hb)
{
	struct epoll_event evs[256];
	int k = epoll_wait(sw->epfd, evs, 256, wait_ms);

	for (int i = 0; i < k; i++)
		sim_drain(sw, evs[i].data.ptr);
	if (now_ns() < *next_hb)
		return;
	for (int i = 0; i < made; i++) {
		struct dpt__msg m;
		dpt__msg_init(&m, DPT_MSG_HEARTBEAT, sw->w[i].generation);
		sim_send(&sw->w[i], &m);
		sim_drain(sw, &sw->w[i]);
	}
	*next_hb = now_ns() + 500000000;
}

static int swarm_run(struct swarm *sw, const char *endpoint,
		     const struct dpt__curve_keys *k, int n, double timeout_s)
{
	int64_t t0 = now_ns(), next_hb = now_ns() + 500000000;
	int zero = 0;

	sw->n = n;
	sw->ctx = zmq_ctx_new();
	zmq_ctx_set(sw->ctx, ZMQ_MAX_SOCKETS, n + 64);
	sw->w = calloc((size_t)n, sizeof(*sw->w));
	sw->epfd = epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < n; i++) {
		struct sim *s = &sw->w[i];
		struct dpt__msg m;
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
		int fd;
		size_t sz = sizeof(fd);

		s->sock = zmq_socket(sw->ctx, ZMQ_DEALER);
		if (!s->sock) {
			fprintf(stderr, "socket %d: %s\n", i,
				zmq_strerror(errno));
			return -1;
		}
		zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof(zero));
		dpt__client_limit(s->sock, DPT_WIRE_MSG_MAX, 10000);
		zmq_setsockopt(s->sock, ZMQ_CURVE_SERVERKEY, k->coord_public,
			       DPT_Z85_KEY_LEN);
		zmq_setsockopt(s->sock, ZMQ_CURVE_PUBLICKEY, k->worker_public,
			       DPT_Z85_KEY_LEN);
		zmq_setsockopt(s->sock, ZMQ_CURVE_SECRETKEY, k->worker_secret,
			       DPT_Z85_KEY_LEN);
		if (zmq_connect(s->sock, endpoint) != 0)
			return -1;
		dpt__msg_init(&m, DPT_MSG_JOIN, 0);
		m.u.join = (struct dpt__msg_join){
			.node = (uint32_t)(i / 8),
			.local_rank = (uint32_t)(i % 8),
			.task_id = (uint32_t)i,
			.pid = (uint32_t)getpid(),
			.caps = DPT_CAP_NCCL,
			.addr = {.host = "127.0.0.1"},
		};
		sim_send(s, &m);
		zmq_getsockopt(s->sock, ZMQ_FD, &fd, &sz);
		epoll_ctl(sw->epfd, EPOLL_CTL_ADD, fd, &ev);
		/* A send may consume the signal on ZMQ_FD: look now, or a
		 * reply that arrived meanwhile waits for the next heartbeat. */
		sim_drain(sw, s);
		if (i % 64 == 63)
			swarm_serve(sw, i + 1, 0, &next_hb);
	}
	/* DPT_BENCH_TRACE=1: progress on stderr, to see where time goes. */
	if (getenv("DPT_BENCH_TRACE"))
		fprintf(stderr, "%.3f s: %d sockets made\n", seconds_since(t0),
			n);
	while (sw->done < n && !sw->failed && seconds_since(t0) < timeout_s) {
		swarm_serve(sw, n, 20, &next_hb);
		if (getenv("DPT_BENCH_TRACE")) {
			static int64_t last;
			if (now_ns() - last > 200000000) {
				int wel = 0;
				for (int i = 0; i < n; i++)
					wel += sw->w[i].welcomed;
				fprintf(stderr,
					"%.3f s: %d welcomed, %d done\n",
					seconds_since(t0), wel, sw->done);
				last = now_ns();
			}
		}
	}
	return sw->done == n ? 0 : -1;
}

static int swarm_verify(const struct swarm *sw)
{
	char *seen = calloc((size_t)sw->n, 1);
	int bad = 0;

	for (int i = 0; i < sw->n && !bad; i++) {
		const struct sim *s = &sw->w[i];
		int rank = s->rank;
		if (s->world != sw->n || rank < 0 || rank >= sw->n ||
		    seen[rank] || s->generation != 1) {
			fprintf(stderr, "worker %d: rank %d of %d, gen %u\n", i,
				rank, s->world, s->generation);
			bad = 1;
		} else if (!sw->id_sent ||
			   memcmp(s->id, sw->sent_id, DPT_NCCL_ID_SIZE) != 0) {
			fprintf(stderr, "worker %d: another nccl id\n", i);
			bad = 1;
		} else if (rank != i || s->local_rank != i % 8) {
			/* Joined as (node i/8, local i%8): ranks follow. */
			fprintf(stderr, "worker %d: rank %d, local rank %d\n",
				i, rank, s->local_rank);
			bad = 1;
		}
		if (rank >= 0 && rank < sw->n)
			seen[rank] = 1;
	}
	free(seen);
	return bad ? -1 : 0;
}

static void swarm_leave(struct swarm *sw)
{
	int linger = 2000;

	for (int i = 0; i < sw->n; i++) {
		struct dpt__msg m;
		dpt__msg_init(&m, DPT_MSG_LEAVE, 1);
		sim_send(&sw->w[i], &m);
		zmq_setsockopt(sw->w[i].sock, ZMQ_LINGER, &linger,
			       sizeof(linger));
		zmq_close(sw->w[i].sock);
	}
	zmq_ctx_term(sw->ctx);
	close(sw->epfd);
	free(sw->w);
}

/* The peer: bench/rendezvous_tcpstore.py for N clients, killed after
 * TIMEOUT_S. Returns its seconds, or -1 with *WHY set (timeout, no
 * torch, failure). */
static double peer_tcpstore(int n, int timeout_s, char *why, size_t why_len)
{
	const char *script = getenv("DPT_TCPSTORE_SCRIPT");
	char n_s[16], t_s[16], out[256];
	int fd[2], status = 0, len = 0;
	int64_t deadline = now_ns() + (int64_t)timeout_s * 1000000000;
	double sec = -1;
	const char *p;
	pid_t pid;

	if (!script)
		script = DPT_TCPSTORE_SCRIPT;
	snprintf(why, why_len, "failed");
	if (access(script, R_OK) != 0 ||
	    access("/usr/bin/python3", X_OK) != 0) {
		snprintf(why, why_len, "no-python3-or-script");
		return -1;
	}
	snprintf(n_s, sizeof(n_s), "%d", n);
	snprintf(t_s, sizeof(t_s), "%d", timeout_s);
	if (pipe(fd) != 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(fd[1], 1);
		close(fd[0]);
		close(fd[1]);
		execl("/usr/bin/python3", "python3", script, n_s, t_s,
		      (char *)NULL);
		_exit(127);
	}
	close(fd[1]);
	while (len < (int)sizeof(out) - 1) {
		struct pollfd pf = {.fd = fd[0], .events = POLLIN};
		int64_t left = (deadline - now_ns()) / 1000000;
		ssize_t k;
		if (left <= 0) {
			snprintf(why, why_len, "timeout(>%ds)", timeout_s);
			kill(pid, SIGKILL);
			break;
		}
		if (poll(&pf, 1, (int)(left > 1000 ? 1000 : left)) <= 0)
			continue;
		k = read(fd[0], out + len, sizeof(out) - 1 - (size_t)len);
		if (k <= 0)
			break;
		len += (int)k;
	}
	out[len] = '\0';
	close(fd[0]);
	waitpid(pid, &status, 0);
	if ((p = strstr(out, "seconds=")) != NULL && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0)
		sec = strtod(p + 8, NULL);
	else if ((p = strstr(out, "skip=")) != NULL ||
		 (p = strstr(out, "error=")) != NULL)
		snprintf(why, why_len, "%.*s", (int)strcspn(p, "\n"), p);
	return sec;
}

static int bench_rendezvous(const char *bin, const int *sizes, int nsizes,
			    int runs, bool verify, int peer_timeout)
{
	double last = 0, last_cpu = 0, last_join_cpu = 0;
	int last_n = 0;

	for (int k = 0; k < nsizes; k++) {
		int n = sizes[k];
		double wall[64], cpu[64], join_cpu[64];
		/* All N simulated workers share this machine's cores with
		 * the coordinator, and each one's CURVE handshake costs as
		 * much CPU here as the coordinator's side of it: a joined
		 * worker's heartbeat can wait longer than the default 2 s
		 * timeout, which is then not what is measured. */
		const char *extra[] = {"--log-level", "warn", "--timeout-ms",
				       "10000", NULL};
		double peer;
		char why[64], peer_s[96];

		for (int r = 0; r < runs; r++) {
			struct coordinator c;
			struct dpt__curve_keys keys;
			struct swarm sw = {0};
			char secret[DPT_SECRET_HEX_LEN + 1];
			int64_t t0;
			int rc, st;

			random_secret(secret);
			dpt__wire_derive_keys(secret, &keys);
			if (coordinator_start(&c, bin, secret, n, extra) != 0)
				return 1;
			t0 = now_ns();
			join_cpu[r] = process_cpu(c.pid);
			rc = swarm_run(&sw, c.endpoint, &keys, n, 120);
			wall[r] = seconds_since(t0);
			join_cpu[r] = process_cpu(c.pid) - join_cpu[r];
			if (rc == 0 && verify)
				rc = swarm_verify(&sw);
			swarm_leave(&sw);
			st = coordinator_wait(&c, 20000, &cpu[r]);
			if (rc != 0 || st != 0) {
				fprintf(stderr,
					"rendezvous of %d workers failed "
					"(%d of %d ready, coordinator status "
					"%d)\n",
					n, sw.done, n, st);
				return 1;
			}
		}
		last = median(wall, runs);
		last_cpu = median(cpu, runs);
		last_join_cpu = median(join_cpu, runs);
		last_n = n;
		peer = peer_timeout ? peer_tcpstore(n, peer_timeout, why,
						    sizeof(why))
				    : -1;
		if (!peer_timeout)
			peer_s[0] = '\0';
		else if (peer >= 0)
			snprintf(peer_s, sizeof(peer_s),
				 " tcpstore_seconds=%.3f ratio=%.2f", peer,
				 peer / last);
		else
			snprintf(peer_s, sizeof(peer_s), " tcpstore=%s", why);
		printf("workers=%d seconds=%.3f coordinator_cpu_seconds=%.3f "
		       "join_cpu_seconds=%.3f runs=%d%s%s\n",
		       n, last, last_cpu, last_join_cpu, runs,
		       verify ? " verified" : "", peer_s);
		fflush(stdout);
	}
	/* The coordinator's side of a join, what a cluster's coordinator
	 * pays whoever runs the workers (doc/PERFORMANCE.md): its CPU over
	 * its whole life (start, joins, the workers' leaving, exit), and
	 * over the joins alone, from the first connection to the last
	 * worker's NCCL ID. */
	printf("rendezvous workers=%d seconds=%.3f coord_cpu_s=%.3f "
	       "coord_cpu_ms_per_join=%.3f join_cpu_ms_per_join=%.3f\n",
	       last_n, last, last_cpu, last_n ? last_cpu * 1e3 / last_n : 0.0,
	       last_n ? last_join_cpu * 1e3 / last_n : 0.0);
	return 0;
}

/* ------------------------------------------------------------ failover */

/* Write "<EVENT> <gen> <ns> <pid>" for CTX's generation on OUT. */
static void report(int out, const char *event, struct dpt_ctx *ctx)
{
	char line[96];
	int len = snprintf(line, sizeof(line), "%s %u %lld %d\n", event,
			   dpt_generation(ctx), (long long)now_ns(),
			   (int)getpid());

	(void)!write(out, line, (size_t)len);
}

/* One real worker: report joins and errors as "<event> <gen> <ns>" lines
 * on OUT. BARRIERS_ONLY leaves detection to the coordinator;
 * otherwise the allreduce's data plane sees the dead peer first. */
static void failover_worker(const char *endpoint, const char *secret, int index,
			    bool barriers_only, int out)
{
	struct dpt_ctx *ctx = NULL;
	float grad[256];
	int rc;

	if (bench_join(&ctx, endpoint, secret, index) != 0)
		_exit(1);
	report(out, "joined", ctx);
	for (;;) {
		rc = train_step(ctx, grad, 256, barriers_only);
		if (rc)
			break;
		usleep(1000);
	}
	report(out, "told", ctx);
	if (dpt_rejoin(ctx) == 0) {
		report(out, "joined", ctx);
		dpt_barrier(ctx);
	}
	dpt_finalize(&ctx);
	_exit(0);
}

/* One run: N workers, kill one, time the survivors' error and re-join. */
static int failover_run(const char *bin, int n, bool barriers_only,
			double *told, double *formed)
{
	struct coordinator c;
	char secret[DPT_SECRET_HEX_LEN + 1];
	pid_t *pids = calloc((size_t)n, sizeof(*pids));
	int pipefd[2], joined = 0, n_told = 0, n_formed = 0, rc = -1;
	int64_t t_kill = 0, last_told = 0, last_formed = 0;
	const char *extra[] = {"--log-level", "error", NULL};
	FILE *in;
	char line[128];

	random_secret(secret);
	if (coordinator_start(&c, bin, secret, n, extra) != 0)
		return -1;
	if (pipe(pipefd) != 0)
		return -1;
	for (int i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(pipefd[0]);
			failover_worker(c.endpoint, secret, i, barriers_only,
					pipefd[1]);
		}
	}
	close(pipefd[1]);
	in = fdopen(pipefd[0], "r");
	while (fgets(line, sizeof(line), in)) {
		char what[16];
		unsigned gen;
		long long t;
		int pid;

		if (sscanf(line, "%15s %u %lld %d", what, &gen, &t, &pid) != 4)
			continue;
		if (!strcmp(what, "joined") && gen == 1 && ++joined == n) {
			usleep(300000); /* let training run a little */
			t_kill = now_ns();
			kill(pids[n - 1], SIGKILL);
		} else if (!strcmp(what, "told") && pid != pids[n - 1]) {
			n_told++;
			if (t > last_told)
				last_told = t;
		} else if (!strcmp(what, "joined") && gen > 1) {
			n_formed++;
			if (t > last_formed)
				last_formed = t;
		}
		if (n_formed == n - 1)
			break;
	}
	fclose(in);
	for (int i = 0; i < n; i++)
		waitpid(pids[i], NULL, 0);
	if (coordinator_wait(&c, 10000, NULL) == 0 && n_told == n - 1 &&
	    n_formed == n - 1) {
		*told = (double)(last_told - t_kill) / 1e9;
		*formed = (double)(last_formed - t_kill) / 1e9;
		rc = 0;
	}
	free(pids);
	return rc;
}

static int bench_failover(const char *bin, int n, int runs)
{
	static const char *const modes[] = {"allreduce+barrier", "barrier"};
	double last = 0;

	for (int m = 0; m < 2; m++) {
		double told[64], formed[64];
		for (int r = 0; r < runs; r++)
			if (failover_run(bin, n, m == 1, &told[r],
					 &formed[r]) != 0) {
				fprintf(stderr, "failover run %d failed\n", r);
				return 1;
			}
		last = median(told, runs);
		printf("failover workers=%d loop=%s "
		       "survivors_told_seconds=%.3f "
		       "next_generation_seconds=%.3f runs=%d (median)\n",
		       n, modes[m], last, median(formed, runs), runs);
		fflush(stdout);
	}
	printf("failure_detection workers=%d seconds=%.3f\n", n, last);
	return 0;
}

/* ------------------------------------------------------------ main */

static void usage(FILE *f)
{
	fprintf(f, "usage: rendezvous [--workers N[,N...]] [--runs R] "
		   "[--verify] [--peer-timeout S (0: no peer)]\n"
		   "       rendezvous --failure-detection [--workers N] "
		   "[--runs R]\n"
		   "       (both: [--coordinator PATH])\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"workers", required_argument, NULL, 'w'},
		{"runs", required_argument, NULL, 'r'},
		{"verify", no_argument, NULL, 'v'},
		{"failover", no_argument, NULL, 'f'},
		{"failure-detection", no_argument, NULL, 'f'},
		{"peer-timeout", required_argument, NULL, 'p'},
		{"coordinator", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *bin = getenv("DPTRAIN_COORDINATOR_BIN");
	int sizes[16] = {64, 512, 4096}, nsizes = 3, runs = 0, c;
	int peer_timeout = 60;
	bool verify = false, failover = false, sizes_given = false;
	long v;

	if (!bin)
		bin = DPT_COORDINATOR_BIN;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'w':
			/* A comma-separated list of worker counts. */
			nsizes = 0;
			for (const char *p = optarg; *p && nsizes < 16;) {
				const char *end = strchr(p, ',');
				char tok[16];
				size_t len =
					end ? (size_t)(end - p) : strlen(p);
				if (len >= sizeof(tok)) {
					fprintf(stderr, "bad worker count\n");
					return 2;
				}
				memcpy(tok, p, len);
				tok[len] = '\0';
				if (dpt__parse_long(tok, 1, DPT_WIRE_WORLD_MAX,
						    &v) != 0) {
					fprintf(stderr,
						"bad worker count '%s'\n", tok);
					return 2;
				}
				sizes[nsizes++] = (int)v;
				p += len + (end ? 1 : 0);
			}
			sizes_given = true;
			break;
		case 'r':
			if (dpt__parse_long(optarg, 1, 64, &v) != 0) {
				fprintf(stderr, "bad --runs '%s' (1..64)\n",
					optarg);
				return 2;
			}
			runs = (int)v;
			break;
		case 'v':
			verify = true;
			break;
		case 'p':
			if (dpt__parse_long(optarg, 0, 3600, &v) != 0) {
				fprintf(stderr, "bad --peer-timeout '%s'\n",
					optarg);
				return 2;
			}
			peer_timeout = (int)v;
			break;
		case 'f':
			failover = true;
			break;
		case 'c':
			bin = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (access(bin, X_OK) != 0) {
		fprintf(stderr,
			"cannot run the coordinator '%s': build it, "
			"or pass --coordinator\n",
			bin);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit();
	if (failover)
		return bench_failover(bin, sizes_given ? sizes[0] : 4,
				      runs ? runs : 5);
	return bench_rendezvous(bin, sizes, nsizes, runs ? runs : 3, verify,
				peer_timeout);
}

/*
 * The CPU data plane against a neighbour: another user of the node, who
 * can list /dev/shm, connect to any port and compute anything from the
 * session's name, but does not hold the step's secret (doc/RELIABILITY.md,
 * "The CPU data plane"). Real processes through tests/coll/harness.c.
 *
 *  1. Forged HELLOs (the session's hash as the old protocol wanted it, a
 *     HELLO under a wrong key, a connection that never speaks) reach the
 *     leaders' listeners before the real ranks: the forger receives
 *     nothing, the ring forms, the allreduce is exact, the refusal is
 *     logged.
 *  2. Another user (nobody) creates the segment names that a neighbour
 *     could predict; the victim (another unprivileged user) forms its
 *     node all the same and leaves the planted segment as it was. Needs
 *     root to play both users, else SKIP.
 *  3. No name created in /dev/shm during a formation carries the session,
 *     its hash or the step key.
 */
#define _GNU_SOURCE /* setresuid */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <dptrain/dptrain.h>

#include "harness.h"
#include "hash.h"
#include "worker/cpu_comm.h"
#include "worker/cpu_hello.h"

#define MAX_WORLD  4
#define COUNT	   100003 /* elements of the allreduce */
#define MAX_FORGED 8
#define PLANTED	   "planted by nobody"

struct shared {
	int world;
	int verdict[MAX_WORLD]; /* 0 did not run, 1 exact, 2 wrong */
	char why[MAX_WORLD][160];
};

static int tap_n, failed;

static void result(int ok, const char *what)
{
	printf("%s %d - %s\n", ok ? "ok" : "not ok", ++tap_n, what);
	failed |= !ok;
	fflush(stdout);
}

/* ------------------------------------------------------ a rank's body */

/* Every rank adds r + 1 + i % 7 at i: the sum is known exactly. */
static int allreduce_body(struct dpt__cpu_comm *c, int rank, void *arg)
{
	struct shared *sh = arg;
	float *buf = malloc(COUNT * sizeof(float));
	int world = sh->world, rc;

	alarm(60);
	if (!buf)
		return 1;
	for (size_t i = 0; i < COUNT; i++)
		buf[i] = (float)(rank + 1 + (int)(i % 7));
	rc = dpt__cpu_allreduce(c, buf, buf, COUNT, DPT_FLOAT32, DPT_SUM);
	if (rc) {
		snprintf(sh->why[rank], sizeof(sh->why[0]), "allreduce: %s",
			 dpt_err_name(rc));
		sh->verdict[rank] = 2;
		return 1;
	}
	for (size_t i = 0; i < COUNT; i++) {
		float want =
			(float)(world * (world + 1) / 2 + world * (int)(i % 7));
		if (buf[i] != want) {
			snprintf(sh->why[rank], sizeof(sh->why[0]),
				 "element %zu is %g, want %g", i,
				 (double)buf[i], (double)want);
			sh->verdict[rank] = 2;
			return 1;
		}
	}
	sh->verdict[rank] = 1;
	free(buf);
	return 0;
}

/* Run WORLD ranks on NODES with the allreduce body; 1 when every rank
 * exited with 0 and got the exact sum, else 0 (and why, as diagnostics). */
static int run_ranks(int world, const uint32_t *nodes, const char *session,
		     harness_hook_fn hook, void *hook_arg)
{
	struct shared *sh = harness_shared(sizeof(*sh));
	pid_t pids[MAX_WORLD];
	int status[MAX_WORLD], ok = 1;

	if (!sh)
		return 0;
	sh->world = world;
	if (harness_spawn_hooked(world, nodes, session, allreduce_body, sh,
				 pids, hook, hook_arg)) {
		printf("# cannot start the ranks\n");
		return 0;
	}
	harness_wait(world, pids, status, 60);
	for (int r = 0; r < world; r++) {
		if (WIFEXITED(status[r]) && !WEXITSTATUS(status[r]) &&
		    sh->verdict[r] == 1)
			continue;
		ok = 0;
		printf("# rank %d: wait status 0x%x, %s\n", r, status[r],
		       sh->verdict[r] == 2 ? sh->why[r]
		       : WIFEXITED(status[r]) && WEXITSTATUS(status[r]) == 99
			       ? "could not connect"
			       : "no result");
	}
	munmap(sh, sizeof(*sh));
	return ok;
}

/* ---------------------------------------------------- forged HELLOs */

struct forgery {
	const char *session;
	int fds[MAX_FORGED];
	int n;
};

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static int connect_to(const struct dpt__peer *peer)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(peer->port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	inet_pton(AF_INET, peer->host, &a.sin_addr);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The HELLO that admitted a rank before the data plane was keyed: the
 * FNV-1a hash of the session, which /dev/shm showed to everyone. */
static void old_hello(unsigned char out[24], const char *session, uint32_t rank,
		      uint32_t kind)
{
	uint64_t h = dpt__fnv1a(session, strlen(session), DPT_FNV1A_INIT);

	put32(out, 0x43545044u);
	put32(out + 4, 1);
	put32(out + 8, (uint32_t)h);
	put32(out + 12, (uint32_t)(h >> 32));
	put32(out + 16, rank);
	put32(out + 20, kind);
}

static void send_to(struct forgery *f, const struct dpt__peer *peer,
		    const void *bytes, size_t n)
{
	int fd = connect_to(peer);

	if (fd < 0 || f->n == MAX_FORGED) {
		printf("# cannot connect to %s:%u\n", peer->host,
		       (unsigned)peer->port);
		if (fd >= 0)
			close(fd);
		return;
	}
	if (n && send(fd, bytes, n, MSG_NOSIGNAL) != (ssize_t)n)
		printf("# cannot send a forged hello\n");
	f->fds[f->n++] = fd;
}

/* Ranks 0 and 1 on node 0, rank 2 on node 1: rank 0 expects a local
 * connection from rank 1 and the ring's from rank 2; rank 2 the ring's
 * from rank 0. The forger's connections wait in the listeners' backlogs
 * before any rank starts. */
static void forge(const struct dpt__peer *peers, int world, void *arg)
{
	struct forgery *f = arg;
	struct dpt__hello_key wrong;
	struct dpt__hello h = {.kind = DPT__HELLO_KIND_LOCAL, .from = 1};
	unsigned char old[24], hello[DPT__HELLO_BYTES];

	(void)world;
	old_hello(old, f->session, 1, 2);
	send_to(f, &peers[0], old, sizeof(old));
	old_hello(old, f->session, 2, 1);
	send_to(f, &peers[0], old, sizeof(old));
	old_hello(old, f->session, 0, 1);
	send_to(f, &peers[2], old, sizeof(old));
	/* Today's HELLO, under a key derived from something else than the
	 * step's secret. */
	if (dpt__hello_key_derive(&wrong, "guessed", 7, f->session) ||
	    dpt__hello_encode(&wrong, &h, hello))
		printf("# cannot encode a hello\n");
	send_to(f, &peers[0], hello, sizeof(hello));
	/* A connection that never speaks. */
	send_to(f, &peers[0], NULL, 0);
}

/* Whether any forged connection received a byte. */
static int forger_heard(const struct forgery *f)
{
	int heard = 0;

	for (int i = 0; i < f->n; i++) {
		unsigned char b[64];
		ssize_t k = recv(f->fds[i], b, sizeof(b), MSG_DONTWAIT);

		if (k > 0) {
			printf("# forged connection %d received %zd bytes\n", i,
			       k);
			heard = 1;
		}
	}
	return heard;
}

static int log_has(const char *path, const char *needle)
{
	char buf[65536];
	FILE *fp = fopen(path, "r");
	size_t n;

	if (!fp)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	buf[n] = '\0';
	fclose(fp);
	return strstr(buf, needle) != NULL;
}

static void check_forged_hello(void)
{
	static const uint32_t nodes[] = {0, 0, 1};
	char session[64], log[] = "/tmp/dpt-neighbour-XXXXXX";
	struct forgery f = {.session = session};
	int saved = dup(2), fd = mkstemp(log), ok;

	snprintf(session, sizeof(session), "test-neighbour-%ld-hello",
		 (long)getpid());
	/* The ranks' log (stderr) goes to a file that is read after. */
	fflush(stderr);
	if (fd >= 0)
		dup2(fd, 2);
	ok = run_ranks(3, nodes, session, forge, &f);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	result(ok, "forged hellos: the ranks connect and the allreduce is "
		   "exact");
	result(f.n == 5 && !forger_heard(&f),
	       "forged hellos: the forger receives nothing");
	ok = log_has(log, "refused a data-plane connection") &&
	     log_has(log, "wrong key");
	result(ok, "forged hellos: the refusal is logged");
	if (!ok || getenv("DPT_KEEP"))
		printf("# the ranks' log: %s\n", log);
	else
		unlink(log);
	for (int i = 0; i < f.n; i++)
		close(f.fds[i]);
	if (fd >= 0)
		close(fd);
}

/* ------------------------------------------------ planted segments */

static int drop_to(const char *user)
{
	struct passwd *pw = getpwnam(user);

	if (!pw || setgroups(0, NULL) ||
	    setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) ||
	    setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid))
		return -1;
	return 0;
}

/* The name that the unkeyed data plane gave node NODE's segment: what a
 * neighbour who reads the session in /dev/shm can compute. */
static void predictable_name(char *buf, size_t size, const char *session,
			     unsigned node)
{
	snprintf(buf, size, "/dptrain-%s-%016llx-n%u", session,
		 (unsigned long long)dpt__fnv1a(session, strlen(session),
						DPT_FNV1A_INIT),
		 node);
}

/* As nobody: create NAME, world-readable, holding PLANTED. */
static int plant(const char *name)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int fd;

		if (drop_to("nobody"))
			_exit(2);
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0644);
		if (fd < 0 || ftruncate(fd, 4096) ||
		    write(fd, PLANTED, sizeof(PLANTED)) != sizeof(PLANTED))
			_exit(3);
		_exit(0);
	}
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
			       !WEXITSTATUS(st)
		       ? 0
		       : -1;
}

/* Whether NAME is still nobody's and holds PLANTED. */
static int untouched(const char *name)
{
	char buf[sizeof(PLANTED)];
	struct stat st;
	struct passwd *pw = getpwnam("nobody");
	int fd = shm_open(name, O_RDONLY, 0), ok;

	if (fd < 0)
		return 0;
	ok = pw && fstat(fd, &st) == 0 && st.st_uid == pw->pw_uid &&
	     st.st_size == 4096 &&
	     read(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf) &&
	     !memcmp(buf, PLANTED, sizeof(buf));
	close(fd);
	return ok;
}

static void check_planted_segment(void)
{
	static const uint32_t nodes[] = {0, 0};
	char session[64], name[160];
	pid_t victim;
	int st;

	if (geteuid() != 0 || !getpwnam("nobody") || !getpwnam("daemon")) {
		for (int i = 0; i < 2; i++)
			printf("ok %d - # SKIP planted segment: needs root, "
			       "and users nobody and daemon\n",
			       ++tap_n);
		return;
	}
	snprintf(session, sizeof(session), "test-neighbour-%ld-planted",
		 (long)getpid());
	predictable_name(name, sizeof(name), session, 0);
	if (plant(name)) {
		result(0, "planted segment: nobody plants the name");
		result(0, "planted segment: left as it was");
		return;
	}
	/* The victim is an unprivileged user too (root could remove
	 * anyone's name): daemon. */
	fflush(NULL);
	victim = fork();
	if (victim == 0) {
		if (drop_to("daemon"))
			_exit(2);
		_exit(run_ranks(2, nodes, session, NULL, NULL) ? 0 : 1);
	}
	st = -1;
	if (victim > 0)
		waitpid(victim, &st, 0);
	result(victim > 0 && WIFEXITED(st) && !WEXITSTATUS(st),
	       "planted segment: another user's name does not block the "
	       "node");
	result(untouched(name), "planted segment: left as it was");
	shm_unlink(name);
}

/* ---------------------------------------------------- segment names */

static void check_names(void)
{
	static const uint32_t nodes[] = {0, 0};
	char session[64], hash[17], buf[16384];
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC), seen = 0, bad = 0;
	ssize_t k;

	snprintf(session, sizeof(session), "test-neighbour-%ld-names",
		 (long)getpid());
	snprintf(hash, sizeof(hash), "%016llx",
		 (unsigned long long)dpt__fnv1a(session, strlen(session),
						DPT_FNV1A_INIT));
	if (in < 0 || inotify_add_watch(in, "/dev/shm", IN_CREATE) < 0) {
		printf("ok %d - # SKIP segment names: no inotify on /dev/shm\n",
		       ++tap_n);
		return;
	}
	if (!run_ranks(2, nodes, session, NULL, NULL))
		printf("# the ranks failed\n");
	while ((k = read(in, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + k;) {
			struct inotify_event *e = (struct inotify_event *)p;

			if (e->len && !strncmp(e->name, "dptrain", 7)) {
				seen++;
				if (strstr(e->name, session) ||
				    strstr(e->name, hash) ||
				    strstr(e->name, HARNESS_STEP_KEY)) {
					printf("# '%s' names the session\n",
					       e->name);
					bad = 1;
				}
			}
			p += sizeof(*e) + e->len;
		}
	}
	close(in);
	if (!seen)
		printf("# no segment was created\n");
	result(seen && !bad, "segment names carry no token of the session "
			     "or the step key");
}

int main(void)
{
	check_forged_hello();
	check_planted_segment();
	check_names();
	printf("1..%d\n", tap_n);
	return failed;
}

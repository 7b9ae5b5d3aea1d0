#include "config.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

double harness_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *harness_shared(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void harness_shm_snapshot(struct harness_shm_seen *s)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;

	s->n = 0;
	/* Longer names are no segment of ours. */
	while (d && (e = readdir(d)) && s->n < HARNESS_SHM_MAX)
		if (!strncmp(e->d_name, "dptrain-", 8) &&
		    strlen(e->d_name) < sizeof(s->name[0]))
			memcpy(s->name[s->n++], e->d_name,
			       strlen(e->d_name) + 1);
	if (d)
		closedir(d);
}

static int seen(const struct harness_shm_seen *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->name[i], name))
			return 1;
	return 0;
}

int harness_shm_leaked(const struct harness_shm_seen *before, char *leaked,
		       size_t size)
{
	static struct harness_shm_seen now, later;

	harness_shm_snapshot(&now);
	for (int i = 0; i < now.n; i++) {
		if (seen(before, now.name[i]))
			continue;
		usleep(200000);
		harness_shm_snapshot(&later);
		if (seen(&later, now.name[i])) {
			if (leaked)
				snprintf(leaked, size, "%s", now.name[i]);
			return 1;
		}
	}
	return 0;
}

int harness_spawn(int world, const uint32_t *nodes, const char *session,
		  harness_body_fn body, void *arg, pid_t *pids)
{
	return harness_spawn_hooked(world, nodes, session, body, arg, pids,
				    NULL, NULL);
}

int harness_spawn_hooked(int world, const uint32_t *nodes, const char *session,
			 harness_body_fn body, void *arg, pid_t *pids,
			 harness_hook_fn hook, void *hook_arg)
{
	struct dpt__cpu_listener **l = calloc((size_t)world, sizeof(*l));
	struct dpt__peer *peers = calloc((size_t)world, sizeof(*peers));
	int started = 0, rc = -1;

	if (!l || !peers)
		goto out;
	for (int r = 0; r < world; r++) {
		if (dpt__cpu_listen(&l[r], "127.0.0.1", &peers[r].port))
			goto out;
		snprintf(peers[r].host, sizeof(peers[r].host), "127.0.0.1");
		peers[r].node = nodes[r];
	}
	if (hook)
		hook(peers, world, hook_arg);
	fflush(NULL);
	for (; started < world; started++) {
		pid_t pid = fork();

		if (pid < 0)
			goto out;
		if (pid == 0) {
			struct dpt__cpu_comm *c = NULL;
			int r = started, status;

			for (int j = 0; j < world; j++)
				if (j != r)
					dpt__cpu_listener_destroy(&l[j]);
			if (dpt__cpu_comm_new(&c, &l[r], r, world, peers,
					      session, HARNESS_STEP_KEY,
					      strlen(HARNESS_STEP_KEY), 20000))
				_exit(99);
			status = body(c, r, arg);
			dpt__cpu_comm_destroy(&c);
			fflush(NULL);
			_exit(status);
		}
		pids[started] = pid;
	}
	rc = 0;
out:
	if (rc)
		for (int r = 0; r < started; r++)
			kill(pids[r], SIGKILL);
	for (int r = 0; l && r < world; r++)
		dpt__cpu_listener_destroy(&l[r]);
	free(l);
	free(peers);
	return rc;
}

void harness_wait(int world, const pid_t *pids, int *status, int timeout_s)
{
	double end = harness_now() + timeout_s;
	int left = world;

	for (int r = 0; r < world; r++)
		status[r] = -1;
	while (left) {
		for (int r = 0; r < world; r++) {
			int st;

			if (status[r] == -1 &&
			    waitpid(pids[r], &st, WNOHANG) > 0) {
				status[r] = st;
				left--;
			}
		}
		if (!left)
			break;
		if (harness_now() > end) {
			for (int r = 0; r < world; r++)
				if (status[r] == -1)
					kill(pids[r], SIGKILL);
			end = harness_now() + 3600;
		}
		usleep(2000);
	}
}

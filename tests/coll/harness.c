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

int harness_shm_left(const char *needle)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int found = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (strstr(e->d_name, needle))
			found = 1;
	closedir(d);
	return found;
}

int harness_spawn(int world, const uint32_t *nodes, const char *session,
		  harness_body_fn body, void *arg, pid_t *pids)
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
					      session, 20000))
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

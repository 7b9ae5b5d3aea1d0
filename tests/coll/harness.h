/*
 * Launcher for the CPU backend's integration tests and benchmark: real
 * processes on this machine, connected over loopback TCP, with "nodes"
 * given per rank so that ranks of one node use shared memory.
 */
#ifndef DPT_TESTS_COLL_HARNESS_H
#define DPT_TESTS_COLL_HARNESS_H

#include <stdint.h>
#include <sys/types.h>

#include "worker/cpu_comm.h"

/* The code run by each rank; its return value is the process's exit
 * status. The communicator is destroyed after it returns. */
typedef int (*harness_body_fn)(struct dpt__cpu_comm *c, int rank, void *arg);

/* The step key of the harness's ranks (dpt__cpu_comm_new's STEP_KEY). */
#define HARNESS_STEP_KEY "harness-step-key-0123456789abcdefghijk"

/*
 * Open WORLD listeners on 127.0.0.1, fork WORLD processes, and in each
 * connect a communicator (rank r on node NODES[r], SESSION,
 * HARNESS_STEP_KEY) and run BODY. PIDS receives the children's ids. A
 * child that cannot connect exits with 99. Returns 0 or -1 (fork or
 * listen failed; children already started are killed).
 */
int harness_spawn(int world, const uint32_t *nodes, const char *session,
		  harness_body_fn body, void *arg, pid_t *pids);

/* Run by harness_spawn_hooked in the parent once the listeners are open
 * (PEERS: their addresses, by rank), before any rank starts. */
typedef void (*harness_hook_fn)(const struct dpt__peer *peers, int world,
				void *arg);

/* harness_spawn, with HOOK (HOOK_ARG) run before the ranks start. */
int harness_spawn_hooked(int world, const uint32_t *nodes, const char *session,
			 harness_body_fn body, void *arg, pid_t *pids,
			 harness_hook_fn hook, void *hook_arg);

/* Wait for the children; STATUS[r] receives each waitpid() status.
 * Children still running after TIMEOUT_S seconds are killed (SIGKILL). */
void harness_wait(int world, const pid_t *pids, int *status, int timeout_s);

/* Zeroed memory shared with the children forked afterwards. */
void *harness_shared(size_t bytes);

/* CLOCK_MONOTONIC in seconds: comparable between processes. */
double harness_now(void);

/* The dptrain segments in /dev/shm at one moment. Names are random
 * (doc/protocol.md): a leak is a name that was not there before. */
#define HARNESS_SHM_MAX 256
struct harness_shm_seen {
	int n;
	char name[HARNESS_SHM_MAX][64];
};
void harness_shm_snapshot(struct harness_shm_seen *s);
/*
 * Whether a dptrain segment absent from BEFORE is in /dev/shm, and still
 * there 0.2 s later (tests running beside this one have segments for a
 * few milliseconds). LEAKED (SIZE bytes, may be NULL) receives its name.
 */
int harness_shm_leaked(const struct harness_shm_seen *before, char *leaked,
		       size_t size);

#endif

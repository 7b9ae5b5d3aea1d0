/*
 * Launcher for the CPU backend's integration tests and benchmark: real
 * processes on this machine, connected over loopback TCP, with "nodes"
 * given per rank so that ranks of one node use shared memory.
 */
#ifndef DPT_TESTS_COLL_HARNESS_H
#define DPT_TESTS_COLL_HARNESS_H

#include <stdint.h>
#include <sys/types.h>

#include "worker/comm.h"

/* The code run by each rank; its return value is the process's exit
 * status. The communicator is destroyed after it returns. */
typedef int (*harness_body_fn)(struct dpt__cpu_comm *c, int rank, void *arg);

/*
 * Open WORLD listeners on 127.0.0.1, fork WORLD processes, and in each
 * connect a communicator (rank r on node NODES[r], SESSION) and run BODY.
 * PIDS receives the children's ids. A child that cannot connect exits
 * with 99. Returns 0 or -1 (fork or listen failed; children already
 * started are killed).
 */
int harness_spawn(int world, const uint32_t *nodes, const char *session,
		  harness_body_fn body, void *arg, pid_t *pids);

/* Wait for the children; STATUS[r] receives each waitpid() status.
 * Children still running after TIMEOUT_S seconds are killed (SIGKILL). */
void harness_wait(int world, const pid_t *pids, int *status, int timeout_s);

/* Zeroed memory shared with the children forked afterwards. */
void *harness_shared(size_t bytes);

/* CLOCK_MONOTONIC in seconds: comparable between processes. */
double harness_now(void);

/* Whether /dev/shm holds an entry whose name contains NEEDLE. */
int harness_shm_left(const char *needle);

#endif

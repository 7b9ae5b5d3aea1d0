/*
 * What a blocked collective of the CPU backend keeps an eye on besides its
 * own progress: the abort flag and the inactivity limit. Both transports
 * (shared memory and the TCP ring) wait through it, so a collective never
 * outlives its generation, whichever transport it is blocked in.
 *
 * Dead peers are the transports' business: only they know whether the
 * peer behind a closed socket still owed this rank something (failure)
 * or had simply finished the collective and exited (no failure).
 */
#ifndef DPT_WORKER_CPU_WATCH_H
#define DPT_WORKER_CPU_WATCH_H

#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>

#define DPT__WATCH_MAX_FDS 4

struct dpt__cpu_watch {
	atomic_int aborted; /* set once by dpt__cpu_comm_abort, never reset */
	int wake_fd;	    /* eventfd written by the abort: ends any poll() */
	/* A wait that sees no progress for this long gives up with
	 * DPT_EPEERLOST: the peer is alive but silent (stopped, hung).
	 * <= 0: no limit. */
	int timeout_ms;
};

/*
 * Poll FDS[0..NFDS) (NFDS <= DPT__WATCH_MAX_FDS) together with the abort
 * eventfd for at most TIMEOUT_MS (0: just look, -1: no limit). Returns
 * DPT_EGENERATION once aborted, DPT_ESYS if poll() fails, otherwise 0
 * with FDS[].revents set (all zero on timeout).
 */
int dpt__cpu_watch_poll(struct dpt__cpu_watch *w, struct pollfd *fds, int nfds,
			int timeout_ms);

#endif

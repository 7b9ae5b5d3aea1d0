/*
 * Shared-memory collectives among the ranks of one node.
 *
 * One segment per node and generation holds a small header (one sequence
 * word per local rank, a futex word) and two buffers of LOCAL_WORLD slots
 * each. Operations move data in chunks that fill one buffer; chunks
 * alternate between the two buffers so that a rank can fill the next
 * chunk while slower ranks still read the previous one.
 *
 * Synchronisation is by sequence numbers rather than barriers: every
 * chunk of every operation has three phases (input published, result
 * published, done reading), and rank j's sequence word says how far it
 * got. A waiter spins briefly, then sleeps on the futex word; whoever
 * publishes wakes sleepers. Every rank runs the same operations with the
 * same sizes, so the numbering stays in step without any messages.
 *
 * Failures: a rank that fails a collective sets the segment's dead flag,
 * and waiters return DPT_EPEERLOST; a rank killed outright cannot set
 * anything, so waiters also watch sockets to their peers (see
 * dpt__shm_watch_peers).
 */
#ifndef DPT_WORKER_CPU_SHM_H
#define DPT_WORKER_CPU_SHM_H

#include <stddef.h>

#include <dptrain/dptrain.h>

#include "cpu_watch.h"

struct dpt__shm;

/*
 * Create (local rank 0) or attach to (the others) the segment NAME for
 * LOCAL_WORLD ranks with slots of SLOT_BYTES (a multiple of the page
 * size). The creator makes a new segment, mode 0600, and prefaults the
 * memory so that no collective pays for first touches; a NAME that exists
 * is left alone (DPT_EEXIST: draw another name). An attacher maps only a
 * segment of its own user that others cannot open (else DPT_EAUTH).
 * The caller owns *OUT (dpt__shm_destroy) and must dpt__shm_unlink the
 * name once every rank has attached.
 * Returns 0, DPT_EEXIST, DPT_ESYS (shm_open, ftruncate, mmap failed),
 * DPT_ENOMEM, DPT_EAUTH or DPT_EPROTO (an attacher found a segment of
 * another layout).
 */
int dpt__shm_create(struct dpt__shm **out, const char *name, int local_world,
		    size_t slot_bytes);
int dpt__shm_attach(struct dpt__shm **out, const char *name, int local_world,
		    int local_rank);
void dpt__shm_unlink(const char *name);
/* Unmaps; accepts NULL; nulls *S. */
void dpt__shm_destroy(struct dpt__shm **s);

/*
 * Reduce COUNT elements of every local rank's SEND (SUM, then divided by
 * DIVISOR) into RECV of local rank ROOT, or of every rank when ROOT is -1.
 * RECV of the other ranks is not touched. SEND may equal RECV.
 */
int dpt__shm_reduce(struct dpt__shm *s, struct dpt__cpu_watch *w,
		    const void *send, void *recv, size_t count,
		    enum dpt_dtype dtype, unsigned divisor, int root);
/* Copy BYTES of BUF at local rank ROOT into BUF at every other rank. */
int dpt__shm_bcast(struct dpt__shm *s, struct dpt__cpu_watch *w, void *buf,
		   size_t bytes, int root);
/*
 * Copy BYTES from SEND of local rank j to RECV + OFFSETS[j] of local rank
 * ROOT, or of every rank when ROOT is -1 (a rank does not copy its own
 * block: the caller puts it in place). OFFSETS has LOCAL_WORLD entries.
 */
int dpt__shm_gather(struct dpt__shm *s, struct dpt__cpu_watch *w,
		    const void *send, void *recv, size_t bytes,
		    const size_t *offsets, int root);

/*
 * FDS[j] (LOCAL_WORLD entries) is a socket to local rank j that carries
 * nothing after set-up, or -1: its end of file means that rank's process
 * is gone. A waiter that still needs a phase from such a rank fails with
 * DPT_EPEERLOST; a rank that had published all that was needed from it
 * and then exited is no failure. FDS stays the caller's and must outlive
 * the segment.
 */
void dpt__shm_watch_peers(struct dpt__shm *s, const int *fds);

/*
 * Mark the segment dead so that every local rank's waits, now and later,
 * return DPT_EPEERLOST; wakes the sleepers. For a rank that gives up on
 * a collective: its peers would otherwise wait for it.
 */
void dpt__shm_fail(struct dpt__shm *s);
/* Wake every sleeper of the node so that it rechecks its watch (abort).
 * Never blocks; safe from any thread. */
void dpt__shm_wake(struct dpt__shm *s);

#endif

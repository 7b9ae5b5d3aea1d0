/*
 * The TCP ring among the leaders of the nodes (one rank per node).
 *
 * Every operation is a pair of byte streams: what this node sends to the
 * next node and what it receives from the previous one. In a ring, what
 * a node sends after its own first step is exactly what it received in
 * the step before (a partial sum to add to, or data to pass on), so the
 * send stream may run ahead of the processed receive stream by no more
 * than the node's own first step. With that single credit rule the
 * reduce-scatter and all-gather phases, the steps within them and the
 * chunks within the steps all pipeline, and both directions of both
 * sockets stay busy: one thread, non-blocking sockets and poll().
 */
#ifndef DPT_WORKER_CPU_RING_H
#define DPT_WORKER_CPU_RING_H

#include <stddef.h>

#include <dptrain/dptrain.h>

#include "cpu_watch.h"

struct dpt__ring_piece;

struct dpt__ring {
	int send_fd; /* to the next node's leader; not owned */
	int recv_fd; /* from the previous node's leader; not owned */
	int pos;     /* this node's place on the ring */
	int nodes;
	unsigned char *stage; /* received operands of a reduction */
	size_t stage_bytes;
	struct dpt__ring_piece *send; /* the streams of the operation */
	struct dpt__ring_piece *recv;
};

/*
 * Embedded lifecycle. Init allocates the staging buffer and the stream
 * descriptions for rings of NODES nodes and WORLD ranks in all; the
 * sockets stay the caller's. Returns 0 or DPT_ENOMEM. Release accepts an
 * initialised or zeroed ring.
 */
int dpt__ring_init(struct dpt__ring *r, int send_fd, int recv_fd, int pos,
		   int nodes, int world);
void dpt__ring_release(struct dpt__ring *r);

/*
 * Sum COUNT elements of SEND over the nodes into RECV, divided by DIVISOR
 * (1 for a sum). SEND may equal RECV.
 */
int dpt__ring_allreduce(struct dpt__ring *r, struct dpt__cpu_watch *w,
			const void *send, void *recv, size_t count,
			enum dpt_dtype dtype, unsigned divisor);
/* Copy BYTES of BUF from the node at ring position ROOT to every node. */
int dpt__ring_bcast(struct dpt__ring *r, struct dpt__cpu_watch *w, void *buf,
		    size_t bytes, int root);
/*
 * Complete RECV, which holds one BLOCK per rank, from the blocks that
 * each node holds: node i's ranks are MEMBERS[FIRST[i] .. FIRST[i+1]),
 * and rank m's block is at RECV + m * BLOCK.
 */
int dpt__ring_allgather(struct dpt__ring *r, struct dpt__cpu_watch *w,
			void *recv, size_t block, const int *first,
			const int *members);

#endif

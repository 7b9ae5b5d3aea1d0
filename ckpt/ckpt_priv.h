/*
 * The checkpoint object of libdptrain (struct dpt_ckpt) and what the files
 * of the checkpoint API share: ckpt/ckpt.c (the object, registration, the
 * periodic decision, the public entry points), ckpt/save.c, ckpt/commit.c
 * and ckpt/load.c.
 * Private to them: libdptckpt and the dptrain tool know ckpt/ckpt_int.h.
 */
#ifndef DPT_CKPT_CKPT_PRIV_H
#define DPT_CKPT_CKPT_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>

#include "ckpt_int.h"

/* The nice value of the background threads: the writer, the retention. */
#define DPT__CKPT_WRITER_NICE 10

/* A registered tensor (dpt_ckpt_register): NAME is owned, DATA is the
 * caller's. */
struct dpt__ckpt_reg {
	char *name;
	enum dpt_dtype dtype;
	enum dpt_ckpt_kind kind;
	int ndim;
	uint64_t shape[DPT__CKPT_MAXDIM];
	struct dpt__box local;
	void *data;
	int device; /* the CUDA device of DATA; -1: host memory */
};

/* The checkpoint object, from dpt_ckpt_new to dpt_ckpt_destroy. */
struct dpt_ckpt {
	struct dpt_ctx *ctx;
	struct dpt__storage *st;
	int keep_last;
	uint64_t keep_every;
	enum dpt_ckpt_busy busy;
	uint64_t block;
	/* dpt_ckpt_step saves every EVERY_STEPS steps (DPTRAIN_CKPT_EVERY
	 * "Nsteps"; 0: only when the coordinator says SAVE or STOP). */
	uint64_t every_steps;
	/* --dp-ckpt-every=auto (DPTRAIN_CKPT_EVERY=auto): rank 0 asks for a
	 * periodic save (VOTE flag SAVE, which the coordinator passes on to
	 * every rank in the same VOTE_DONE) once the interval of
	 * dpt__ckpt_auto_interval has passed since its last save started,
	 * and only when no save is pending: a save due while the previous
	 * one is still written would wait for it, a stall of its own.
	 * MTBF_S: the job's (DPTRAIN_MTBF); MIN_S: the site's floor
	 * (DPTRAIN_MIN_CKPT_INTERVAL); COST_S: the average cost of the
	 * committed saves, 0 before the first; LAST_SAVE_NS: when the last
	 * save started (dpt_ckpt_new before the first); SAVE_STALL_NS: the
	 * stall of the save in flight, to which its commit is added. */
	bool auto_every;
	double mtbf_s, min_s, cost_s;
	uint64_t last_save_ns, save_stall_ns;

	struct dpt__ckpt_reg *regs;
	size_t nregs;

	/* The save in flight: from dpt_ckpt_save to dpt_ckpt_wait. */
	bool pending;
	int io_rc;
	/* What this rank logged when IO_RC was set (the writer's thread
	 * logs it), for dpt_last_error() in the thread that waits. */
	char io_msg[512];
	/* The outcome of the last commit that failed: every rank gave the
	 * step up alike (a rank's shard or rank 0's manifest failed: not a
	 * broken collective), on FAILED_RANKS ranks, the lowest with
	 * FAILED_FIRST. COMMITTED: the newest step committed or loaded by
	 * this object, -1 for none. */
	bool abandoned;
	uint32_t failed_ranks;
	int failed_first;
	int64_t committed;
	/* The writer thread, started once and woken for each save: a thread
	 * created by the save would start at the caller's priority and could
	 * take its core before the save returns (seen: up to 9 ms). WORK is
	 * set by the save and cleared by the writer when the shard is
	 * written or failed; QUIT ends the thread. Under MU. WRITER_PID: the
	 * process whose thread it is, 0 for none (a child of fork() has
	 * none). */
	bool work, quit;
	pid_t writer_pid;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* Retention after a commit, on rank 0: a thread of its own with a
	 * storage handle of its own (opened at the first retention, with
	 * ST's options SO), so that dpt_ckpt_wait returns once the step is
	 * committed. Deleting a step can take a second (measured: 1.1 s for
	 * 2 GiB on ext4 mounted with discard) that the other ranks would
	 * wait for at their next collective. GC_PID: the process whose
	 * retention thread is running or not yet joined, 0 for none. */
	struct dpt__storage_opts so;
	struct dpt__storage *gc_st;
	pid_t gc_pid;
	pthread_t gc_thread;
	int rank, world;
	struct dpt__manifest frag; /* this rank's part: one file or none */
	unsigned char *snap;	   /* the snapshot, allocated once, reused */
	uint64_t snap_cap;
	bool snap_pinned, snap_pin_tried; /* for device tensors' copies */
	uint64_t data_len;

	/* The device of the device tensors (one for all), -1 for none; the
	 * stream their snapshot is copied on. */
	int device;
	void *cuda_stream;

	/* Whether rank 0 said that the run starts from step 0. */
	bool told_fresh;
	struct dpt__manifest loaded; /* owns what dpt_ckpt_info points to */
	/* What dpt_ckpt_contents points to. */
	struct dpt__manifest inspected;
	struct dpt_ckpt_entry *entries;
	struct dpt_ckpt_stats stats;
};

/* ---- The save (ckpt/save.c). */

/* Frees the snapshot buffer, unpinned first when it was pinned. */
void dpt__ckpt_free_snapshot(struct dpt_ckpt *ck);

/* Waits until the writer has finished the shard of the save in flight. */
void dpt__ckpt_join_writer(struct dpt_ckpt *ck);

/* Ends the writer thread, if this process started it. */
void dpt__ckpt_stop_writer(struct dpt_ckpt *ck);

/* 0 when STEP is committed in ST (has a manifest), DPT_ENOENT when not. */
int dpt__ckpt_manifest_exists(struct dpt__storage *st, uint64_t step);

/* dpt_ckpt_save, META of this library's size: snapshot, then the writer. */
int dpt__ckpt_save(struct dpt_ckpt *ck, const struct dpt_ckpt_meta *meta);

/* ---- The commit (ckpt/commit.c). */

/* Waits for the retention thread, if this process started one. */
void dpt__ckpt_join_retention(struct dpt_ckpt *ck);

/* dpt__vote of every rank's result MINE (alone without a context). */
int dpt__ckpt_vote(struct dpt_ckpt *ck, int mine, uint32_t *failed, int *first);

/* Commits the periodic save in flight; a step given up is only logged. */
int dpt__ckpt_settle(struct dpt_ckpt *ck);

/* ---- The load (ckpt/load.c). */

/* dpt_ckpt_load, INFO (may be NULL) of this library's size. */
int dpt__ckpt_load(struct dpt_ckpt *ck, uint64_t step,
		   struct dpt_ckpt_info *info);

/* dpt_ckpt_inspect, OUT of this library's size. */
int dpt__ckpt_inspect(struct dpt_ckpt *ck, uint64_t step,
		      struct dpt_ckpt_contents *out);

#endif

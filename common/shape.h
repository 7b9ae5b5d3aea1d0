/*
 * The grammar of a run's accepted shapes (doc/shapes.md, "What the user
 * states"): "1x3-8,2x8" is one node of 3 to 8 GPUs or two nodes of 8;
 * "1-2x0:4" one or two nodes of 4 CPU tasks. The plugin refuses a bad
 * list at submission with it; the coordinator expands it into the
 * concrete shapes it chooses from (coordinator/shape_choice.h).
 */
#ifndef DPT_COMMON_SHAPE_H
#define DPT_COMMON_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a list is, for the messages that refuse one. */
#define DPT_SHAPE_FORMS                                                        \
	"NODESxGPUS or NODESx0:TASKS, each count a number or a range LO-HI, "  \
	"comma-separated (e.g. 1x3-8,2x8 or 1-2x0:4)"

#define DPT_SHAPES_MAX		16   /* shapes in a list */
#define DPT_SHAPES_CONCRETE_MAX 64   /* concrete shapes a list expands to */
#define DPT_SHAPE_MAX_GPUS	64   /* GPUs a node */
#define DPT_SHAPE_MAX_TASKS	1024 /* CPU tasks a node */

/* One shape of the list: counts from LO to HI (equal when not a range). */
struct dpt__shape_range {
	long nodes_lo, nodes_hi;
	long gpus_lo, gpus_hi; /* 0: a CPU shape */
	long tasks;	       /* CPU shapes: tasks a node; else 0 */
};

struct dpt__shapes {
	int n;
	struct dpt__shape_range r[DPT_SHAPES_MAX];
};

/* A concrete shape: one task a GPU, or TASKS CPU tasks a node. */
struct dpt__shape {
	long nodes;
	long gpus;
	long tasks;
};

/* What a run measured at one world size: global steps a second (the
 * global batch is the same at every size, doc/sampler.md). */
struct dpt__rate {
	long world;
	double steps_per_s;
};

/* The world size of S: its nodes times its tasks a node. */
long dpt__shape_world(const struct dpt__shape *s);

/*
 * dpt__shapes_parse - parse TEXT into *OUT. 0, or DPT_EINVAL with the
 * reason (what is wrong and the form expected) in ERR (SIZE bytes).
 */
int dpt__shapes_parse(const char *text, struct dpt__shapes *out, char *err,
		      size_t size);

/*
 * dpt__shapes_expand - the concrete shapes of LIST into OUT (at most MAX),
 * in the list's order, each range from its low end, a shape listed twice
 * once. With GLOBAL_BATCH > 0, only the shapes whose world divides it.
 * Returns how many (at most MAX: the rest is dropped).
 */
int dpt__shapes_expand(const struct dpt__shapes *list, long global_batch,
		       struct dpt__shape *out, int max);

/* The global batch for dpt__shapes_expand from the user's (--dp-global-
 * batch) and the program's declaration (dpt_set_global_batch), 0 where
 * not given: a world divides both exactly when it divides their greatest
 * common divisor. 0 when neither is given. */
long dpt__shape_batch(long user, uint64_t program);

/* "1 node x 3 GPUs", "2 nodes x 8 GPUs", "2 nodes x 4 tasks" into BUF;
 * returns BUF. */
const char *dpt__shape_format(const struct dpt__shape *s, char *buf,
			      size_t size);

/* S as --dp-shapes writes it, "2x8" or "2x0:4", into BUF; returns BUF. */
const char *dpt__shape_spec(const struct dpt__shape *s, char *buf, size_t size);

/* Whether A and B are one shape: the same nodes and GPUs a node, and,
 * without GPUs, the same tasks a node (with GPUs, one task a GPU). */
bool dpt__shape_equal(const struct dpt__shape *a, const struct dpt__shape *b);

#endif

/*
 * The step's key-value store (doc/protocol.md, "Step key-value store"):
 * KV_PUT and KV_GET from clients that need not be members, answered
 * through the sender the store is given. Independent of the
 * generation state machine in coord.c.
 */
#ifndef DPT_COORDINATOR_KV_H
#define DPT_COORDINATOR_KV_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define DPT_KV_KEYS_MAX	   64
#define DPT_KV_WAITING_MAX 4096

struct dpt__kv;
struct dpt__coord_sender;

/* Replies go through SENDER, which must outlive the store (the
 * coordinator's own copy). Returns 0 or DPT_ENOMEM. */
int dpt__kv_new(struct dpt__kv **out, const struct dpt__coord_sender *sender);
/* Accepts NULL; nulls *KV. */
void dpt__kv_destroy(struct dpt__kv **kv);

/* The value stored under KEY, or NULL; valid until the next put. */
const char *dpt__kv_value(struct dpt__kv *kv, const char *key);

/* A decoded KV_PUT or KV_GET from routing identity ID; replies at once or,
 * for a KV_GET of a key not stored yet, when it is put or times out. */
void dpt__kv_on_message(struct dpt__kv *kv, const uint8_t *id, size_t id_len,
			const struct dpt__msg *m, int64_t now);

/* Answer the waiting KV_GETs whose wait is over. */
void dpt__kv_on_tick(struct dpt__kv *kv, int64_t now);

#endif

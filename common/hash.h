/*
 * FNV-1a, 64 bits: a fast hash of a few bytes (routing identities, session
 * names, fingerprints in logs). Not for anything an attacker chooses to
 * collide with where that matters.
 */
#ifndef DPT_COMMON_HASH_H
#define DPT_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

#define DPT_FNV1A_INIT 0xcbf29ce484222325ull

/* H (DPT_FNV1A_INIT to start) extended by the N bytes at P. */
static inline uint64_t dpt__fnv1a(const void *p, size_t n, uint64_t h)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

#endif

/*
 * Why the coordinator replaces libsodium's guarded allocator.
 *
 * libzmq 4.3 keeps each CURVE connection's key material in memory from
 * sodium_malloc(), which maps guard pages around every allocation and
 * mlock()s and mprotect()s it: three or four system calls and a TLB
 * shootdown per allocation, and a CURVE handshake makes several. Measured
 * on the 2-vCPU VM of doc/protocol.md's benchmark, that was two thirds of
 * the cost of a handshake: 4096 workers took 8 s to connect with it and 3 s
 * without. The coordinator is the one process that handshakes with every
 * worker of a job, so it defines these three functions and the dynamic
 * linker binds libzmq's calls to them (an executable's symbols come first).
 *
 * What is kept: each block is wiped on free. What is lost: guard pages and
 * mlock() for per-connection keys; the long-term keys were never in such
 * memory (libzmq copies them into plain option storage). Set
 * DPTRAIN_SODIUM_MALLOC=1 to get libsodium's allocator back, to measure or
 * to compare.
 *
 * Only the coordinator and the rendezvous benchmark link this file; the
 * worker library never does, since a library must not replace symbols in
 * the program that loads it.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define HEADER 16 /* keeps the 16-byte alignment of malloc */

void *sodium_malloc(size_t size) EXPORT;
void *sodium_allocarray(size_t count, size_t size) EXPORT;
void sodium_free(void *ptr) EXPORT;

static struct {
	pthread_once_t once;
	void *(*malloc_fn)(size_t);
	void *(*allocarray_fn)(size_t, size_t);
	void (*free_fn)(void *);
} real = {.once = PTHREAD_ONCE_INIT};

/* The choice is made once, before the first allocation, so that every
 * block is freed by the allocator that made it. */
static void choose(void)
{
	const char *v = getenv("DPTRAIN_SODIUM_MALLOC");

	if (!v || strcmp(v, "1") != 0)
		return;
	real.malloc_fn = (void *(*)(size_t))dlsym(RTLD_NEXT, "sodium_malloc");
	real.allocarray_fn = (void *(*)(size_t, size_t))dlsym(
		RTLD_NEXT, "sodium_allocarray");
	real.free_fn = (void (*)(void *))dlsym(RTLD_NEXT, "sodium_free");
	if (!real.malloc_fn || !real.allocarray_fn || !real.free_fn)
		real.malloc_fn = NULL;
}

void *sodium_malloc(size_t size)
{
	unsigned char *p;

	pthread_once(&real.once, choose);
	if (real.malloc_fn)
		return real.malloc_fn(size);
	if (size > SIZE_MAX - HEADER)
		return NULL;
	p = malloc(size + HEADER);
	if (!p)
		return NULL;
	memcpy(p, &size, sizeof(size));
	return p + HEADER;
}

void *sodium_allocarray(size_t count, size_t size)
{
	pthread_once(&real.once, choose);
	if (real.malloc_fn)
		return real.allocarray_fn(count, size);
	if (size && count > SIZE_MAX / size)
		return NULL;
	return sodium_malloc(count * size);
}

void sodium_free(void *ptr)
{
	unsigned char *p;
	size_t size;

	if (!ptr)
		return;
	pthread_once(&real.once, choose);
	if (real.malloc_fn) {
		real.free_fn(ptr);
		return;
	}
	p = (unsigned char *)ptr - HEADER;
	memcpy(&size, p, sizeof(size));
	explicit_bzero(ptr, size);
	free(p);
}

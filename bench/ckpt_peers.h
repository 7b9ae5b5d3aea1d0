/*
 * What bench/ckpt.c (the job, its workers and the figures) and
 * bench/ckpt_peers.c (the peers: fio, dd and curl moving the same bytes,
 * and xxh3's speed) share. Private to bench/ckpt.
 */
#ifndef DPT_BENCH_CKPT_PEERS_H
#define DPT_BENCH_CKPT_PEERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define MIB (1024.0 * 1024.0)

/* The command line, checked: what the job and the peers move where. */
struct bench_config {
	uint64_t size;
	int ranks, load_ranks, saves, keep;
	double replicated;
	double interval; /* seconds idle after each save */
	char dir[8192];	 /* the checkpoints' root URI */
	char work[4000]; /* a local directory: secret, endpoint, dd files */
	bool buffered;
	const char *s3; /* --s3 URI: save to and load from S3 */
	size_t part_size;
	int inflight;
};

static inline double bench_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Says WHAT on stderr, removes the work directory (when this process made
 * it) and exits 1. In bench/ckpt.c. */
_Noreturn void bench_die(const char *what);

/* Drops the page cache of every file under PATH (after the fsync of
 * the save, the pages are clean): the load reads from the disk. */
void bench_drop_cache(const char *path);

/*
 * Seconds for the storage's best write of C's size under DIR: fio with 1
 * job and with as many jobs as ranks, the faster (dd when fio is missing:
 * one stream and as many as ranks). Leaves DDFILE, a file of the size,
 * for bench_peer_read.
 */
double bench_peer_write(const struct bench_config *c, const char *dir,
			const char *ddfile);

/* The same for reading, with as many jobs as loading ranks. */
double bench_peer_read(const struct bench_config *c, const char *dir,
		       const char *ddfile);

/* XXH3's throughput on this machine in GB/s (1 MiB blocks, one thread),
 * the ceiling of the checksums. */
double bench_xxh3_gbps(void);

/* The curl side of --s3: a file of the state's size, PUT as one object and
 * fetched back with one GET, signed by curl (--aws-sigv4). */
struct bench_s3peer {
	char url[8192];	 /* the peer object */
	char conf[4200]; /* curl's options, credentials included (mode 0600) */
	char file[4200]; /* the bytes */
};

/* BUCKET and KEY (relative to the bucket) give the peer's URL; the
 * endpoint, region and credentials come from the environment like the s3
 * backend's. Writes the curl configuration and the bytes under C's work
 * directory; exits through bench_die on failure. */
void bench_s3peer_init(struct bench_s3peer *p, const struct bench_config *c,
		       const char *bucket, const char *key);

/* Seconds for one curl PUT (or GET) of the peer object. */
double bench_s3peer_run(const struct bench_s3peer *p, bool put);

#endif

/*
 * bench/ckpt: sharded checkpoints against the file system's own limits,
 * measured in the same run on the same file system.
 *
 *   save   a state of --size bytes saved by --ranks worker processes
 *          (a real coordinator, libdptrain's CPU backend) to file://DIR,
 *          throughput against the storage's best write of as many bytes:
 *          fio (O_DIRECT, 4 MiB blocks, fsync) with 1 job and with --ranks
 *          jobs, the faster (dd streams when fio is not installed)
 *   stall  the time dpt_ckpt_save blocks training, against a memcpy of the
 *          bytes the rank snapshots into a warm buffer
 *   load   the newest step loaded by --load-ranks ranks (resharding), page
 *          cache of the shards dropped first, throughput against fio's
 *          best read (1 or --load-ranks jobs, O_DIRECT)
 *   read amplification  bytes read by all ranks over bytes their boxes need
 *
 * With --s3 s3://bucket[/prefix] the same job saves to and loads from S3
 * (under a new prefix bench-XXXXXXXX, deleted at the end; endpoint, region
 * and credentials from the environment, as the s3 backend reads them:
 * doc/storage.md). The peers are then single-stream curl transfers of the
 * same number of bytes to the same server in the same run: one PUT
 * (`curl -T`, SigV4 by curl) of one object, and one GET of it to
 * /dev/null. Last line: ckpt_s3 save_ratio=A load_ratio=B
 *
 * The peers (fio, dd, curl, and XXH3's speed) are bench/ckpt_peers.c's.
 *
 * The state is what data parallel training with Adam holds: parameters
 * (--replicated, a fraction of the size, fp32, replicated), the rest
 * split in two sharded fp32 tensors (moments m and v, ZeRO-1 style). The
 * default is everything sharded (FSDP/ZeRO-3).
 *
 * Last line: ckpt save_ratio=A stall_ratio=B load_ratio=C read_amplification=D
 *
 * Retention keeps the 2 newest steps (--keep K): from the third save on,
 * rank 0's background thread retires a step while the next save runs.
 * Saves follow each other at once unless --interval S puts S seconds of
 * idle "training" (a GPU job's CPU mostly waits) after each.
 *
 * Usage: bench/ckpt [--size MiB] [--ranks N] [--load-ranks M] [--saves K]
 *                   [--keep K] [--interval S] [--replicated F] [--dir DIR]
 *                   [--buffered]
 *                   [--s3 URI [--part-size MiB] [--inflight N]]
 */
#define _GNU_SOURCE /* nftw */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dptrain/ckpt.h>
#include <dptrain/dptrain.h>

#include "bench/bench.h"
#include "bench/join.h"
#include "bench/ckpt_peers.h"
#include "ckpt/ckpt_int.h"
#include "storage/storage.h"

#ifndef DPT_COORDINATOR_BIN
#define DPT_COORDINATOR_BIN "coordinator/dptrain-coordinator"
#endif

/* The work directory (dd files, the run: gigabytes) and the process that
 * made it: a failed run removes it too. */
static const char *work_dir;
static pid_t work_owner;

static int remove_entry(const char *path, const struct stat *sb, int type,
			struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if ((type == FTW_DP ? rmdir(path) : unlink(path)) != 0) {
		fprintf(stderr, "bench/ckpt: cannot remove %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	return 0;
}

/* Removes the work directory and everything under it; 0 or -1 (said). */
static int remove_work(const char *dir)
{
	return nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

_Noreturn void bench_die(const char *what)
{
	fprintf(stderr, "bench/ckpt: %s\n", what);
	if (work_dir && getpid() == work_owner && remove_work(work_dir) == 0)
		fprintf(stderr, "bench/ckpt: removed %s\n", work_dir);
	exit(1);
}

/* ------------------------------------------------------------ the state */

struct state {
	float *params, *m, *v;
	uint64_t np, nm;     /* elements: params, each moment */
	uint64_t moff, mcnt; /* this rank's box of m and v */
};

static void state_sizes(const struct bench_config *c, uint64_t *np,
			uint64_t *nm)
{
	uint64_t elems = c->size / 4;

	*np = (uint64_t)(c->replicated * (double)elems);
	*nm = (elems - *np) / 2;
}

static int state_register(struct dpt_ckpt *ck, const struct bench_config *c,
			  struct state *s, int rank, int world)
{
	int rc = 0;

	state_sizes(c, &s->np, &s->nm);
	s->moff = s->nm * (uint64_t)rank / (uint64_t)world;
	s->mcnt = s->nm * (uint64_t)(rank + 1) / (uint64_t)world - s->moff;
	s->params = malloc(s->np * 4 + 4);
	s->m = malloc(s->mcnt * 4 + 4);
	s->v = malloc(s->mcnt * 4 + 4);
	if (!s->params || !s->m || !s->v)
		bench_die("out of memory");
	/* Touch everything: a state in use is mapped. */
	for (uint64_t i = 0; i < s->np; i++)
		s->params[i] = (float)i;
	for (uint64_t i = 0; i < s->mcnt; i++)
		s->m[i] = s->v[i] = (float)(s->moff + i);
	if (s->np)
		rc = dpt_ckpt_register(ck, &(struct dpt_ckpt_tensor){
						   .name = "params",
						   .dtype = DPT_FLOAT32,
						   .kind = DPT_CKPT_REPLICATED,
						   .ndim = 1,
						   .shape = &s->np,
						   .data = s->params});
	/* The optimizer's two moments, sharded alike. */
	for (int i = 0; i < 2 && !rc; i++)
		rc = dpt_ckpt_register(ck,
				       &(struct dpt_ckpt_tensor){
					       .name = i ? "adam.v" : "adam.m",
					       .dtype = DPT_FLOAT32,
					       .kind = DPT_CKPT_SHARDED,
					       .ndim = 1,
					       .shape = &s->nm,
					       .offset = &s->moff,
					       .count = &s->mcnt,
					       .data = i ? s->v : s->m});
	return rc;
}

/* ------------------------------------------------------------ workers */

/* What a worker reports, one line on the results pipe. */
static void report(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void report(int fd, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0 && write(fd, line, (size_t)n) != n)
		_exit(3);
}

static int worker(const struct bench_config *c, const char *endpoint,
		  const char *secret, int task, int world, bool load, int fd)
{
	struct dpt_ckpt_opts co;
	struct dpt_ckpt *ck = NULL;
	struct dpt_ctx *ctx = NULL;
	struct state s;
	int rc, rank;

	rc = bench_join(&ctx, endpoint, secret, task);
	if (rc)
		return 1;
	rank = dpt_rank(ctx);
	dpt_ckpt_opts_default(&co);
	co.uri = c->dir;
	co.run = "run";
	co.keep_last = c->keep;
	co.buffered_io = c->buffered;
	co.part_size = c->part_size;
	co.max_inflight = c->inflight;
	rc = dpt_ckpt_new(&ck, ctx, &co);
	if (!rc)
		rc = state_register(ck, c, &s, rank, world);
	if (rc)
		return 1;
	if (!load) {
		/* The peer of the stall: a memcpy of the bytes this rank
		 * snapshots (its box of the moments, its share of the
		 * parameters) into a buffer already mapped, timed just before
		 * each save under the same load (every rank copies at once). */
		uint64_t mine = s.mcnt * 8, poff = 0, pcnt = 0;
		char *warm;

		if (s.np) {
			poff = s.np * (uint64_t)rank / (uint64_t)world;
			pcnt = s.np * (uint64_t)(rank + 1) / (uint64_t)world -
			       poff;
		}
		mine += pcnt * 4;
		warm = malloc(mine + 1);
		if (!warm || dpt_ckpt_prepare(ck))
			bench_die("out of memory");
		memset(warm, 1, mine + 1);
		for (int k = 1; k <= c->saves && !rc; k++) {
			struct dpt_ckpt_stats st;
			double t0, t1, t2, m0, m1, mc;

			/* An untimed copy first: the first copy after the
			 * previous save's I/O may pay for what the save's own
			 * copy, right after it, would then not. Then the timed
			 * one, started like the save: every rank at once after
			 * a barrier, so that both share the cores alike (a
			 * best-of-two would time the second copy of a rank
			 * whose neighbours had finished: a copy alone). */
			for (int rep = 0; rep < 2 && !rc; rep++) {
				rc = dpt_barrier(ctx);
				m0 = bench_now_s();
				memcpy(warm, s.params + poff, pcnt * 4);
				memcpy(warm + pcnt * 4, s.m, s.mcnt * 4);
				memcpy(warm + pcnt * 4 + s.mcnt * 4, s.v,
				       s.mcnt * 4);
				m1 = bench_now_s();
				mc = m1 - m0;
			}
			rc = rc ? rc : dpt_barrier(ctx);
			t0 = bench_now_s();
			rc = rc ? rc
				: dpt_ckpt_save(ck,
						&(struct dpt_ckpt_meta){
							.step = (uint64_t)k});
			t1 = bench_now_s();
			rc = rc ? rc : dpt_ckpt_wait(ck);
			t2 = bench_now_s();
			dpt_ckpt_stats(ck, &st);
			if (!rc)
				report(fd,
				       "save %d %d %.9f %.9f %.9f %" PRIu64
				       " %.9f\n",
				       k, rank, t0, t1, t2, st.bytes_written,
				       mc);
			if (c->interval > 0)
				usleep((useconds_t)(c->interval * 1e6));
		}
		free(warm);
	} else {
		struct dpt_ckpt_stats st;
		double t0, t1;

		rc = dpt_barrier(ctx);
		t0 = bench_now_s();
		rc = rc ? rc : dpt_ckpt_load(ck, DPT_CKPT_LATEST, NULL);
		t1 = bench_now_s();
		dpt_ckpt_stats(ck, &st);
		for (uint64_t i = 0; !rc && i < s.mcnt; i += 4099)
			if (s.m[i] != (float)(s.moff + i))
				rc = DPT_ECORRUPT;
		if (!rc)
			report(fd,
			       "load %d %.9f %.9f %" PRIu64 " %" PRIu64 "\n",
			       rank, t0, t1, st.bytes_read, st.bytes_needed);
	}
	dpt_ckpt_destroy(&ck);
	dpt_finalize(&ctx);
	return rc ? 1 : 0;
}

/* ------------------------------------------------------------ the job */

static pid_t start_coordinator(int world, const char *secret_file,
			       const char *ep_file)
{
	char w[16];
	pid_t pid;

	snprintf(w, sizeof(w), "%d", world);
	unlink(ep_file);
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0)
			dup2(null,
			     1); /* it prints its endpoint: we read the file */
		execl(DPT_COORDINATOR_BIN, DPT_COORDINATOR_BIN, "--world-size",
		      w, "--bind", "tcp://127.0.0.1:*", "--advertise",
		      "127.0.0.1", "--secret-file", secret_file,
		      "--endpoint-file", ep_file, "--timeout-ms", "30000",
		      "--log-level", "warn", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Runs a job of WORLD workers; their report lines land in OUT. */
static void run_job(const struct bench_config *c, int world, bool load,
		    char *out, size_t outlen)
{
	char secret[65], secret_file[4200], ep_file[4200], endpoint[256] = "";
	unsigned char b[32];
	pid_t coord, pids[64];
	int fds[2], failed = 0;
	size_t len = 0;
	FILE *f;

	if (getrandom(b, sizeof(b), 0) != sizeof(b))
		bench_die("getrandom failed");
	for (int i = 0; i < 32; i++)
		snprintf(secret + 2 * i, 3, "%02x", b[i]);
	snprintf(secret_file, sizeof(secret_file), "%s/secret", c->work);
	snprintf(ep_file, sizeof(ep_file), "%s/endpoint", c->work);
	f = fopen(secret_file, "w");
	if (!f || fprintf(f, "%s\n", secret) < 0 || fclose(f))
		bench_die("cannot write the secret file");
	chmod(secret_file, 0600);
	coord = start_coordinator(world, secret_file, ep_file);
	for (int i = 0; i < 100 && !endpoint[0]; i++) {
		f = fopen(ep_file, "r");
		if (f) {
			if (!fgets(endpoint, sizeof(endpoint), f))
				endpoint[0] = '\0';
			fclose(f);
		}
		endpoint[strcspn(endpoint, "\n")] = '\0';
		if (!endpoint[0])
			usleep(50000);
	}
	if (!endpoint[0])
		bench_die("the coordinator did not start");
	if (pipe(fds))
		bench_die("pipe failed");
	for (int i = 0; i < world; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(fds[0]);
			_exit(worker(c, endpoint, secret, i, world, load,
				     fds[1]));
		}
	}
	close(fds[1]);
	for (;;) {
		ssize_t n = read(fds[0], out + len, outlen - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	out[len] = '\0';
	close(fds[0]);
	for (int i = 0; i < world; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	kill(coord, SIGTERM);
	waitpid(coord, NULL, 0);
	if (failed)
		bench_die("a worker failed (its messages are above)");
}

/* Deletes every object under the S3 root URI (the bench's own prefix). */
static void s3_remove_all(const char *uri)
{
	struct dpt__storage *st = NULL;
	int rc = dpt__storage_open(uri, NULL, &st);

	if (!rc)
		rc = dpt__ckpt_delete_prefix(st, "");
	if (rc)
		fprintf(stderr,
			"bench/ckpt: cannot delete the objects under "
			"%s (%s)\n",
			uri, dpt_strerror(rc));
	dpt__storage_destroy(&st);
}

/* ------------------------------------------------------------ main */

static void usage(void)
{
	fputs("usage: bench/ckpt [--size MiB] [--ranks N] [--load-ranks M] "
	      "[--saves K] [--loads L]\n"
	      "                  [--keep K] [--interval SECONDS] "
	      "[--replicated FRACTION] [--dir DIR] [--buffered]\n"
	      "                  [--s3 s3://BUCKET[/PREFIX] [--part-size MiB] "
	      "[--inflight N]]\n"
	      "--size: at least 64 (rounded down to a multiple of 64); ranks, "
	      "load ranks, saves: 1 to 64 (default: 4, 3, 9);\nloads: at least "
	      "1 (default 2); keep (retention's keep_last): at least 1 "
	      "(default "
	      "2);\ninterval: idle seconds after each save, 0 to 3600 (default "
	      "0); replicated fraction: 0 to below 1\n",
	      stderr);
	exit(2);
}

/* --s3: the root of this run's checkpoints (a new prefix under URI) in
 * C->dir, and the peer object next to it. */
static void s3_setup(struct bench_config *c, struct bench_s3peer *peer)
{
	const char *b = c->s3 + 5, *slash;
	char bucket[256], prefix[2048], key[4096];
	unsigned char r[4];
	size_t pl;

	if (strncmp(c->s3, "s3://", 5) != 0)
		usage();
	slash = strchr(b, '/');
	if (!slash)
		slash = b + strlen(b);
	if (slash == b || (size_t)(slash - b) >= sizeof(bucket))
		bench_die("--s3 needs s3://BUCKET[/PREFIX]");
	snprintf(bucket, sizeof(bucket), "%.*s", (int)(slash - b), b);
	snprintf(prefix, sizeof(prefix), "%s", *slash ? slash + 1 : "");
	pl = strlen(prefix);
	while (pl && prefix[pl - 1] == '/')
		prefix[--pl] = '\0';
	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		bench_die("getrandom failed");
	snprintf(key, sizeof(key), "%s%sbench-%02x%02x%02x%02x", prefix,
		 pl ? "/" : "", r[0], r[1], r[2], r[3]);
	snprintf(c->dir, sizeof(c->dir), "s3://%s/%s", bucket, key);
	if (strlen(key) + sizeof("/curl-peer.bin") <= sizeof(key))
		memcpy(key + strlen(key), "/curl-peer.bin",
		       sizeof("/curl-peer.bin"));
	bench_s3peer_init(peer, c, bucket, key);
}

int main(int argc, char **argv)
{
	struct bench_config c = {.size = 2048ull << 20,
				 .ranks = 4,
				 .load_ranks = 3,
				 .saves = 9,
				 .keep = 2,
				 .replicated = 0};
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
	char cmd[16384], out[65536], ddfile[4200];
	double save_s[64], stall_r[64], peer_w, peer_r, xx;
	double load_s = 1e300, t;
	uint64_t bytes_read = 0, needed = 0;
	struct bench_s3peer peer;
	int nsave = 0, loads = 2;
	char *p;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(argv[i], "--size") && v)
			c.size = strtoull(argv[++i], NULL, 10) << 20;
		else if (!strcmp(argv[i], "--ranks") && v)
			c.ranks = (int)bench_arg(argv[i++], v);
		else if (!strcmp(argv[i], "--load-ranks") && v)
			c.load_ranks = (int)bench_arg(argv[i++], v);
		else if (!strcmp(argv[i], "--saves") && v)
			c.saves = (int)bench_arg(argv[i++], v);
		else if (!strcmp(argv[i], "--keep") && v)
			c.keep = (int)bench_arg(argv[i++], v);
		else if (!strcmp(argv[i], "--interval") && v)
			c.interval = bench_arg(argv[i++], v);
		else if (!strcmp(argv[i], "--loads") && v)
			loads = (int)bench_arg(argv[i++], v);
		else if (!strcmp(argv[i], "--replicated") && v)
			c.replicated = bench_arg(argv[i++], v);
		else if (!strcmp(argv[i], "--dir") && v)
			base = argv[++i];
		else if (!strcmp(argv[i], "--buffered"))
			c.buffered = true;
		else if (!strcmp(argv[i], "--s3") && v)
			c.s3 = argv[++i];
		else if (!strcmp(argv[i], "--part-size") && v)
			c.part_size = (size_t)strtoull(argv[++i], NULL, 10)
				      << 20;
		else if (!strcmp(argv[i], "--inflight") && v)
			c.inflight = (int)bench_arg(argv[i++], v);
		else
			usage();
	}
	if (c.size < (64u << 20) || c.ranks < 1 || c.ranks > 64 ||
	    c.load_ranks < 1 || c.load_ranks > 64 || c.saves < 1 ||
	    c.saves > 64 || c.keep < 1 ||
	    !(c.interval >= 0 && c.interval <= 3600) || loads < 1 ||
	    c.replicated < 0 || c.replicated >= 1 || c.inflight < 0)
		usage();
	c.size = c.size / (64u << 20) * (64u << 20); /* whole dd blocks */
	snprintf(c.work, sizeof(c.work), "%s/dptrain-bench-ckpt.XXXXXX", base);
	if (!mkdtemp(c.work))
		bench_die("cannot create the work directory (--dir)");
	work_dir = c.work;
	work_owner = getpid();
	if (c.s3)
		s3_setup(&c, &peer);
	else
		snprintf(c.dir, sizeof(c.dir), "file://%s", c.work);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("# %" PRIu64 " MiB state (%.0f%% replicated), %d ranks save, %d "
	       "load, %d saves (keeping %d, %.1f s idle after each), in %s%s\n",
	       c.size >> 20, c.replicated * 100, c.ranks, c.load_ranks, c.saves,
	       c.keep, c.interval, c.dir,
	       c.buffered ? ", buffered writes" : "");
	if (c.s3)
		printf("# peer: curl %s\n", peer.url);

	xx = bench_xxh3_gbps();
	printf("xxh3 %.1f GB/s (1 MiB blocks, one thread)\n", xx);

	/* The peers run before and after what they are compared with, and
	 * the faster run counts: a noisy machine then makes the ratios
	 * worse, never better. */
	snprintf(ddfile, sizeof(ddfile), "%s/dd.bin", c.work);
	if (c.s3) {
		peer_w = bench_s3peer_run(&peer, true);
		printf("curl PUT %.0f MiB/s\n", c.size / MIB / peer_w);
	} else {
		peer_w = bench_peer_write(&c, c.work, ddfile);
	}

	run_job(&c, c.ranks, false, out, sizeof(out));
	/* Synchronous training waits for its slowest rank at the next
	 * allreduce: the stall of a save is the longest of the ranks', and
	 * its peer the longest memcpy. */
	for (int k = 1; k <= c.saves; k++) {
		double t0 = 1e300, t2 = 0, stall = 0, copy = 0;
		p = out;
		while ((p = strstr(p, "save "))) {
			int step, rank;
			double a, b, e, mc;
			uint64_t bytes;
			if (sscanf(p, "save %d %d %lf %lf %lf %" SCNu64 " %lf",
				   &step, &rank, &a, &b, &e, &bytes,
				   &mc) == 7 &&
			    step == k) {
				t0 = a < t0 ? a : t0;
				t2 = e > t2 ? e : t2;
				stall = b - a > stall ? b - a : stall;
				copy = mc > copy ? mc : copy;
			}
			p++;
		}
		printf("save %d: %.3f s, %.0f MiB/s; stall %.1f ms, memcpy "
		       "%.1f ms "
		       "(slowest ranks)\n",
		       k, t2 - t0, c.size / MIB / (t2 - t0), stall * 1e3,
		       copy * 1e3);
		save_s[nsave] = t2 - t0; /* buffers: dpt_ckpt_prepare */
		stall_r[nsave++] = stall / copy;
	}

	if (c.s3) {
		t = bench_s3peer_run(&peer, true);
		printf("curl PUT %.0f MiB/s\n", c.size / MIB / t);
		peer_w = t < peer_w ? t : peer_w;
		peer_r = bench_s3peer_run(&peer, false);
		printf("curl GET %.0f MiB/s\n", c.size / MIB / peer_r);
	} else {
		t = bench_peer_write(&c, c.work, ddfile);
		peer_w = t < peer_w ? t : peer_w;
		peer_r = bench_peer_read(&c, c.work, ddfile);
	}

	for (int rep = 0; rep < loads; rep++) {
		double t0 = 1e300, t1 = 0;
		uint64_t r_all = 0, n_all = 0;

		if (!c.s3) {
			snprintf(cmd, sizeof(cmd), "%s/run", c.work);
			bench_drop_cache(cmd);
		}
		run_job(&c, c.load_ranks, true, out, sizeof(out));
		p = out;
		while ((p = strstr(p, "load "))) {
			int rank;
			double a, b;
			uint64_t r, n;
			if (sscanf(p, "load %d %lf %lf %" SCNu64 " %" SCNu64,
				   &rank, &a, &b, &r, &n) == 5) {
				t0 = a < t0 ? a : t0;
				t1 = b > t1 ? b : t1;
				r_all += r;
				n_all += n;
			}
			p++;
		}
		printf("load %d -> %d: %.3f s, %.0f MiB read, %.0f MiB/s\n",
		       c.ranks, c.load_ranks, t1 - t0, r_all / MIB,
		       r_all / MIB / (t1 - t0));
		if (t1 - t0 < load_s) {
			load_s = t1 - t0;
			bytes_read = r_all;
			needed = n_all;
		}
	}
	if (c.s3) {
		t = bench_s3peer_run(&peer, false);
		printf("curl GET %.0f MiB/s\n", c.size / MIB / t);
	} else {
		t = bench_peer_read(&c, c.work, ddfile);
	}
	peer_r = t < peer_r ? t : peer_r;

	if (c.s3)
		s3_remove_all(c.dir);
	remove_work(c.work);
	{
		double save = bench_median(save_s, nsave);
		double stall = bench_median(stall_r, nsave);
		double save_ratio = (c.size / save) / (c.size / peer_w);
		double load_ratio = (bytes_read / load_s) / (c.size / peer_r);
		if (c.s3)
			printf("ckpt_s3 save_ratio=%.2f load_ratio=%.2f "
			       "stall_ratio=%.2f read_amplification=%.2f\n",
			       save_ratio, load_ratio, stall,
			       (double)bytes_read / (double)needed);
		else
			printf("ckpt save_ratio=%.2f stall_ratio=%.2f "
			       "load_ratio=%.2f read_amplification=%.2f\n",
			       save_ratio, stall, load_ratio,
			       (double)bytes_read / (double)needed);
	}
	return 0;
}

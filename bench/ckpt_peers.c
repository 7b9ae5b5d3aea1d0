/*
 * bench/ckpt's peers (bench/ckpt.c's header comment): what the storage
 * does with the same bytes without dptrain, measured in the same run.
 * fio (dd when fio is missing) for a file system, curl for S3; and XXH3's
 * speed, the checksums' ceiling.
 */
#include "config.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "bench/bench.h"
#include "bench/ckpt_peers.h"

/* Seconds that COMMAND (run by sh) takes. */
static double timed_shell(const char *command)
{
	double t0 = bench_now_s();
	if (system(command) != 0) {
		fprintf(stderr, "bench/ckpt: '%s' failed\n", command);
		exit(1);
	}
	return bench_now_s() - t0;
}

/* Drops the page cache of every file under PATH (after the fsync of
 * the save, the pages are clean): the load reads from the disk. */
void bench_drop_cache(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char p[8192];
		struct stat st;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
		if (stat(p, &st))
			continue;
		if (S_ISDIR(st.st_mode)) {
			bench_drop_cache(p);
			continue;
		}
		fd = open(p, O_RDONLY);
		if (fd >= 0) {
			fdatasync(fd);
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			close(fd);
		}
	}
	closedir(d);
}

/* Seconds for STREAMS dd processes to write (files DIR/dd.I) or read
 * (parts of DIR/dd.bin) SIZE bytes together, with O_DIRECT. */
static double parallel_dd(const char *dir, uint64_t size, int streams,
			  bool reading)
{
	uint64_t per = size / (4u << 20) / (uint64_t)streams;
	char cmd[16384];
	size_t n = 0;

	n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, "(");
	for (int i = 0; i < streams && n < sizeof(cmd) - 512; i++) {
		if (reading)
			n += (size_t)snprintf(cmd + n, sizeof(cmd) - n,
					      "dd if='%s/dd.bin' of=/dev/null "
					      "bs=4M skip=%" PRIu64
					      " count=%" PRIu64
					      " iflag=direct status=none & ",
					      dir, per * (uint64_t)i, per);
		else
			n += (size_t)snprintf(
				cmd + n, sizeof(cmd) - n,
				"dd if=/dev/zero of='%s/dd.%d' bs=4M "
				"count=%" PRIu64
				" oflag=direct conv=fsync status=none & ",
				dir, i, per);
	}
	snprintf(cmd + n, sizeof(cmd) - n, "wait)");
	return timed_shell(cmd) * (double)size /
	       (double)(per * (uint64_t)streams * (4u << 20));
}

/*
 * Seconds for fio to move SIZE bytes with JOBS jobs of ENGINE (O_DIRECT,
 * 4 MiB blocks, the files DIR/fio.J.0, an fsync at the end of each job),
 * from the bandwidth fio reports for the group: layout excluded (a read
 * finds the files the write left). -1 when fio is not installed.
 */
static double fio_seconds(const char *dir, uint64_t size, int jobs,
			  const char *engine, bool reading)
{
	char cmd[8400];
	FILE *f;
	double bw = 0;
	char line[512];

	snprintf(cmd, sizeof(cmd),
		 "fio --name=fio --directory='%s' --rw=%s --bs=4M --direct=1 "
		 "--ioengine=%s --size=%" PRIu64 " --numjobs=%d "
		 "--end_fsync=1 --group_reporting --output-format=json "
		 "2>/dev/null",
		 dir, reading ? "read" : "write", engine, size / (uint64_t)jobs,
		 jobs);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	/* "bw_bytes" of the group, in the read or the write section: the
	 * first non-zero one (the other direction reports 0). */
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "\"bw_bytes\" : ");
		double v;

		if (p && sscanf(p + 13, "%lf", &v) == 1 && v > 0 && bw == 0)
			bw = v;
	}
	if (pclose(f) != 0 || bw <= 0)
		return -1;
	return (double)size / bw;
}

/*
 * Seconds for the storage's best write (READING: read) of the size, with
 * RANKS writers (readers): the fastest of fio with 1 job and with RANKS
 * jobs, each synchronous (psync) and with 16 requests in flight per job
 * (libaio): what the storage does at its best, which dptrain's parallel
 * shard writes and reads can reach and one dd stream cannot. Without fio,
 * dd: one stream and RANKS streams. A write also leaves DDFILE, of the
 * size, for dd's read.
 */
static double peer(const struct bench_config *c, const char *dir,
		   const char *ddfile, int ranks, bool reading)
{
	static const char *const engines[] = {"psync", "libaio --iodepth=16"};
	const char *what = reading ? "read" : "write";
	char cmd[8400];
	double best = -1, one, many;

	for (size_t e = 0; e < sizeof(engines) / sizeof(*engines); e++) {
		one = fio_seconds(dir, c->size, 1, engines[e], reading);
		many = one < 0 ? -1
			       : fio_seconds(dir, c->size, ranks, engines[e],
					     reading);
		if (one < 0 || many < 0)
			break;
		printf("fio %s (direct, 4 MiB, %s) 1 job %.0f MiB/s, %d jobs "
		       "%.0f MiB/s\n",
		       what, engines[e], c->size / MIB / one, ranks,
		       c->size / MIB / many);
		if (best < 0 || one < best)
			best = one;
		if (many < best)
			best = many;
	}
	if (best > 0 && reading)
		return best;
	if (best < 0)
		fprintf(stderr, "bench/ckpt: fio not found: the ceiling is "
				"dd's (install fio)\n");
	if (reading)
		snprintf(cmd, sizeof(cmd),
			 "dd if='%s' of=/dev/null bs=64M iflag=direct "
			 "status=none",
			 ddfile);
	else
		snprintf(cmd, sizeof(cmd),
			 "dd if=/dev/zero of='%s' bs=64M count=%" PRIu64
			 " oflag=direct conv=fsync status=none",
			 ddfile, c->size / (64u << 20));
	one = timed_shell(cmd);
	if (best > 0) /* the write of fio's run: DDFILE is there now */
		return best;
	many = parallel_dd(dir, c->size, ranks, reading);
	printf("dd %s (direct) %.0f MiB/s, %d streams %.0f MiB/s\n", what,
	       c->size / MIB / one, ranks, c->size / MIB / many);
	return many < one ? many : one;
}

double bench_peer_write(const struct bench_config *c, const char *dir,
			const char *ddfile)
{
	return peer(c, dir, ddfile, c->ranks, false);
}

double bench_peer_read(const struct bench_config *c, const char *dir,
		       const char *ddfile)
{
	return peer(c, dir, ddfile, c->load_ranks, true);
}

double bench_xxh3_gbps(void)
{
	size_t n = 256u << 20, block = 1u << 20;
	unsigned char *buf = malloc(n);
	double t[5];
	uint64_t sink = 0;

	if (!buf)
		bench_die("out of memory");
	for (size_t i = 0; i < n; i++)
		buf[i] = (unsigned char)(i * 131);
	for (int r = 0; r < 5; r++) {
		double t0 = bench_now_s();
		for (size_t off = 0; off < n; off += block)
			sink ^= XXH3_64bits(buf + off, block);
		t[r] = bench_now_s() - t0;
	}
	free(buf);
	if (sink == 42)
		printf("(unlikely)\n");
	return (double)n / bench_median(t, 5) / 1e9;
}

/* ------------------------------------------------------------ S3 peers */

static const char *env_first(const char *a, const char *b, const char *c)
{
	const char *v = getenv(a);
	if ((!v || !*v) && b)
		v = getenv(b);
	if ((!v || !*v) && c)
		v = getenv(c);
	return v && *v ? v : NULL;
}

static void conf_line(FILE *f, const char *name, const char *value)
{
	if (strpbrk(value, "\"\\\n"))
		bench_die("a credential or setting for curl holds a quote, a "
			  "backslash or a newline");
	fprintf(f, "%s = \"%s\"\n", name, value);
}

/* BUCKET and KEY (relative to the bucket) give the peer's URL; the
 * endpoint, region and credentials come from the environment like the s3
 * backend's (path-style with an explicit endpoint unless
 * DPTRAIN_S3_PATH_STYLE=0, virtual-hosted on AWS). */
void bench_s3peer_init(struct bench_s3peer *p, const struct bench_config *c,
		       const char *bucket, const char *key)
{
	const char *ep = env_first("DPTRAIN_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3",
				   "AWS_ENDPOINT_URL");
	const char *region =
		env_first("AWS_REGION", "AWS_DEFAULT_REGION", NULL);
	const char *ak = getenv("AWS_ACCESS_KEY_ID");
	const char *sk = getenv("AWS_SECRET_ACCESS_KEY");
	const char *token = getenv("AWS_SESSION_TOKEN");
	const char *ps = getenv("DPTRAIN_S3_PATH_STYLE");
	char cmd[8400], sig[256];
	FILE *f;
	int n;

	if (!ak || !*ak || !sk || !*sk)
		bench_die("--s3: the curl peer needs AWS_ACCESS_KEY_ID and "
			  "AWS_SECRET_ACCESS_KEY in the environment");
	if (!region)
		region = "us-east-1";
	if (ep && !(ps && !strcmp(ps, "0"))) {
		size_t l = strlen(ep);
		while (l && ep[l - 1] == '/')
			l--;
		n = snprintf(p->url, sizeof(p->url), "%.*s/%s/%s", (int)l, ep,
			     bucket, key);
	} else if (ep) {
		const char *host = strstr(ep, "://");
		if (!host)
			bench_die("--s3: the endpoint must be "
				  "http(s)://host[:port]");
		n = snprintf(p->url, sizeof(p->url), "%.*s%s.%s/%s",
			     (int)(host + 3 - ep), ep, bucket, host + 3, key);
	} else {
		n = snprintf(p->url, sizeof(p->url),
			     "https://%s.s3.%s.amazonaws.com/%s", bucket,
			     region, key);
	}
	if (n < 0 || (size_t)n >= sizeof(p->url))
		bench_die("--s3: the URI is too long");
	snprintf(p->conf, sizeof(p->conf), "%s/curl.conf", c->work);
	snprintf(p->file, sizeof(p->file), "%s/curl-peer.bin", c->work);
	f = fopen(p->conf, "w");
	if (!f)
		bench_die("cannot write the curl configuration");
	chmod(p->conf, 0600);
	snprintf(sig, sizeof(sig), "aws:amz:%s:s3", region);
	conf_line(f, "aws-sigv4", sig);
	snprintf(cmd, sizeof(cmd), "%s:%s", ak, sk);
	conf_line(f, "user", cmd);
	/* curl 7.88 does not send the payload's hash: it must be given. */
	conf_line(f, "header", "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	/* curl's own "Expect: 100-continue" stays: curl 7.88 would sign an
	 * empty Expect header that it then does not send (403). */
	if (token && *token) {
		snprintf(cmd, sizeof(cmd), "x-amz-security-token: %s", token);
		conf_line(f, "header", cmd);
	}
	fputs("silent\nshow-error\nfail\n", f);
	if (fclose(f))
		bench_die("cannot write the curl configuration");
	/* The bytes: not zeros, which a server or a proxy could compress. */
	snprintf(cmd, sizeof(cmd), "head -c %" PRIu64 " /dev/urandom >'%s'",
		 c->size, p->file);
	timed_shell(cmd);
}

/* Seconds for one curl PUT (or GET) of the peer object. */
double bench_s3peer_run(const struct bench_s3peer *p, bool put)
{
	char cmd[20000];

	if (put)
		snprintf(cmd, sizeof(cmd),
			 "curl -K '%s' -o /dev/null -T '%s' '%s'", p->conf,
			 p->file, p->url);
	else
		snprintf(cmd, sizeof(cmd), "curl -K '%s' -o /dev/null '%s'",
			 p->conf, p->url);
	return timed_shell(cmd);
}

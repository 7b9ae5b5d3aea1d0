/*
 * Allreduce bus bandwidth of dptrain's CPU backend next to Open MPI's
 * MPI_Allreduce, measured in the same run on the same machine.
 *
 * For each number of ranks, the benchmark forks that many processes
 * connected by dptrain's CPU backend (all on one node, so they reduce
 * through shared memory; --tcp puts each on a node of its own), then runs
 * bench/allreduce_mpi under mpirun with the same sizes and iterations.
 * float32 sum, out of place; per iteration a barrier then one timed
 * allreduce; an iteration takes the slowest rank's time; a round's
 * figure is the median over the timed iterations. Rounds (-r) alternate
 * the two sides and the figure is the median over rounds: on a machine
 * shared with other work, a burst of load then spoils one round of one
 * side rather than the comparison. Bus bandwidth as nccl-tests defines
 * it: algbw = bytes / time, busbw = algbw * 2 (n - 1) / n.
 *
 * The last line is the summary for 2 ranks at 64 MiB (or the last ranks
 * and largest size measured):
 *   allreduce bytes=67108864 ranks=2 dptrain_busbw=X mpi_busbw=Y ratio=R
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dptrain/dptrain.h>

#include "bench.h"
#include "tests/coll/harness.h"
#include "worker/cpu_comm.h"

#define MAX_RANKS     64
#define MAX_SIZES     40
#define MAX_ROUNDS    15
#define SUMMARY_BYTES ((size_t)64 << 20)

struct options {
	int ranks[8];
	int nranks;
	size_t lo, hi, factor;
	int warmup, iters;
	int rounds;
	int tcp;
	int bind;
	int mpi_malloc;	 /* leave Open MPI with glibc's default malloc */
	const char *mpi; /* NULL: no MPI side */
};

struct shared {
	int failed;
	double t[]; /* [rank][size][iteration] */
};

struct job {
	const struct options *o;
	struct shared *sh;
	int world;
	int nsizes;
	int maxn;
};

static double *slot_of(struct job *j, int rank, int size)
{
	return j->sh->t + ((size_t)rank * (size_t)j->nsizes + (size_t)size) *
				  (size_t)j->maxn;
}

static int rank_main(struct dpt__cpu_comm *c, int rank, void *arg)
{
	struct job *j = arg;
	const struct options *o = j->o;
	float *send = malloc(o->hi), *recv = malloc(o->hi);
	int size = 0, rc = 1;

	if (j->o->bind) {
		/* As Open MPI does by default for as many ranks as cores. */
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(rank % (int)sysconf(_SC_NPROCESSORS_ONLN), &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	if (!send || !recv)
		goto out;
	/* Touch everything before timing: first touches cost ~50 times a
	 * warm copy on this VM, for MPI and for us alike. */
	for (size_t i = 0; i < o->hi / 4; i++)
		send[i] = 1.0f;
	memset(recv, 0, o->hi);
	for (size_t bytes = o->lo; bytes <= o->hi; bytes *= o->factor, size++) {
		int n = o->warmup + bench_iterations(bytes, o->iters);
		double *t = slot_of(j, rank, size);

		for (int i = 0; i < n; i++) {
			double t0;

			if (dpt__cpu_barrier(c))
				goto out;
			t0 = harness_now();
			if (dpt__cpu_allreduce(c, send, recv, bytes / 4,
					       DPT_FLOAT32, DPT_SUM))
				goto out;
			t[i] = harness_now() - t0;
		}
		if (recv[0] != (float)j->world ||
		    recv[bytes / 4 - 1] != (float)j->world) {
			fprintf(stderr, "allreduce: rank %d: wrong sum\n",
				rank);
			goto out;
		}
	}
	rc = 0;
out:
	if (rc)
		j->sh->failed = 1;
	free(send);
	free(recv);
	return rc;
}

/* dptrain's median time per size for WORLD ranks, in SECONDS[]. */
static int run_dptrain(const struct options *o, int world, int nsizes,
		       double *seconds)
{
	int maxn = o->warmup + o->iters;
	size_t bytes = sizeof(struct shared) + sizeof(double) * (size_t)world *
						       (size_t)nsizes *
						       (size_t)maxn;
	struct job j = {.o = o, .world = world, .nsizes = nsizes, .maxn = maxn};
	uint32_t nodes[MAX_RANKS];
	pid_t pids[MAX_RANKS];
	int status[MAX_RANKS], rc = 0;
	char session[64];

	j.sh = harness_shared(bytes);
	if (!j.sh)
		return -1;
	for (int r = 0; r < world; r++)
		nodes[r] = o->tcp ? (uint32_t)r : 0;
	snprintf(session, sizeof(session), "bench-allreduce-%ld-%d",
		 (long)getpid(), world);
	if (harness_spawn(world, nodes, session, rank_main, &j, pids))
		rc = -1;
	else
		harness_wait(world, pids, status, 3600);
	for (int r = 0; !rc && r < world; r++)
		if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]))
			rc = -1;
	if (j.sh->failed)
		rc = -1;
	for (int s = 0; !rc && s < nsizes; s++) {
		size_t b = o->lo;
		int n, timed;
		double worst[1024];

		for (int k = 0; k < s; k++)
			b *= o->factor;
		n = o->warmup + bench_iterations(b, o->iters);
		timed = n - o->warmup;
		for (int i = 0; i < timed; i++) {
			worst[i] = 0;
			for (int r = 0; r < world; r++) {
				double t = slot_of(&j, r, s)[o->warmup + i];
				if (t > worst[i])
					worst[i] = t;
			}
		}
		seconds[s] = bench_median(worst, timed);
	}
	munmap(j.sh, bytes);
	return rc;
}

/* Open MPI's median time per size for WORLD ranks, or NAN. */
static void run_mpi(const struct options *o, int world, int nsizes,
		    double *seconds)
{
	char cmd[PATH_MAX + 256], line[256];
	FILE *p;

	for (int s = 0; s < nsizes; s++)
		seconds[s] = NAN;
	if (!o->mpi)
		return;
	/* Open MPI mallocs a temporary buffer in every large allreduce;
	 * above glibc's mmap threshold (32 MiB at most) that is fresh
	 * memory each time, whose first touches cost ~50 times a warm copy
	 * on this VM: 64 MiB drops from ~4.5 to ~0.45 GB/s. Unless told
	 * otherwise, keep such buffers on the heap: the strongest MPI. */
	snprintf(cmd, sizeof(cmd),
		 "mpirun %s--oversubscribe %s%s-np %d '%s' %zu %zu %zu %d %d",
		 geteuid() == 0 ? "--allow-run-as-root " : "",
		 o->bind ? "" : "--bind-to none ",
		 o->mpi_malloc ? ""
			       : "-x MALLOC_MMAP_THRESHOLD_=4294967296 "
				 "-x MALLOC_TRIM_THRESHOLD_=4294967296 ",
		 world, o->mpi, o->lo, o->hi, o->factor, o->warmup, o->iters);
	fflush(NULL);
	p = popen(cmd, "r");
	if (!p) {
		fprintf(stderr, "allreduce: cannot run '%s': %s\n", cmd,
			strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), p)) {
		size_t b, x = o->lo;
		double t;

		if (sscanf(line, "result %zu %lf", &b, &t) != 2)
			continue;
		for (int s = 0; s < nsizes; s++, x *= o->factor)
			if (x == b)
				seconds[s] = t;
	}
	if (pclose(p) != 0)
		fprintf(stderr, "allreduce: '%s' failed\n", cmd);
}

static double busbw(size_t bytes, double seconds, int world)
{
	return (double)bytes / seconds * 2.0 * (world - 1) / world / 1e9;
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'G':
		v <<= 30;
		end++;
		break;
	}
	if (*end)
		return -1;
	*out = (size_t)v;
	return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_ranks(const char *s, struct options *o)
{
	char buf[64], *tok, *save = NULL;

	if (strlen(s) >= sizeof(buf))
		return -1;
	memcpy(buf, s, strlen(s) + 1);
	o->nranks = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->nranks == 8 ||
		    parse_int(tok, 2, MAX_RANKS, &o->ranks[o->nranks]))
			return -1;
		o->nranks++;
	}
	return o->nranks ? 0 : -1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: allreduce [-n RANKS[,RANKS...]] [-b MINBYTES] "
		"[-e MAXBYTES] [-f FACTOR]\n"
		"                 [-w WARMUP] [-i ITERS] [-r ROUNDS] [--tcp] "
		"[--no-bind]\n"
		"                 [--mpi PROGRAM | --no-mpi]\n"
		"                 [--mpi-default-malloc]\n"
		"defaults: -n 4,2 -b 1K -e 256M -f 4 -w 3 -i 20 -r 3, "
		"--mpi allreduce_mpi beside this program\n"
		"-r: rounds, dptrain then MPI in each; the figures are "
		"the medians over them\n"
		"--tcp: one rank per node (TCP ring) instead of shared "
		"memory\n"
		"--no-bind: bind neither dptrain's nor Open MPI's ranks to "
		"CPUs (by default\n"
		"  both are, as Open MPI does, when there are enough CPUs)\n"
		"--mpi-default-malloc: run Open MPI without the environment "
		"that keeps its\n"
		"  temporary buffers out of fresh mmap()ed memory\n");
}

/* Whether 64 MiB is among the sizes measured. */
static int summary_size(const struct options *o, int nsizes)
{
	size_t b = o->lo;

	for (int s = 0; s < nsizes; s++, b *= o->factor)
		if (b == SUMMARY_BYTES)
			return 1;
	return 0;
}

/* bench/allreduce_mpi next to this program, if it was built. */
static const char *default_mpi(void)
{
	static char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 32);
	char *slash;

	if (n <= 0)
		return NULL;
	path[n] = '\0';
	slash = strrchr(path, '/');
	if (!slash)
		return NULL;
	memcpy(slash + 1, "allreduce_mpi", sizeof("allreduce_mpi"));
	return access(path, X_OK) == 0 ? path : NULL;
}

int main(int argc, char **argv)
{
	struct options o = {
		.ranks = {4, 2},
		.nranks = 2,
		.lo = 1024,
		.hi = (size_t)256 << 20,
		.factor = 4,
		.warmup = 3,
		.iters = 20,
		.rounds = 3,
		.bind = 1,
		.mpi = default_mpi(),
	};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	char summary[256] = "", summary2[256] = "";
	int nsizes = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0, f;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--tcp")) {
			o.tcp = 1;
		} else if (!strcmp(a, "--no-bind")) {
			o.bind = 0;
		} else if (!strcmp(a, "--no-mpi")) {
			o.mpi = NULL;
		} else if (!strcmp(a, "--mpi-default-malloc")) {
			o.mpi_malloc = 1;
		} else if (!v) {
			bad = 1;
		} else if (!strcmp(a, "--mpi")) {
			o.mpi = v;
		} else if (!strcmp(a, "-n")) {
			bad = parse_ranks(v, &o);
		} else if (!strcmp(a, "-b")) {
			bad = parse_size(v, &o.lo);
		} else if (!strcmp(a, "-e")) {
			bad = parse_size(v, &o.hi);
		} else if (!strcmp(a, "-f")) {
			bad = parse_int(v, 2, 1024, &f);
			o.factor = (size_t)f;
		} else if (!strcmp(a, "-w")) {
			bad = parse_int(v, 0, 100, &o.warmup);
		} else if (!strcmp(a, "-r")) {
			bad = parse_int(v, 1, MAX_ROUNDS, &o.rounds);
		} else if (!strcmp(a, "-i")) {
			bad = parse_int(v, 1, 1000 - 100, &o.iters);
		} else {
			bad = 1;
		}
		if (bad) {
			fprintf(stderr, "allreduce: bad argument '%s'\n", a);
			usage(stderr);
			return 2;
		}
		if (a[1] != '-' || !strcmp(a, "--mpi"))
			i++;
	}
	if (o.lo < 4 || o.lo % 4 || o.hi < o.lo) {
		fprintf(stderr, "allreduce: sizes must be multiples of 4 "
				"bytes, MINBYTES <= MAXBYTES\n");
		return 2;
	}
	for (size_t b = o.lo; b <= o.hi && nsizes < MAX_SIZES; b *= o.factor)
		nsizes++;

	printf("# allreduce float32 sum, out of place: dptrain CPU backend "
	       "(%s) vs Open MPI MPI_Allreduce\n",
	       o.tcp ? "TCP ring, one rank per node"
		     : "shared memory, all ranks on one node");
	printf("# ranks %s\n", o.bind ? "bound to CPUs when there are enough "
					"(Open MPI's default)"
				      : "not bound (--no-bind; mpirun "
					"--bind-to none)");
	printf("# %ld CPUs; median of up to %d iterations after %d warm-up, "
	       "then median of %d rounds (dptrain and MPI alternating); "
	       "busbw = bytes/time * 2(n-1)/n, GB/s\n",
	       ncpu, o.iters, o.warmup, o.rounds);
	if (!o.mpi)
		printf("# no MPI side (--no-mpi, or bench/allreduce_mpi not "
		       "built)\n");
	else
		printf("# Open MPI run with %s\n",
		       o.mpi_malloc ? "glibc's default malloc settings"
				    : "MALLOC_MMAP_THRESHOLD_ and "
				      "MALLOC_TRIM_THRESHOLD_ at 4 GiB");
	for (int k = 0; k < o.nranks; k++) {
		int world = o.ranks[k];
		double dt[MAX_SIZES], mt[MAX_SIZES];
		double dr[MAX_SIZES][MAX_ROUNDS], mr[MAX_SIZES][MAX_ROUNDS];
		size_t b = o.lo;
		struct options ok = o;

		/* Open MPI binds ranks to cores only when there are enough
		 * cores: do the same. */
		ok.bind = o.bind && world <= ncpu;
		/* Alternate the two sides, so that a burst of load from
		 * elsewhere on the machine hits one round of one side, which
		 * the median over rounds then discards. */
		for (int r = 0; r < o.rounds; r++) {
			if (run_dptrain(&ok, world, nsizes, dt)) {
				fprintf(stderr, "allreduce: the dptrain ranks "
						"failed\n");
				return 1;
			}
			run_mpi(&o, world, nsizes, mt);
			for (int s = 0; s < nsizes; s++) {
				dr[s][r] = dt[s];
				mr[s][r] = mt[s];
			}
		}
		for (int s = 0; s < nsizes; s++) {
			dt[s] = bench_median(dr[s], o.rounds);
			mt[s] = isnan(mr[s][0]) ? NAN
						: bench_median(mr[s], o.rounds);
		}
		printf("#%13s %5s %12s %10s %12s %10s %7s\n", "bytes", "ranks",
		       "dptrain_us", "dptrain", "mpi_us", "mpi", "ratio");
		for (int s = 0; s < nsizes; s++, b *= o.factor) {
			double x = busbw(b, dt[s], world);
			double y = busbw(b, mt[s], world);

			printf("%14zu %5d %12.1f %10.3f %12.1f %10.3f %7.3f\n",
			       b, world, dt[s] * 1e6, x, mt[s] * 1e6, y, x / y);
			/* Summarise 64 MiB, or the largest size if 64 MiB
			 * was not measured. */
			if (b == SUMMARY_BYTES ||
			    (s == nsizes - 1 && !summary_size(&o, nsizes)))
				snprintf(world == 2 ? summary2 : summary,
					 sizeof(summary),
					 "allreduce bytes=%zu ranks=%d "
					 "dptrain_busbw=%.3f mpi_busbw=%.3f "
					 "ratio=%.3f",
					 b, world, x, y, x / y);
		}
		fflush(stdout);
	}
	/* The 2-rank summary comes last, whatever the order of -n. */
	if (summary[0] && summary2[0])
		printf("%s\n", summary);
	printf("%s\n", summary2[0] ? summary2 : summary);
	return 0;
}

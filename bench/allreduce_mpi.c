/*
 * Open MPI's MPI_Allreduce timed exactly as bench/allreduce times
 * dptrain's CPU backend: float32 sum, out of place, per iteration a
 * barrier then one timed allreduce, the iteration's time being the
 * slowest rank's, the result the median over the timed iterations.
 * bench/allreduce starts this program with mpirun and reads its lines
 * "result BYTES SECONDS".
 *
 * Usage: allreduce_mpi MINBYTES MAXBYTES FACTOR WARMUP ITERS
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

int main(int argc, char **argv)
{
	size_t lo, hi, factor;
	int warmup, iters, rank, world, rc = 1;
	float *send = NULL, *recv = NULL;
	double *t = NULL, *tmax = NULL;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	if (argc != 6) {
		if (!rank)
			fprintf(stderr,
				"usage: allreduce_mpi MINBYTES MAXBYTES "
				"FACTOR WARMUP ITERS\n");
		goto out;
	}
	lo = strtoull(argv[1], NULL, 10);
	hi = strtoull(argv[2], NULL, 10);
	factor = strtoull(argv[3], NULL, 10);
	warmup = (int)strtol(argv[4], NULL, 10);
	iters = (int)strtol(argv[5], NULL, 10);
	if (lo < 4 || hi < lo || factor < 2 || warmup < 0 || iters < 1)
		goto out;
	send = malloc(hi);
	recv = malloc(hi);
	t = calloc((size_t)(warmup + iters), sizeof(double));
	tmax = calloc((size_t)(warmup + iters), sizeof(double));
	if (!send || !recv || !t || !tmax)
		goto out;
	/* Touch everything before timing: first touches cost ~50 times a
	 * warm copy on this VM. */
	for (size_t i = 0; i < hi / 4; i++)
		send[i] = 1.0f;
	memset(recv, 0, hi);
	for (size_t bytes = lo; bytes <= hi; bytes *= factor) {
		int n = warmup + bench_iterations(bytes, iters);

		for (int i = 0; i < n; i++) {
			double t0;

			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
			MPI_Allreduce(send, recv, (int)(bytes / 4), MPI_FLOAT,
				      MPI_SUM, MPI_COMM_WORLD);
			t[i] = MPI_Wtime() - t0;
		}
		MPI_Reduce(t, tmax, n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (!rank) {
			if (recv[0] != (float)world)
				fprintf(stderr, "allreduce_mpi: wrong sum\n");
			printf("result %zu %.9f\n", bytes,
			       bench_median(tmax + warmup, n - warmup));
			fflush(stdout);
		}
	}
	rc = 0;
out:
	free(send);
	free(recv);
	free(t);
	free(tmax);
	MPI_Finalize();
	return rc;
}

/*
 * `dptrain plot`: a run's logged scalars and samples/s as a PNG
 * (tool/plot.c).
 */
#ifndef DPT_CKPT_PLOT_H
#define DPT_CKPT_PLOT_H

#include <stddef.h>

/*
 * The command: WHAT is a run name or URI (as dptrain status takes them),
 * OUT the PNG to write (NULL: RUN.png in the current directory), YS the
 * NYS scalars of the upper panel (0: "loss"). Prints the PNG's path.
 * Returns the exit status: 0, 1 (no events, nothing logged, no gnuplot),
 * 2 (bad arguments).
 */
int dpt__plot_main(const char *what, const char *out, const char **ys,
		   size_t nys);

#endif

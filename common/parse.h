/*
 * Strict parsers for values that users and admins type. Each returns 0 or
 * a negative dpt_error and never accepts trailing garbage, so that
 * "--dp-keep=3x" is an error rather than 3.
 */
#ifndef DPT_COMMON_PARSE_H
#define DPT_COMMON_PARSE_H

#include <stdbool.h>
#include <stddef.h>

/* A decimal integer in [min, max]. DPT_EINVAL if it is not a number,
 * DPT_ERANGE if it is outside the bounds. */
int dpt__parse_long(const char *s, long min, long max, long *out);

/* A range "MIN" (MIN-MIN) or "MIN-MAX" with LO <= MIN <= MAX <= HI, as
 * sbatch --nodes takes one. DPT_EINVAL or DPT_ERANGE as above. */
int dpt__parse_range(const char *s, long lo, long hi, long *min, long *max);
/* The largest node count a --dp-nodes range may name. */
#define DPT_MAX_NODES 1000000

/*
 * A duration in seconds. Accepted forms, as Slurm's --time and with unit
 * suffixes: "90" (minutes, as Slurm), "MM:SS", "HH:MM:SS", "D-HH",
 * "D-HH:MM", "D-HH:MM:SS", and "30s", "10m", "2h", "1d".
 */
int dpt__parse_duration(const char *s, long *seconds);

/*
 * A checkpoint interval, as srun --dp-ckpt-every takes it: "auto" (*SECONDS
 * = DPT_CKPT_EVERY_AUTO_S), a duration (*SECONDS, at least 1) or "Nsteps"
 * (*STEPS, 1 to 10^9); the other one is set to 0. STEPS may be NULL.
 */
#define DPT_CKPT_EVERY_AUTO_S 1800
int dpt__parse_ckpt_every(const char *s, long *seconds, long *steps);
/* The mean time between failures of one node when the site sets none
 * (dptrain.conf mtbf=, exported per job as DPTRAIN_MTBF): 30 days. Under
 * auto, DPT_CKPT_EVERY_AUTO_S is the longest interval (ckpt/interval.c). */
#define DPT_CKPT_NODE_MTBF_S (30L * 86400)

/* Writes SECONDS in the shortest readable form ("90s", "10m", "1h30m",
 * "2d") into BUF; returns BUF. */
const char *dpt__format_duration(long seconds, char *buf, size_t size);

/* The value of hex digit C (either case), or -1. */
int dpt__hex_value(int c);

/* OPT when set, else the environment variable ENV when set and not
 * empty, else NULL: an option of the API over its environment default. */
const char *dpt__opt_or_env(const char *opt, const char *env);

/* "yes|no|true|false|on|off|1|0". */
int dpt__parse_bool(const char *s, bool *out);

/*
 * Split "key=value" in place: KEY and VALUE point into LINE, with white
 * space around both removed. DPT_EINVAL when there is no '=' or the key is
 * empty.
 */
int dpt__split_kv(char *line, char **key, char **value);

/*
 * Read a key=value file: '#' starts a comment, blank lines are ignored.
 * FN is called for each pair with the line number; a non-zero return stops
 * the read and is returned. Returns DPT_ENOENT if the file does not exist,
 * DPT_ECONFIG (after calling ERR_FN with the line number and a message) for
 * a line that is not key=value.
 */
typedef int (*dpt__kv_fn)(void *ctx, const char *key, const char *value,
			  int lineno);
typedef void (*dpt__kv_err_fn)(void *ctx, int lineno, const char *what);
int dpt__read_kv_file(const char *path, dpt__kv_fn fn, dpt__kv_err_fn err_fn,
		      void *ctx);

#endif

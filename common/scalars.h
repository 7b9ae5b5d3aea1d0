/*
 * The scalars a program logs (dpt_log, doc/checkpoint-format.md, "Events")
 * on their way from rank 0's library to the coordinator, and the progress
 * toward a declared number of steps that `dptrain status` draws.
 *
 * A record is "STEP NAME=VALUE NAME=VALUE...;" (';' ends it: a report
 * value is printable ASCII, no newline): the
 * library appends records to a buffer as the program logs, and sends them
 * in the value of the report key DPT_KV_LOG (common/wire.h), as many
 * whole records as fit in one value; the coordinator parses each record
 * into an events line. Text, not binary: it is what a report value is,
 * and `dptrain.log=...` in the coordinator's log reads as what it is.
 */
#ifndef DPT_COMMON_SCALARS_H
#define DPT_COMMON_SCALARS_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define DPT_SCALARS_MAX	     16 /* scalars in one record */
#define DPT_SCALARS_NAME_MAX 31 /* bytes of a name */

/*
 * dpt__scalars_name_ok - whether NAME can be logged: 1 to
 * DPT_SCALARS_NAME_MAX bytes of [A-Za-z0-9_.-] (a JSON key with nothing
 * to escape, and no byte of the record's syntax).
 */
int dpt__scalars_name_ok(const char *name);

/*
 * dpt__scalars_record - append the record of STEP with N scalars (NAMES,
 * VALUES) to B. A value that is not finite is written as "nan" and
 * becomes null in the events. Returns 0, DPT_EINVAL (N is 0 or above
 * DPT_SCALARS_MAX, a name is not dpt__scalars_name_ok, or a name is
 * repeated), DPT_ETOOBIG (the record is longer than a report value), or
 * B's error; B is unchanged on error.
 */
int dpt__scalars_record(struct dpt__buf *b, uint64_t step, size_t n,
			const char *const names[], const double values[]);

/*
 * dpt__scalars_pack - copy whole records of TEXT (LEN bytes), from *OFF
 * on, into OUT (SIZE bytes, NUL-terminated), as many as fit, and advance
 * *OFF past them. Returns the bytes copied (0 when *OFF is at LEN). A
 * record that cannot fit alone (never, for dpt__scalars_record's) is
 * skipped.
 */
size_t dpt__scalars_pack(const char *text, size_t len, size_t *off, char *out,
			 size_t size);

/* One parsed record: NAMES point into the text given to parse. */
struct dpt__scalars {
	uint64_t step;
	size_t n;
	char names[DPT_SCALARS_MAX][DPT_SCALARS_NAME_MAX + 1];
	double values[DPT_SCALARS_MAX]; /* NAN: not a number */
};

/*
 * dpt__scalars_parse - parse the record of LINE (LEN bytes, no newline
 * needed) into *OUT. Returns 0 or DPT_EPROTO (not a record: the
 * coordinator drops it).
 */
int dpt__scalars_parse(const char *line, size_t len, struct dpt__scalars *out);

/*
 * dpt__progress_bar - "[#####.....]  45%" of STEP out of TOTAL, WIDTH
 * cells between the brackets, into OUT (SIZE bytes). TOTAL 0 writes
 * nothing (an empty string). Past TOTAL it stays full at 100%.
 */
void dpt__progress_bar(char *out, size_t size, uint64_t step, uint64_t total,
		       int width);

#endif

/*
 * libFuzzer target for the parsers of values users and admins type
 * (common/parse.c): durations, --dp-ckpt-every, bounded longs, booleans
 * and key=value splitting. Every input is tried as a string (up to its
 * first NUL) by each of them. Besides not crashing, what parses must be
 * what the header promises: a duration is not negative; a ckpt-every is
 * exactly one of seconds (at least 1) or steps (1 to 10^9), the same with
 * and without STEPS; a long lies within its bounds; a split key is not
 * empty and neither part has white space at its ends.
 */
#include "config.h"

#include <ctype.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool trimmed(const char *s)
{
	size_t n = strlen(s);
	return n == 0 || (!isspace((unsigned char)s[0]) &&
			  !isspace((unsigned char)s[n - 1]));
}

static void durations(const char *s)
{
	char buf[64];
	long secs, again;

	if (dpt__parse_duration(s, &secs))
		return;
	if (secs < 0)
		abort();
	/* The shortest form, when it is a single unit ("10m", "2d"), reads
	 * back as the same duration; "1h30m" is for messages only. */
	dpt__format_duration(secs, buf, sizeof(buf));
	if (strspn(buf, "0123456789") == strlen(buf) - 1 &&
	    (dpt__parse_duration(buf, &again) || again != secs))
		abort();
}

static void ckpt_every(const char *s)
{
	long secs = -1, steps = -1, secs2 = -1;
	int rc = dpt__parse_ckpt_every(s, &secs, &steps);

	if (dpt__parse_ckpt_every(s, &secs2, NULL) != rc)
		abort();
	if (rc)
		return;
	if (secs2 != secs)
		abort();
	if (steps == 0 ? secs < 1
		       : (secs != 0 || steps < 1 || steps > 1000000000L))
		abort();
}

static void longs(const char *s)
{
	static const long bounds[][2] = {
		{LONG_MIN, LONG_MAX}, {0, 100}, {1, 1000000}, {-5, 5}};
	char back[32];

	for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
		long v = bounds[i][0] - (bounds[i][0] > LONG_MIN), w;
		int rc = dpt__parse_long(s, bounds[i][0], bounds[i][1], &v);

		if (rc == 0 && (v < bounds[i][0] || v > bounds[i][1]))
			abort();
		/* What parses prints back as a number that parses alike. */
		if (rc == 0) {
			snprintf(back, sizeof(back), "%ld", v);
			if (dpt__parse_long(back, bounds[i][0], bounds[i][1],
					    &w) ||
			    w != v)
				abort();
		}
		if (rc != 0 && rc != DPT_EINVAL && rc != DPT_ERANGE)
			abort();
	}
}

/* A node range (--dp-nodes): within its bounds, MIN <= MAX, and printed
 * back it parses to the same range. */
static void ranges(const char *s)
{
	long a = -1, b = -1, a2, b2;
	char back[48];
	int rc = dpt__parse_range(s, 1, DPT_MAX_NODES, &a, &b);

	if (rc != 0 && rc != DPT_EINVAL && rc != DPT_ERANGE)
		abort();
	if (rc != 0) {
		if (a != -1 || b != -1)
			abort(); /* untouched on error */
		return;
	}
	if (a < 1 || b > DPT_MAX_NODES || a > b)
		abort();
	snprintf(back, sizeof(back), "%ld-%ld", a, b);
	if (dpt__parse_range(back, 1, DPT_MAX_NODES, &a2, &b2) || a2 != a ||
	    b2 != b)
		abort();
}

static void kv(const char *s)
{
	char *copy = strdup(s), *key, *value;
	bool b;

	if (!copy)
		abort();
	if (dpt__split_kv(copy, &key, &value) == 0) {
		if (!*key || !trimmed(key) || !trimmed(value) ||
		    strchr(key, '=') != NULL)
			abort();
	}
	free(copy);
	if (dpt__parse_bool(s, &b) == 0 && strlen(s) > 5)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	durations(s);
	ckpt_every(s);
	longs(s);
	ranges(s);
	kv(s);
	for (size_t i = 0; i < size; i++) {
		int v = dpt__hex_value(data[i]);
		if (v < -1 || v > 15 || (v >= 0) != !!isxdigit(data[i]))
			abort();
	}
	free(s);
	return 0;
}

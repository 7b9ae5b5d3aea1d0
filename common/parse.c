#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "parse.h"

int dpt__parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!s || !*s || isspace((unsigned char)*s))
		return DPT_EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end != '\0')
		return DPT_EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return DPT_ERANGE;
	*out = v;
	return 0;
}

int dpt__parse_range(const char *s, long lo, long hi, long *min, long *max)
{
	char buf[48];
	const char *dash = s ? strchr(s, '-') : NULL;
	long a, b;
	int rc;

	if (!s || strlen(s) >= sizeof(buf))
		return DPT_EINVAL;
	memcpy(buf, s, strlen(s) + 1);
	if (dash)
		buf[dash - s] = '\0';
	rc = dpt__parse_long(buf, lo, hi, &a);
	if (!rc)
		rc = dash ? dpt__parse_long(dash + 1, lo, hi, &b) : (b = a, 0);
	if (!rc && a > b)
		rc = DPT_ERANGE;
	if (rc)
		return rc;
	*min = a;
	*max = b;
	return 0;
}

/* Parse exactly N colon-separated decimal fields of S into F. */
static int parse_fields(const char *s, long *f, int n)
{
	char buf[64];
	char *p, *colon;
	int rc;

	if (strlen(s) >= sizeof(buf))
		return DPT_EINVAL;
	memcpy(buf, s, strlen(s) + 1);
	p = buf;
	for (int i = 0; i < n; i++) {
		colon = strchr(p, ':');
		if (i < n - 1) {
			if (!colon)
				return DPT_EINVAL;
			*colon = '\0';
		} else if (colon) {
			return DPT_EINVAL;
		}
		rc = dpt__parse_long(p, 0, INT_MAX, &f[i]);
		if (rc)
			return DPT_EINVAL;
		if (colon) /* NULL + 1 is undefined even if never read */
			p = colon + 1;
	}
	return 0;
}

static int count_colons(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == ':';
	return n;
}

int dpt__parse_duration(const char *s, long *seconds)
{
	long f[3], days = 0, v;
	size_t len;
	const char *dash;
	int colons, rc;

	if (!s || !*s)
		return DPT_EINVAL;
	len = strlen(s);

	/* Unit suffix: 30s, 10m, 2h, 1d. */
	if (strchr("smhd", s[len - 1]) && len > 1) {
		char num[32];
		static const long unit[] = {
			['s'] = 1, ['m'] = 60, ['h'] = 3600, ['d'] = 86400};
		if (len - 1 >= sizeof(num))
			return DPT_EINVAL;
		memcpy(num, s, len - 1);
		num[len - 1] = '\0';
		rc = dpt__parse_long(num, 0, LONG_MAX / 86400, &v);
		if (rc)
			return DPT_EINVAL;
		*seconds = v * unit[(unsigned char)s[len - 1]];
		return 0;
	}

	/* Slurm's forms. With a day part, the rest is HH[:MM[:SS]]. */
	dash = strchr(s, '-');
	if (dash) {
		char d[32];
		if ((size_t)(dash - s) >= sizeof(d) || dash == s)
			return DPT_EINVAL;
		memcpy(d, s, dash - s);
		d[dash - s] = '\0';
		if (dpt__parse_long(d, 0, 100000, &days))
			return DPT_EINVAL;
		s = dash + 1;
		colons = count_colons(s);
		if (colons > 2 || parse_fields(s, f, colons + 1))
			return DPT_EINVAL;
		v = f[0] * 3600 + (colons >= 1 ? f[1] * 60 : 0) +
		    (colons == 2 ? f[2] : 0);
		*seconds = days * 86400 + v;
		return 0;
	}
	colons = count_colons(s);
	if (colons > 2 || parse_fields(s, f, colons + 1))
		return DPT_EINVAL;
	switch (colons) {
	case 0: /* minutes, as Slurm's --time */
		*seconds = f[0] * 60;
		break;
	case 1: /* MM:SS */
		*seconds = f[0] * 60 + f[1];
		break;
	default: /* HH:MM:SS */
		*seconds = f[0] * 3600 + f[1] * 60 + f[2];
		break;
	}
	return 0;
}

const char *dpt__format_duration(long seconds, char *buf, size_t size)
{
	if (seconds % 86400 == 0 && seconds >= 86400)
		snprintf(buf, size, "%ldd", seconds / 86400);
	else if (seconds % 3600 == 0 && seconds >= 3600)
		snprintf(buf, size, "%ldh", seconds / 3600);
	else if (seconds % 60 == 0 && seconds >= 60)
		snprintf(buf, size, "%ldm", seconds / 60);
	else if (seconds > 3600)
		snprintf(buf, size, "%ldh%ldm%lds", seconds / 3600,
			 seconds % 3600 / 60, seconds % 60);
	else if (seconds > 60)
		snprintf(buf, size, "%ldm%lds", seconds / 60, seconds % 60);
	else
		snprintf(buf, size, "%lds", seconds);
	return buf;
}

int dpt__parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};

	if (!s)
		return DPT_EINVAL;
	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return DPT_EINVAL;
}

static char *trim(char *s)
{
	char *end;
	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

int dpt__split_kv(char *line, char **key, char **value)
{
	char *eq = strchr(line, '=');
	if (!eq)
		return DPT_EINVAL;
	*eq = '\0';
	*key = trim(line);
	*value = trim(eq + 1);
	return **key ? 0 : DPT_EINVAL;
}

int dpt__read_kv_file(const char *path, dpt__kv_fn fn, dpt__kv_err_fn err_fn,
		      void *ctx)
{
	FILE *f;
	char *line = NULL, *key, *value, *hash;
	size_t cap = 0;
	int lineno = 0, rc = 0;

	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? DPT_ENOENT : DPT_ESYS;
	while (getline(&line, &cap, f) >= 0) {
		char *s;
		lineno++;
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		s = trim(line);
		if (!*s)
			continue;
		if (dpt__split_kv(s, &key, &value)) {
			if (err_fn)
				err_fn(ctx, lineno, "expected key=value");
			rc = DPT_ECONFIG;
			break;
		}
		rc = fn(ctx, key, value, lineno);
		if (rc)
			break;
	}
	free(line);
	fclose(f);
	return rc;
}

int dpt__hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

const char *dpt__opt_or_env(const char *opt, const char *env)
{
	const char *v;

	if (opt)
		return opt;
	v = getenv(env);
	return v && *v ? v : NULL;
}

int dpt__parse_ckpt_every(const char *s, long *seconds, long *steps)
{
	size_t len = strlen(s);
	long n;
	char num[32];

	*seconds = 0;
	if (steps)
		*steps = 0;
	if (strcmp(s, "auto") == 0) {
		*seconds = DPT_CKPT_EVERY_AUTO_S;
		return 0;
	}
	if (len > 5 && strcmp(s + len - 5, "steps") == 0) {
		if (len - 5 >= sizeof(num))
			return DPT_EINVAL;
		memcpy(num, s, len - 5);
		num[len - 5] = '\0';
		if (dpt__parse_long(num, 1, 1000000000L, &n))
			return DPT_EINVAL;
		if (steps)
			*steps = n;
		return 0;
	}
	if (dpt__parse_duration(s, &n) || n <= 0)
		return DPT_EINVAL;
	*seconds = n;
	return 0;
}

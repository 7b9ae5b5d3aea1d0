#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dptrain/error.h>

#include "buf.h"
#include "parse.h"
#include "setting_names.h"
#include "settings.h"
#include "uri.h"

#ifndef DPT_COORDINATOR_PATH
#define DPT_COORDINATOR_PATH "/usr/bin/dptrain-coordinator"
#endif
#define DPT_DEFAULT_CONFIG "/etc/slurm/dptrain.conf"

const char *dpt__gpu_bind_string(enum dpt__gpu_bind b)
{
	return b == DPT_GPU_BIND_RANK ? "rank" : "none";
}

static int parse_gpu_bind(const char *v, enum dpt__gpu_bind *out)
{
	if (strcmp(v, "none") == 0)
		*out = DPT_GPU_BIND_NONE;
	else if (strcmp(v, "rank") == 0)
		*out = DPT_GPU_BIND_RANK;
	else
		return DPT_EINVAL;
	return 0;
}

static int copy_str(char *dst, size_t size, const char *value, const char *what,
		    dpt__report_fn report)
{
	if (strlen(value) >= size) {
		report("dptrain: %s: value longer than %zu characters", what,
		       size - 1);
		return DPT_EINVAL;
	}
	memcpy(dst, value, strlen(value) + 1);
	return 0;
}

/* "auto", "N" seconds as a duration, or "Nsteps". */
static int parse_every(const char *v, struct dpt__ckpt_every *out)
{
	long secs, steps;

	if (dpt__parse_ckpt_every(v, &secs, &steps))
		return DPT_EINVAL;
	if (strcmp(v, "auto") == 0)
		*out = (struct dpt__ckpt_every){DPT_EVERY_AUTO, 0};
	else if (steps)
		*out = (struct dpt__ckpt_every){DPT_EVERY_STEPS, steps};
	else
		*out = (struct dpt__ckpt_every){DPT_EVERY_SECONDS, secs};
	return 0;
}

static bool valid_backend(const char *v)
{
	return strcmp(v, "auto") == 0 || strcmp(v, "nccl") == 0 ||
	       strcmp(v, "cpu") == 0;
}

/*
 * The form of a checkpoint URI (substituted) that is compared with the
 * site's roots, into OUT: the storage's own reading of it (common/uri.h,
 * the grammar the library opens it with), in its canonical spelling.
 * A file:// path is decoded once, here as in the storage, so what is
 * compared is what it opens (the URI itself is exported unchanged).
 * Returns NULL, or why URI is refused: what the storage would refuse (a
 * '.' or '..' component, which could climb out of an allowed root, a bad
 * escape, a bad bucket or prefix), or a result longer than SIZE.
 */
static const char *canonical_uri(const char *uri, char *out, size_t size)
{
	struct dpt__storage_uri u;
	const char *why = dpt__storage_uri_form_problem(uri);
	int rc;

	if (why)
		return why;
	rc = dpt__storage_uri_parse(uri, &u, &why);
	if (rc)
		return rc == DPT_EINVAL ? why : dpt_strerror(rc);
	rc = dpt__storage_uri_canonical(&u, out, size);
	dpt__storage_uri_release(&u);
	return rc ? "too long" : NULL;
}

/* Why NAME cannot name a run, or NULL. The library appends it to the
 * checkpoint URI as one path component, which the storage decodes. */
static const char *run_problem(const char *name)
{
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return "'.' and '..' name directories, not a run";
	if (strpbrk(name, "/% \t\n"))
		return "a run name has no '/', '%' or spaces";
	return NULL;
}

/* Why NAME is no list of shapes (common/shape.h), or NULL. The reason
 * names the shape and the form: the plugin runs one thread. */
static const char *shapes_problem(const char *list)
{
	static char why[256];
	struct dpt__shapes s;

	return dpt__shapes_parse(list, &s, why, sizeof(why)) ? why : NULL;
}

/* How an admin key's value is read (and a --dp- option's). */
enum key_kind {
	K_NONE,	    /* no such key: a row without a --dp- option */
	K_BOOL,	    /* yes or no */
	K_ABSPATH,  /* an absolute path */
	K_STRING,   /* any string that fits */
	K_URI,	    /* a checkpoint URI (before substitution) */
	K_ROOTS,    /* a comma-separated list of such URIs */
	K_EVERY,    /* auto, a duration or Nsteps */
	K_DURATION, /* a duration of at least MIN seconds */
	K_LONG,	    /* a number from MIN to MAX */
	K_BACKEND,  /* auto, nccl or cpu */
	K_GPU_BIND, /* none or rank */
	K_PORT,	    /* off, or a TCP port from MIN to MAX (0: any free one) */
	K_RUN,	    /* a run name, or none: the job's name */
	K_REQUEUE,  /* auto or off */
	K_RANGE,    /* a node count or MIN-MAX, from MIN to MAX */
	K_FLAG,	    /* no value: true */
	K_YES,	    /* yes or no; no value: yes */
	K_SHAPES,   /* a list of shapes (common/shape.h) */
};

/*
 * The admin keys of dptrain.conf(5) and plugstack.conf that are no setting
 * of a step (the settings' keys are their rows' KEYS, common/settings.def):
 * the switch, the file, the program. Their columns are the KEY columns of
 * the rows.
 */
/* clang-format off */
#define SITE_KEYS(KEY)                                                        \
	KEY("enabled", K_BOOL, enabled, "yes", 0, 0, "yes or no")             \
	KEY("config", K_ABSPATH, config_path, DPT_DEFAULT_CONFIG, 0, 0,       \
	    "an absolute path")                                               \
	KEY("coordinator", K_ABSPATH, coordinator, DPT_COORDINATOR_PATH, 0,   \
	    0, "an absolute path")
/* clang-format on */

/* A key: its kind, its field in struct dpt__admin, its built-in value
 * (NULL: none, the field's zero), its bounds, and what a bad value is
 * told to be instead. */
static const struct admin_key {
	const char *key;
	enum key_kind kind;
	size_t offset, size;
	const char *def;
	long min, max;
	const char *expected;
} admin_keys[] = {
#define KEY(key, kind, field, def, min, max, expected)                         \
	{key,                                                                  \
	 kind,                                                                 \
	 offsetof(struct dpt__admin, field),                                   \
	 sizeof(((struct dpt__admin *)0)->field),                              \
	 def,                                                                  \
	 min,                                                                  \
	 max,                                                                  \
	 expected},
#define NO_KEYS
#define X(id, option, env, flag, srun, user, keys, coord) keys
	SITE_KEYS(KEY) DPT_SETTINGS(X)
#include "settings_end.h"
};

/* VALUE into the field at K's offset in BASE (a struct dpt__admin, or a
 * struct dpt__user for the kinds of --dp- options); 0, or DPT_ECONFIG
 * with *WHY set (or after REPORT for what copy_str says itself). */
static int set_key(void *base, const struct admin_key *k, const char *value,
		   const char **why, dpt__report_fn report)
{
	struct dpt__admin *a = base; /* K_ROOTS */
	void *field = (char *)base + k->offset;
	long n;

	*why = NULL;
	switch (k->kind) {
	case K_BOOL:
		return dpt__parse_bool(value, field) ? DPT_ECONFIG : 0;
	case K_ABSPATH:
		if (value[0] != '/')
			return DPT_ECONFIG;
		/* fall through */
	case K_STRING:
	case K_URI:
	case K_RUN:
	case K_SHAPES:
		*why = k->kind == K_URI	  ? dpt__storage_uri_form_problem(value)
		       : k->kind == K_RUN ? run_problem(value)
		       : k->kind == K_SHAPES ? shapes_problem(value)
					     : NULL;
		if (*why)
			return DPT_ECONFIG;
		return copy_str(field, k->size, value, k->key, report)
			       ? DPT_ECONFIG
			       : 0;
	case K_ROOTS: {
		char list[DPT_CFG_STR * 2], *save = NULL, *tok;

		if (copy_str(list, sizeof(list), value, k->key, report))
			return DPT_ECONFIG;
		a->n_allowed_roots = 0;
		for (tok = strtok_r(list, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			if ((*why = dpt__storage_uri_form_problem(tok)))
				return DPT_ECONFIG;
			if (a->n_allowed_roots == DPT_CFG_ROOTS) {
				*why = "more than 16 roots";
				return DPT_ECONFIG;
			}
			if (copy_str(a->allowed_roots[a->n_allowed_roots++],
				     DPT_CFG_STR, tok, k->key, report))
				return DPT_ECONFIG;
		}
		return 0;
	}
	case K_EVERY:
		return parse_every(value, field) ? DPT_ECONFIG : 0;
	case K_DURATION:
		if (dpt__parse_duration(value, &n) || n < k->min)
			return DPT_ECONFIG;
		*(long *)field = n;
		return 0;
	case K_LONG:
		if (dpt__parse_long(value, k->min, k->max, &n))
			return DPT_ECONFIG;
		*(long *)field = n;
		return 0;
	case K_BACKEND:
		if (!valid_backend(value))
			return DPT_ECONFIG;
		snprintf(field, k->size, "%s", value);
		return 0;
	case K_GPU_BIND:
		return parse_gpu_bind(value, field) ? DPT_ECONFIG : 0;
	case K_PORT:
		if (strcmp(value, "off") == 0)
			n = -1;
		else if (dpt__parse_long(value, k->min, k->max, &n) ||
			 (n > 0 && n < 1024))
			return DPT_ECONFIG; /* the coordinator is never root */
		*(long *)field = n;
		return 0;
	case K_REQUEUE:
		if (strcmp(value, "auto") && strcmp(value, "off"))
			return DPT_ECONFIG;
		*(enum dpt__requeue *)field = strcmp(value, "auto") == 0
						      ? DPT_REQUEUE_AUTO
						      : DPT_REQUEUE_OFF;
		return 0;
	case K_RANGE:
		return dpt__parse_range(value, k->min, k->max, field,
					(long *)field + 1)
			       ? DPT_ECONFIG
			       : 0;
	case K_FLAG:
		*(bool *)field = true;
		return 0;
	case K_YES:
		return dpt__parse_bool(value, field) ? DPT_ECONFIG : 0;
	case K_NONE:
		break;
	}
	return DPT_ECONFIG;
}

int dpt__admin_set(struct dpt__admin *a, const char *key, const char *value,
		   const char *src, dpt__report_fn report)
{
	for (size_t i = 0; i < sizeof(admin_keys) / sizeof(*admin_keys); i++) {
		const struct admin_key *k = &admin_keys[i];
		const char *why;

		if (strcmp(key, k->key) != 0)
			continue;
		if (set_key(a, k, value, &why, report) == 0)
			return 0;
		if (why)
			report("dptrain: %s: %s='%s': %s", src, key, value,
			       why);
		else
			report("dptrain: %s: %s='%s': expected %s", src, key,
			       value, k->expected);
		return DPT_ECONFIG;
	}
	report("dptrain: %s: unknown key '%s' (see dptrain.conf(5))", src, key);
	return DPT_ECONFIG;
}

static void quiet(const char *fmt, ...)
{
	(void)fmt;
}

void dpt__admin_defaults(struct dpt__admin *a)
{
	(void)dpt__admin_set_defaults(a, quiet);
}

int dpt__admin_set_defaults(struct dpt__admin *a, dpt__report_fn report)
{
	int rc = 0;

	*a = (struct dpt__admin){0};
	for (size_t i = 0; i < sizeof(admin_keys) / sizeof(*admin_keys); i++)
		if (admin_keys[i].def)
			rc |= dpt__admin_set(a, admin_keys[i].key,
					     admin_keys[i].def,
					     "built-in default", report);
	return rc ? DPT_ECONFIG : 0;
}

struct file_ctx {
	struct dpt__admin *a;
	dpt__report_fn report;
	char src[DPT_CFG_STR + 16];
};

static int file_key(void *ctx, const char *key, const char *value, int lineno)
{
	struct file_ctx *f = ctx;
	char src[DPT_CFG_STR + 32];
	snprintf(src, sizeof(src), "%s:%d", f->src, lineno);
	if (strcmp(key, "config") == 0) {
		f->report("dptrain: %s: 'config' is only valid in "
			  "plugstack.conf",
			  src);
		return DPT_ECONFIG;
	}
	return dpt__admin_set(f->a, key, value, src, f->report);
}

static void file_error(void *ctx, int lineno, const char *what)
{
	struct file_ctx *f = ctx;
	f->report("dptrain: %s:%d: %s", f->src, lineno, what);
}

int dpt__admin_load(struct dpt__admin *a, int ac, char **av,
		    dpt__report_fn report)
{
	struct file_ctx f = {.a = a, .report = report};
	bool named = false;
	char word[DPT_CFG_STR * 2], *key, *value;
	int rc;

	/* The config file is read first so that plugstack.conf arguments
	 * win; its path can only come from plugstack.conf. */
	for (int i = 0; i < ac; i++) {
		if (strncmp(av[i], "config=", 7) == 0) {
			rc = dpt__admin_set(a, "config", av[i] + 7,
					    "plugstack.conf", report);
			if (rc)
				return rc;
			named = true;
		}
	}
	snprintf(f.src, sizeof(f.src), "%s", a->config_path);
	rc = dpt__read_kv_file(a->config_path, file_key, file_error, &f);
	if (rc == DPT_ENOENT && !named)
		rc = 0;
	else if (rc == DPT_ENOENT || rc == DPT_ESYS) {
		report("dptrain: cannot read config file '%s'", a->config_path);
		return DPT_ECONFIG;
	}
	if (rc)
		return DPT_ECONFIG;

	for (int i = 0; i < ac; i++) {
		if (strlen(av[i]) >= sizeof(word)) {
			report("dptrain: plugstack.conf: argument too long");
			return DPT_ECONFIG;
		}
		memcpy(word, av[i], strlen(av[i]) + 1);
		if (dpt__split_kv(word, &key, &value)) {
			report("dptrain: plugstack.conf: '%s': expected "
			       "key=value",
			       av[i]);
			return DPT_ECONFIG;
		}
		if (strcmp(key, "config") == 0)
			continue;
		rc = dpt__admin_set(a, key, value, "plugstack.conf", report);
		if (rc)
			return rc;
	}
	if (a->min_grace > a->max_grace) {
		report("dptrain: min_grace is larger than max_grace");
		return DPT_ECONFIG;
	}
	if (a->def_keep > a->max_keep) {
		report("dptrain: keep=%ld is larger than max_keep=%ld",
		       a->def_keep, a->max_keep);
		return DPT_ECONFIG;
	}
	if (a->def_every.kind == DPT_EVERY_STEPS && a->min_ckpt_interval > 0) {
		report("dptrain: ckpt_every=%ldsteps cannot be held to "
		       "min_ckpt_interval: give ckpt_every a duration",
		       a->def_every.value);
		return DPT_ECONFIG;
	}
	if (!a->allow_requeue && !a->allow_requeue_off) {
		report("dptrain: allow_requeue=no and allow_requeue_off=no "
		       "contradict each other: set one of them to yes");
		return DPT_ECONFIG;
	}
	return 0;
}

/*
 * Every setting's value, by setting: its row's user column
 * (common/settings.def). For a --dp- option: its kind, its field in
 * struct dpt__user, the field that says it was given (none for the run,
 * the flags and the range), its bounds, and what a bad value is told to
 * be instead; K_NONE where the setting has no value of the plugin's.
 * Where the row says USER_ELSE_SITE, the common merge: the settings'
 * field is the user's if given, else the site's default; SITE, the
 * site's always (the other merges are dpt__settings_resolve's own code).
 * Every row with a kind has its merged value in the field of struct
 * dpt__settings of its name, which dpt__settings_value writes.
 */
#define NO_SET	    ((size_t)-1)
#define GIVEN(flag) offsetof(struct dpt__user, flag)
static const struct user_option {
	struct admin_key k; /* k.size: the settings' field's */
	size_t given;
	/* The field in struct dpt__settings; the site's in struct
	 * dpt__admin where the row merges it, else NO_SET. */
	size_t settings, site;
} user_options[DPT_SET_COUNT] = {
#define VALUE(kind, base, field, min, max, expected)                           \
	{                                                                      \
		NULL, kind, offsetof(struct base, field),                      \
			sizeof(((struct dpt__settings *)0)->field), NULL, min, \
			max, expected                                          \
	}
#define USER(kind, field, set, min, max, expected)                             \
	{                                                                      \
		VALUE(kind, dpt__user, field, min, max, expected), set,        \
			offsetof(struct dpt__settings, field), NO_SET          \
	}
#define USER_ELSE_SITE(kind, field, set, def, min, max, expected)              \
	{                                                                      \
		VALUE(kind, dpt__user, field, min, max, expected), set,        \
			offsetof(struct dpt__settings, field),                 \
			offsetof(struct dpt__admin, def)                       \
	}
#define SITE(kind, field)                                                      \
	{                                                                      \
		VALUE(kind, dpt__admin, field, 0, 0, NULL), NO_SET,            \
			offsetof(struct dpt__settings, field),                 \
			offsetof(struct dpt__admin, field)                     \
	}
#define NO_USER                                                                \
	{                                                                      \
		{NULL, K_NONE, 0, 0, NULL, 0, 0, NULL}, NO_SET, NO_SET, NO_SET \
	}
#define X(id, option, env, flag, srun, user, keys, coord) [DPT_SET_##id] = user,
	DPT_SETTINGS(X)
#include "settings_end.h"
#undef VALUE
};

/* The settings' field of a row is the user's, and the site's where it
 * merges them, in size; a merge of the user's has a field that says the
 * user gave it. */
#define SAME_SIZE(a, fa, b, fb)                                                \
	_Static_assert(sizeof(((struct a *)0)->fa) ==                          \
			       sizeof(((struct b *)0)->fb),                    \
		       #fa " and " #fb " differ in size");
#define USER(kind, field, set, min, max, expected)                             \
	SAME_SIZE(dpt__settings, field, dpt__user, field)
#define USER_ELSE_SITE(kind, field, set, def, min, max, expected)              \
	_Static_assert((set) != NO_SET,                                        \
		       #field ": no field says it was given");                 \
	SAME_SIZE(dpt__settings, field, dpt__user, field)                      \
	SAME_SIZE(dpt__settings, field, dpt__admin, def)
#define SITE(kind, field) SAME_SIZE(dpt__settings, field, dpt__admin, field)
#define NO_USER
#define X(id, option, env, flag, srun, user, keys, coord) user
DPT_SETTINGS(X)
#include "settings_end.h"
#undef SAME_SIZE

int dpt__user_set(struct dpt__user *u, const char *name, const char *value,
		  dpt__report_fn report)
{
	for (int i = 0; i < DPT_SET_COUNT; i++) {
		const struct user_option *o = &user_options[i];
		const char *why;
		bool none = !value || !*value;

		if (!dpt__setting_names[i].option ||
		    strcmp(name, dpt__setting_names[i].option) != 0)
			continue;
		/* An optional value left out: the run is the job's name,
		 * --dp-private alone is yes. */
		if (none && (o->k.kind == K_RUN || o->k.kind == K_YES ||
			     o->k.kind == K_FLAG))
			value = o->k.kind == K_YES ? "yes" : "";
		else if (none) {
			report("dptrain: --dp-%s: a value is required", name);
			return DPT_EINVAL;
		}
		if (o->k.kind == K_RUN)
			u->train = true;
		if ((o->k.kind == K_RUN || o->k.kind == K_URI) &&
		    strlen(value) >= o->k.size) {
			report("dptrain: --dp-%s: longer than %zu characters",
			       name, o->k.size - 1);
			return DPT_EINVAL;
		}
		if ((o->k.kind != K_RUN || *value) &&
		    set_key(u, &o->k, value, &why, report)) {
			if (why && o->k.kind == K_RUN)
				report("dptrain: --dp-%s: '%s': %s: give the "
				       "run a name of letters, digits, '.', "
				       "'_', '-' or '~'",
				       name, value, why);
			else if (why)
				report("dptrain: --dp-%s: '%s': %s", name,
				       value, why);
			else
				report("dptrain: --dp-%s: '%s': expected %s",
				       name, value, o->k.expected);
			return DPT_EINVAL;
		}
		if (o->k.kind == K_RUN && !*value)
			u->run[0] = '\0';
		if (o->given != NO_SET)
			*(bool *)((char *)u + o->given) = true;
		return 0;
	}
	report("dptrain: --dp-%s: unknown option", name);
	return DPT_EINVAL;
}

/* Substitute %u (user), %j (job id) and %% in IN. */
static int substitute(const char *in, const char *user, const char *jobid,
		      char *out, size_t size, dpt__report_fn report)
{
	struct dpt__buf b;
	int rc = 0;

	dpt__buf_init(&b, size - 1);
	for (const char *p = in; *p && !rc; p++) {
		if (*p != '%') {
			rc = dpt__buf_append(&b, p, 1);
			continue;
		}
		switch (*++p) {
		case 'u':
			rc = dpt__buf_puts(&b, user);
			break;
		case 'j':
			rc = dpt__buf_puts(&b, jobid);
			break;
		case '%':
			rc = dpt__buf_append(&b, "%", 1);
			break;
		default:
			report("dptrain: '%s': unknown substitution '%%%c' "
			       "(use %%u for the user, %%j for the job id)",
			       in, *p ? *p : ' ');
			rc = DPT_EINVAL;
			p -= !*p;
		}
	}
	if (rc == DPT_ETOOBIG)
		report("dptrain: '%s': longer than %zu characters after "
		       "substitution",
		       in, size - 1);
	if (!rc)
		snprintf(out, size, "%s", b.data ? b.data : "");
	dpt__buf_release(&b);
	return rc ? DPT_EINVAL : 0;
}

/* --dp-OPTION's VALUE within the site's MAX (of WHAT): 0, or DPT_ERANGE
 * after saying so. */
static int at_most(const char *option, long value, long max, const char *what,
		   dpt__report_fn report)
{
	if (value <= max)
		return 0;
	report("dptrain: --dp-%s=%ld: the site allows at most %ld %s", option,
	       value, max, what);
	return DPT_ERANGE;
}

/* Whether --dp-global-batch leaves S no shape to choose, said. */
static bool divided_by_none(const struct dpt__settings *s,
			    dpt__report_fn report)
{
	struct dpt__shape out[DPT_SHAPES_CONCRETE_MAX];
	struct dpt__shapes list;
	char why[160];

	if (!s->shapes[0]) {
		report("dptrain: --dp-global-batch=%ld is for --dp-shapes, "
		       "whose sizes it filters: give --dp-shapes too, or "
		       "leave it out",
		       s->global_batch);
		return true;
	}
	if (dpt__shapes_parse(s->shapes, &list, why, sizeof(why)) ||
	    dpt__shapes_expand(&list, s->global_batch, out,
			       DPT_SHAPES_CONCRETE_MAX))
		return false; /* a bad list is said where it is parsed */
	report("dptrain: --dp-shapes=%s: no shape's world size (nodes x "
	       "tasks a node) divides --dp-global-batch=%ld: list a shape "
	       "whose world divides it",
	       s->shapes, s->global_batch);
	return true;
}

/* S, merged, within the site's bounds A (U: what the user gave); 0 or
 * DPT_ERANGE after REPORT with a message that gives the bound. */
static int check_bounds(const struct dpt__settings *s,
			const struct dpt__admin *a, const struct dpt__user *u,
			dpt__report_fn report)
{
	char buf[64], lo[32], hi[32];

	if (s->shapes[0] && !a->allow_shapes) {
		report("dptrain: --dp-shapes: the site does not let jobs "
		       "change their size (allow_shapes=no): leave the option "
		       "out");
		return DPT_ERANGE;
	}
	if (s->shapes[0] && s->nodes_min) {
		report("dptrain: --dp-shapes and --dp-nodes: give one; a node "
		       "range MIN-MAX is the shapes MIN-MAXxG, G the GPUs a "
		       "node the job asks for");
		return DPT_EINVAL;
	}
	if (s->global_batch && divided_by_none(s, report))
		return DPT_EINVAL;
	if (at_most("keep", s->keep, a->max_keep, "checkpoints", report))
		return DPT_ERANGE;
	if (s->grace < a->min_grace || s->grace > a->max_grace) {
		report("dptrain: --dp-grace=%s: the site allows %s to %s",
		       dpt__format_duration(s->grace, buf, sizeof(buf)),
		       dpt__format_duration(a->min_grace, lo, sizeof(lo)),
		       dpt__format_duration(a->max_grace, hi, sizeof(hi)));
		return DPT_ERANGE;
	}
	/* A number of steps cannot be compared with a duration before the
	 * program runs, and ranks cannot each time theirs: where the site
	 * sets a minimum, the interval is a duration. */
	if (s->every.kind == DPT_EVERY_STEPS && a->min_ckpt_interval > 0) {
		report("dptrain: --dp-ckpt-every=%ldsteps: the site sets a "
		       "minimum checkpoint interval (%s), which a number of "
		       "steps cannot be held to: give a duration of at least "
		       "%s, or auto",
		       s->every.value,
		       dpt__format_duration(a->min_ckpt_interval, lo,
					    sizeof(lo)),
		       dpt__format_duration(a->min_ckpt_interval, hi,
					    sizeof(hi)));
		return DPT_ERANGE;
	}
	if (s->every.kind == DPT_EVERY_SECONDS &&
	    s->every.value < a->min_ckpt_interval) {
		report("dptrain: --dp-ckpt-every=%s: the site's minimum "
		       "checkpoint interval is %s",
		       dpt__format_duration(s->every.value, buf, sizeof(buf)),
		       dpt__format_duration(a->min_ckpt_interval, lo,
					    sizeof(lo)));
		return DPT_ERANGE;
	}
	if (u->metrics_set && !a->allow_user_metrics) {
		report("dptrain: --dp-metrics: the site does not let jobs "
		       "choose their metrics endpoint "
		       "(allow_user_metrics=no): leave the option out%s",
		       a->metrics_port >= 0 ? " (the site's metrics_port "
					      "applies)"
					    : "");
		return DPT_ERANGE;
	}
	if (s->requeue == DPT_REQUEUE_OFF && !a->allow_requeue_off) {
		report("dptrain: --dp-requeue=off: the site requires automatic "
		       "requeue (allow_requeue_off=no)");
		return DPT_ERANGE;
	}
	if (s->requeue == DPT_REQUEUE_AUTO && !a->allow_requeue) {
		report("dptrain: --dp-requeue=auto: the site does not let "
		       "dptrain requeue jobs (allow_requeue=no): leave the "
		       "option out, the step still stops and checkpoints in "
		       "time");
		return DPT_ERANGE;
	}
	return at_most("max-requeues", s->max_requeues, a->max_requeues,
		       "requeues of a job", report);
}

/* S's run name checked, and its checkpoint URI: the user's or the site's
 * root, with %u and %j substituted, canonical, and under a root the site
 * allows. 0 or DPT_EINVAL/DPT_ERANGE after REPORT. */
static int resolve_ckpt_uri(struct dpt__settings *s, const struct dpt__admin *a,
			    const struct dpt__user *u, const char *user,
			    const char *jobid, dpt__report_fn report)
{
	char want[DPT_CFG_STR];
	const char *why;
	int rc;

	if (s->run[0] && (why = run_problem(s->run))) {
		report("dptrain: the job name '%s' cannot name the run (%s): "
		       "name it with --dp-train=NAME",
		       s->run, why);
		return DPT_EINVAL;
	}
	if (u->ckpt_uri[0]) {
		rc = substitute(u->ckpt_uri, user, jobid, s->ckpt_uri,
				sizeof(s->ckpt_uri), report);
	} else if (a->def_ckpt_root[0]) {
		/* The root holds one directory per run, which the library
		 * appends (CKPT_URI/RUN): not here too. */
		rc = substitute(a->def_ckpt_root, user, jobid, s->ckpt_uri,
				sizeof(s->ckpt_uri), report);
	} else {
		rc = 0;
	}
	if (rc)
		return rc;
	if (!s->ckpt_uri[0])
		return 0;
	if ((why = canonical_uri(s->ckpt_uri, want, sizeof(want)))) {
		if (u->ckpt_uri[0])
			report("dptrain: --dp-ckpt=%s: %s", s->ckpt_uri, why);
		else
			report("dptrain: checkpoint URI '%s' (the site's "
			       "ckpt_root): %s",
			       s->ckpt_uri, why);
		return DPT_EINVAL;
	}
	if (a->n_allowed_roots > 0) {
		char root[DPT_CFG_STR], canon[DPT_CFG_STR];
		for (int i = 0; i < a->n_allowed_roots; i++) {
			size_t n;
			if (substitute(a->allowed_roots[i], user, jobid, root,
				       sizeof(root), report))
				return DPT_EINVAL;
			if ((why = canonical_uri(root, canon, sizeof(canon)))) {
				report("dptrain: allowed_roots: '%s': %s", root,
				       why);
				return DPT_EINVAL;
			}
			/* Both normalised: a prefix match must end at a
			 * component boundary (/ckpt/al does not allow
			 * /ckpt/alice), and neither holds '..'. */
			n = strlen(canon);
			if (strncmp(want, canon, n) == 0 &&
			    (want[n] == '\0' || want[n] == '/'))
				return 0;
		}
		report("dptrain: --dp-ckpt=%s: not under a checkpoint root the "
		       "site allows (%s%s)",
		       s->ckpt_uri, a->allowed_roots[0],
		       a->n_allowed_roots > 1 ? ", ..." : "");
		return DPT_ERANGE;
	}
	return 0;
}

int dpt__settings_resolve(struct dpt__settings *s, const struct dpt__admin *a,
			  const struct dpt__user *u, const char *user,
			  const char *jobid, const char *job_name,
			  dpt__report_fn report)
{
	int rc;

	*s = (struct dpt__settings){
		.min_workers = u->min_workers_set ? u->min_workers : 1,
		.requeue = u->requeue_set     ? u->requeue
			   : a->allow_requeue ? DPT_REQUEUE_AUTO
					      : DPT_REQUEUE_OFF,
		.nodes_min = u->nodes_min,
		.nodes_max = u->nodes_max,
		.global_batch = u->global_batch,
		.torchelastic = u->torchelastic,
		.verbose = u->verbose,
	};
	/* The rows' USER_ELSE_SITE and SITE; the others above and below. */
	for (int i = 0; i < DPT_SET_COUNT; i++) {
		const struct user_option *o = &user_options[i];
		const char *from;

		if (o->site == NO_SET)
			continue;
		from = o->given != NO_SET && *(const bool *)((const char *)u +
							     o->given)
			       ? (const char *)u + o->k.offset
			       : (const char *)a + o->site;
		memcpy((char *)s + o->settings, from, o->k.size);
	}
	snprintf(s->shapes, sizeof(s->shapes), "%s", u->shapes);
	snprintf(s->run, sizeof(s->run), "%s",
		 u->run[0]  ? u->run
		 : job_name ? job_name
			    : "");

	rc = check_bounds(s, a, u, report);
	return rc ? rc : resolve_ckpt_uri(s, a, u, user, jobid, report);
}

const char *dpt__every_string(const struct dpt__ckpt_every *e, char *buf,
			      size_t size)
{
	switch (e->kind) {
	case DPT_EVERY_STEPS:
		snprintf(buf, size, "%ldsteps", e->value);
		return buf;
	case DPT_EVERY_SECONDS:
		snprintf(buf, size, "%lds", e->value);
		return buf;
	default:
		return "auto";
	}
}

const char *dpt__settings_value(const struct dpt__settings *s,
				enum dpt__setting id, enum dpt__value_form form,
				char *buf, size_t size)
{
	const struct user_option *o = &user_options[id];
	const void *field = (const char *)s + o->settings;
	bool env = form == DPT_FORM_ENV;
	long n = 0;

	if (o->settings == NO_SET)
		return NULL;
	if (o->k.size == sizeof(long))
		memcpy(&n, field, sizeof(n));
	switch (o->k.kind) {
	case K_LONG:
		snprintf(buf, size, "%ld", n);
		return buf;
	case K_DURATION: /* a bare number would be minutes */
		snprintf(buf, size, env ? "%ld" : "%lds", n);
		return buf;
	case K_PORT:
		if (n < 0)
			return "off";
		snprintf(buf, size, "%ld", n);
		return buf;
	case K_RANGE: /* MIN, then MAX */
		if (!n)
			return NULL;
		snprintf(buf, size, "%ld-%ld", n, ((const long *)field)[1]);
		return buf;
	case K_EVERY:
		return dpt__every_string(field, buf, size);
	case K_REQUEUE:
		return *(const enum dpt__requeue *)field == DPT_REQUEUE_OFF
			       ? "off"
			       : "auto";
	case K_GPU_BIND:
		return dpt__gpu_bind_string(*(const enum dpt__gpu_bind *)field);
	case K_BOOL:
	case K_YES:
	case K_FLAG:
		return *(const bool *)field ? (env ? "1" : "yes")
					    : (env ? "0" : "no");
	case K_SHAPES: /* none given: nothing to pass */
		return *(const char *)field ? field : NULL;
	case K_ABSPATH:
	case K_STRING:
	case K_URI:
	case K_RUN:
	case K_BACKEND:
		return field;
	case K_ROOTS:
	case K_NONE:
		break;
	}
	return NULL;
}

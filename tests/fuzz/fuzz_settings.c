/*
 * libFuzzer target for the plugin's configuration (spank/settings.c): the
 * admin's dptrain.conf and plugstack.conf words (dpt__admin_load, every
 * key of the settings' rows and SITE_KEYS), the user's --dp-* options
 * (dpt__user_set, which spank/plugin.c's option callback calls) and their
 * resolution (dpt__settings_resolve).
 *
 * Input, in lines: dptrain.conf up to a line "%%", then plugstack words
 * (one a line) up to the next "%%", then options ("name=value", or "name"
 * for an option without its argument) up to the next "%%", then the job
 * name. The file is handed over as /proc/self/fd/N of a memfd; plugstack
 * words "config=..." are dropped, since they would make the target read
 * any file of this machine (/dev/zero, /dev/stdin).
 *
 * Checked besides ASan/UBSan: an option set twice gives the same state
 * (Slurm may call the callback twice); a loaded admin configuration
 * holds its cross-key rules; resolved settings keep to the site's bounds;
 * and a checkpoint URI accepted under allowed_roots is, as the storage
 * reads it (common/uri.c), under one of those roots as the storage reads
 * them.
 */
#define _GNU_SOURCE
#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "buf.h"
#include "settings.h"
#include "uri.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

__attribute__((format(printf, 1, 2))) static void report(const char *fmt, ...)
{
	char msg[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
}

static bool same_user(const struct dpt__user *a, const struct dpt__user *b)
{
	return a->train == b->train && strcmp(a->run, b->run) == 0 &&
	       strcmp(a->ckpt_uri, b->ckpt_uri) == 0 &&
	       strcmp(a->shapes, b->shapes) == 0 &&
	       a->every_set == b->every_set && a->keep_set == b->keep_set &&
	       a->grace_set == b->grace_set &&
	       a->requeue_set == b->requeue_set &&
	       a->min_workers_set == b->min_workers_set &&
	       a->backend_set == b->backend_set &&
	       a->gpu_bind_set == b->gpu_bind_set &&
	       a->max_requeues_set == b->max_requeues_set &&
	       a->every.kind == b->every.kind &&
	       a->every.value == b->every.value && a->keep == b->keep &&
	       a->grace == b->grace && a->min_workers == b->min_workers &&
	       a->max_requeues == b->max_requeues && a->requeue == b->requeue &&
	       strcmp(a->backend, b->backend) == 0 &&
	       a->gpu_bind == b->gpu_bind &&
	       a->torchelastic == b->torchelastic && a->verbose == b->verbose &&
	       a->private_set == b->private_set &&
	       a->private_run == b->private_run;
}

/* dpt__user_set, as spank/plugin.c's opt_cb calls it, then once more on
 * the result. */
static int option(struct dpt__user *u, const char *name, const char *value)
{
	struct dpt__user again;
	int rc;

	rc = dpt__user_set(u, name, value, report);
	if (rc) {
		if (rc != DPT_EINVAL)
			abort();
		return rc;
	}
	again = *u;
	if (dpt__user_set(&again, name, value, report) || !same_user(u, &again))
		abort();
	return 0;
}

/* %u, %j and %% as spank/settings.c substitutes them; NULL if invalid. */
static char *substitute(const char *in)
{
	struct dpt__buf b;
	int rc = 0;

	dpt__buf_init(&b, 1 << 16);
	for (const char *p = in; *p && !rc; p++) {
		if (*p != '%') {
			rc = dpt__buf_append(&b, p, 1);
			continue;
		}
		p++;
		if (*p == 'u')
			rc = dpt__buf_puts(&b, "alice");
		else if (*p == 'j')
			rc = dpt__buf_puts(&b, "42");
		else if (*p == '%')
			rc = dpt__buf_puts(&b, "%");
		else
			rc = DPT_EINVAL;
	}
	if (rc) {
		dpt__buf_release(&b);
		return NULL;
	}
	return dpt__buf_steal(&b);
}

/* Is U (as the storage reads it) under ROOT (likewise)? */
static bool under(const struct dpt__storage_uri *u,
		  const struct dpt__storage_uri *root)
{
	size_t n;

	if (u->scheme != root->scheme)
		return false;
	if (u->scheme == DPT__STORAGE_S3)
		return strcmp(u->bucket, root->bucket) == 0 &&
		       strncmp(u->prefix, root->prefix, strlen(root->prefix)) ==
			       0;
	n = strlen(root->path);
	if (strcmp(root->path, "/") == 0)
		return true;
	return strncmp(u->path, root->path, n) == 0 &&
	       (u->path[n] == '\0' || u->path[n] == '/');
}

/* A URI accepted under the allowed roots is under one as the storage
 * opens them. Skipped when a root is one the storage cannot read. */
static void check_roots(const struct dpt__admin *a, const char *uri)
{
	struct dpt__storage_uri u, r;
	bool ok = false;

	if (a->n_allowed_roots == 0 || dpt__storage_uri_parse(uri, &u, NULL))
		return;
	for (int i = 0; i < a->n_allowed_roots; i++) {
		char *root = substitute(a->allowed_roots[i]);
		int rc = root ? dpt__storage_uri_parse(root, &r, NULL)
			      : DPT_EINVAL;

		free(root);
		if (rc) {
			dpt__storage_uri_release(&u);
			return;
		}
		ok = ok || under(&u, &r);
		dpt__storage_uri_release(&r);
	}
	if (!ok)
		abort();
	dpt__storage_uri_release(&u);
}

static void check_admin(const struct dpt__admin *a)
{
	if (a->min_grace > a->max_grace || a->def_keep > a->max_keep ||
	    a->def_keep < 1 || a->n_allowed_roots < 0 ||
	    a->n_allowed_roots > DPT_CFG_ROOTS || a->node_mtbf < 1 ||
	    a->min_ckpt_interval < 0 || a->heartbeat_ms < 10 ||
	    (a->def_every.kind == DPT_EVERY_STEPS && a->min_ckpt_interval > 0))
		abort();
	if (strnlen(a->config_path, sizeof(a->config_path)) ==
		    sizeof(a->config_path) ||
	    strnlen(a->def_ckpt_root, sizeof(a->def_ckpt_root)) ==
		    sizeof(a->def_ckpt_root) ||
	    strnlen(a->bind_addr, sizeof(a->bind_addr)) == sizeof(a->bind_addr))
		abort();
	for (int i = 0; i < a->n_allowed_roots; i++)
		if (strncmp(a->allowed_roots[i], "file:///", 8) &&
		    (strncmp(a->allowed_roots[i], "s3://", 5) ||
		     a->allowed_roots[i][5] == '\0' ||
		     a->allowed_roots[i][5] == '/'))
			abort();
}

static void check_settings(const struct dpt__settings *s,
			   const struct dpt__admin *a)
{
	if (s->keep < 1 || s->keep > a->max_keep || s->grace < a->min_grace ||
	    s->grace > a->max_grace || s->max_requeues < 0 ||
	    s->max_requeues > a->max_requeues || s->min_workers < 1)
		abort();
	if (s->every.kind == DPT_EVERY_SECONDS &&
	    (s->every.value < 1 || s->every.value < a->min_ckpt_interval))
		abort();
	if (s->every.kind == DPT_EVERY_STEPS &&
	    (s->every.value < 1 || a->min_ckpt_interval > 0))
		abort();
	if ((s->requeue == DPT_REQUEUE_OFF && !a->allow_requeue_off) ||
	    (s->requeue == DPT_REQUEUE_AUTO && !a->allow_requeue))
		abort();
	if (strcmp(s->run, ".") == 0 || strcmp(s->run, "..") == 0 ||
	    strpbrk(s->run, "/% \t\n"))
		abort();
	if (s->ckpt_uri[0])
		check_roots(a, s->ckpt_uri);
}

/* The next line of [*P, END) as a new string; NULL at the end. */
static char *line(const char **p, const char *end)
{
	const char *nl;
	char *s;

	if (*p >= end)
		return NULL;
	nl = memchr(*p, '\n', (size_t)(end - *p));
	if (!nl)
		nl = end;
	s = strndup(*p, (size_t)(nl - *p));
	*p = nl + (nl < end);
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size, *conf = p;
	char *av[32], *l, path[64], *job = NULL;
	struct dpt__admin a;
	struct dpt__user u;
	struct dpt__settings s;
	size_t conf_len;
	int ac = 0, fd;

	/* dptrain.conf: up to the first line "%%". */
	while ((l = line(&p, end))) {
		bool sep = strcmp(l, "%%") == 0;
		free(l);
		if (sep)
			break;
	}
	conf_len = (size_t)(p - conf);
	fd = memfd_create("dptrain.conf", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	if (conf_len && write(fd, conf, conf_len) != (ssize_t)conf_len)
		abort();
	snprintf(path, sizeof(path), "config=/proc/self/fd/%d", fd);
	av[ac++] = strdup(path);

	/* plugstack.conf words. */
	while ((l = line(&p, end))) {
		if (strcmp(l, "%%") == 0) {
			free(l);
			break;
		}
		if (ac == 32 || strncmp(l, "config=", 7) == 0) {
			free(l);
			continue;
		}
		av[ac++] = l;
	}

	dpt__admin_defaults(&a);
	memset(&u, 0, sizeof(u));
	if (dpt__admin_load(&a, ac, av, report) == 0)
		check_admin(&a);
	else
		dpt__admin_defaults(&a); /* options and resolution still run */

	/* The user's options. */
	while ((l = line(&p, end))) {
		char *eq;
		if (strcmp(l, "%%") == 0) {
			free(l);
			break;
		}
		eq = strchr(l, '=');
		if (eq)
			*eq = '\0';
		option(&u, l, eq ? eq + 1 : NULL);
		free(l);
	}
	job = line(&p, end);
	if (dpt__settings_resolve(&s, &a, &u, "alice", "42", job, report) == 0)
		check_settings(&s, &a);

	free(job);
	for (int i = 0; i < ac; i++)
		free(av[i]);
	close(fd);
	return 0;
}

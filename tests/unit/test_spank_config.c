/* The plugin's option and admin-config logic, without Slurm. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include <dptrain/error.h>

#include "spank/settings.h"

static char last[1024];

static void report(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last, sizeof(last), fmt, ap);
	va_end(ap);
}

/* S merged from A and U for alice's job 42, named job. */
static int resolve(struct dpt__settings *s, const struct dpt__admin *a,
		   const struct dpt__user *u)
{
	return dpt__settings_resolve(s, a, u, "alice", "42", "job", report);
}

/* The state of most tests: the site's defaults, a user who set nothing,
 * and room for what they resolve to. */
struct job {
	struct dpt__admin a;
	struct dpt__user u;
	struct dpt__settings s;
};

static int a_job(void **state)
{
	static struct job j;

	memset(&j, 0, sizeof(j));
	dpt__admin_defaults(&j.a);
	*state = &j;
	return 0;
}

static void user_values_are_checked(void **state)
{
	struct dpt__user u = {0};
	(void)state;
	assert_int_equal(dpt__user_set(&u, "train", "resnet", report), 0);
	assert_string_equal(u.run, "resnet");
	/* idempotent: the same option twice gives the same state */
	assert_int_equal(dpt__user_set(&u, "train", "resnet", report), 0);
	assert_string_equal(u.run, "resnet");
	assert_int_equal(dpt__user_set(&u, "train", "a/b", report), DPT_EINVAL);
	assert_non_null(strstr(last, "--dp-train"));

	assert_int_equal(dpt__user_set(&u, "keep", "3x", report), DPT_EINVAL);
	assert_non_null(strstr(last, "--dp-keep: '3x'"));
	assert_int_equal(dpt__user_set(&u, "grace", "10 min", report),
			 DPT_EINVAL);
	assert_non_null(strstr(last, "--dp-grace"));
	assert_non_null(strstr(last, "HH:MM:SS"));
	assert_int_equal(dpt__user_set(&u, "grace", "1:30:00", report), 0);
	assert_int_equal(u.grace, 5400);
	assert_int_equal(dpt__user_set(&u, "ckpt-every", "500steps", report),
			 0);
	assert_int_equal(u.every.kind, DPT_EVERY_STEPS);
	assert_int_equal(u.every.value, 500);
	assert_int_equal(dpt__user_set(&u, "ckpt-every", "0steps", report),
			 DPT_EINVAL);
	assert_int_equal(dpt__user_set(&u, "requeue", "never", report),
			 DPT_EINVAL);
	assert_non_null(strstr(last, "expected auto or off"));
	assert_int_equal(dpt__user_set(&u, "backend", "mpi", report),
			 DPT_EINVAL);
	assert_int_equal(dpt__user_set(&u, "ckpt", "/scratch/x", report),
			 DPT_EINVAL);
	assert_non_null(strstr(last, "file:///path or s3://"));
	assert_int_equal(dpt__user_set(&u, "ckpt", "s3:///x", report),
			 DPT_EINVAL);
	assert_int_equal(dpt__user_set(&u, "min-workers", "0", report),
			 DPT_EINVAL);
	assert_int_equal(dpt__user_set(&u, "keep", NULL, report), DPT_EINVAL);
}

static void requeue_keys_bound_the_user(void **state)
{
	struct job *j = *state;
	char *cap[] = {"max_requeues=5"};
	char *never[] = {"allow_requeue=no"};
	char *both[] = {"allow_requeue=no", "allow_requeue_off=no"};
	assert_int_equal(dpt__admin_load(&j->a, 1, cap, report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.max_requeues, 5);
	assert_int_equal(j->s.requeue, DPT_REQUEUE_AUTO);
	assert_int_equal(dpt__user_set(&j->u, "max-requeues", "2", report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.max_requeues, 2);
	assert_int_equal(dpt__user_set(&j->u, "max-requeues", "6", report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), DPT_ERANGE);
	assert_non_null(strstr(last, "at most 5 requeues"));
	assert_int_equal(dpt__user_set(&j->u, "max-requeues", "-1", report),
			 DPT_EINVAL);
	assert_non_null(strstr(last, "--dp-max-requeues: '-1'"));
	j->u = (struct dpt__user){0};

	/* A site without requeues: off by default, auto refused. */
	dpt__admin_defaults(&j->a);
	assert_int_equal(dpt__admin_load(&j->a, 1, never, report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.requeue, DPT_REQUEUE_OFF);
	dpt__user_set(&j->u, "requeue", "auto", report);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), DPT_ERANGE);
	assert_non_null(strstr(last, "allow_requeue=no"));

	dpt__admin_defaults(&j->a);
	assert_int_equal(dpt__admin_load(&j->a, 2, both, report), DPT_ECONFIG);
	assert_non_null(strstr(last, "contradict"));
	dpt__admin_defaults(&j->a);
	assert_int_equal(
		dpt__admin_set(&j->a, "max_requeues", "x", "t", report),
		DPT_ECONFIG);
	assert_non_null(strstr(last, "max_requeues='x'"));
}

/* mtbf= (one node's, default 30 days) and min_ckpt_interval= reach the
 * settings that stepd.c exports for --dp-ckpt-every=auto. */
static void mtbf_reaches_the_settings(void **state)
{
	struct job *j = *state;
	char *av[] = {"mtbf=7d", "min_ckpt_interval=2m"};
	char *bad[] = {"mtbf=0"};
	char *worse[] = {"mtbf=soon"};
	assert_int_equal(j->a.node_mtbf, 30 * 86400);
	assert_int_equal(dpt__admin_load(&j->a, 2, av, report), 0);
	dpt__user_set(&j->u, "train", "r1", report);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.node_mtbf, 7 * 86400);
	assert_int_equal(j->s.min_ckpt_interval, 120);
	assert_int_equal(j->s.every.kind, DPT_EVERY_AUTO);

	dpt__admin_defaults(&j->a);
	assert_int_equal(dpt__admin_load(&j->a, 1, bad, report), DPT_ECONFIG);
	assert_non_null(strstr(last, "mtbf='0': expected one node's mean "
				     "time between failures, a duration"));
	dpt__admin_defaults(&j->a);
	assert_int_equal(dpt__admin_load(&j->a, 1, worse, report), DPT_ECONFIG);
	assert_non_null(strstr(last, "mtbf='soon'"));
}

/* Options against the site's bounds of the test below: the result, and
 * the bound in the message (or the checkpoint URI where it is 0). */
static const struct bounded_case {
	const char *option, *value;
	int rc;
	const char *want;
} bounded[] = {
	{"keep", "6", DPT_ERANGE, "at most 5"},
	{"grace", "90s", DPT_ERANGE, "2m to 1h"},
	{"ckpt-every", "5m", DPT_ERANGE, "minimum checkpoint interval is 10m"},
	/* Steps cannot be held to a minimum interval: refused (1steps
	 * passed a 10m minimum before). */
	{"ckpt-every", "1steps", DPT_ERANGE,
	 "--dp-ckpt-every=1steps: the site sets a minimum checkpoint "
	 "interval (10m)"},
	{"requeue", "off", DPT_ERANGE, "allow_requeue_off=no"},
	/* Roots: substitution, and a prefix must end at a path boundary. */
	{"ckpt", "s3://ckpt/alice/run-%j", 0, "s3://ckpt/alice/run-42"},
	{"ckpt", "file:///lustre/alicex/r", DPT_ERANGE,
	 "not under a checkpoint root"},
	{"ckpt", "file:///lustre/%q", DPT_EINVAL, "unknown substitution"},
};

static void bounds_are_enforced_with_the_bound_in_the_message(void **state)
{
	struct job *j = *state;
	char *av[] = {"max_keep=5",
		      "min_grace=2m",
		      "max_grace=1h",
		      "min_ckpt_interval=10m",
		      "allow_requeue_off=no",
		      "ckpt_root=file:///lustre/%u",
		      "allowed_roots=file:///lustre/%u,s3://ckpt/%u",
		      "config=/nonexistent/ok-only-if-missing-is-an-error"};
	/* A named config file that does not exist is an error... */
	assert_int_equal(dpt__admin_load(&j->a, 8, av, report), DPT_ECONFIG);
	assert_non_null(strstr(last, "cannot read config file"));
	/* ...the default one may be absent. */
	dpt__admin_defaults(&j->a);
	assert_int_equal(dpt__admin_load(&j->a, 7, av, report), 0);

	dpt__user_set(&j->u, "train", "r1", report);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	/* The root holds the runs: the library opens ckpt_uri/run, so the
	 * run is not in the URI (it was twice: root/r1/r1). */
	assert_string_equal(j->s.ckpt_uri, "file:///lustre/alice");
	assert_string_equal(j->s.run, "r1");
	assert_int_equal(j->s.max_requeues, 100);

	for (size_t i = 0; i < sizeof(bounded) / sizeof(*bounded); i++) {
		const struct bounded_case *c = &bounded[i];
		struct dpt__user v = j->u;

		assert_int_equal(dpt__user_set(&v, c->option, c->value, report),
				 0);
		last[0] = '\0';
		if (resolve(&j->s, &j->a, &v) != c->rc ||
		    (c->rc && !strstr(last, c->want)) ||
		    (!c->rc && strcmp(j->s.ckpt_uri, c->want)))
			fail_msg("--dp-%s=%s: '%s', want %d and '%s'",
				 c->option, c->value, last, c->rc, c->want);
	}
}

/* Issue 14, defect 2: '..' cannot climb out of an allowed root, however
 * it is written, and '.' and '..' cannot name a run. */
static void roots_are_compared_normalised(void **state)
{
	struct job *j = *state;
	char *av[] = {"allowed_roots=file:///ckpt/%u,s3://ckpt/%u"};
	const char *escapes[] = {
		"file:///ckpt/alice/../bob",
		"file:///ckpt/alice/..",
		"file:///ckpt/alice/%%2e%%2e/bob",
		"file:///ckpt/alice/.%%2E/bob",
		"file:///ckpt/alice/./../bob",
		"file:///ckpt/alice%%2f..%%2fbob",
		"s3://ckpt/alice/../bob",
		"s3://ckpt/alice/%%2e%%2e/bob",
	};
	assert_int_equal(dpt__admin_load(&j->a, 1, av, report), 0);
	assert_int_equal(dpt__user_set(&j->u, "train", "r1", report), 0);
	for (size_t i = 0; i < sizeof(escapes) / sizeof(escapes[0]); i++) {
		last[0] = '\0';
		assert_int_equal(
			dpt__user_set(&j->u, "ckpt", escapes[i], report), 0);
		if (resolve(&j->s, &j->a, &j->u) != DPT_EINVAL)
			fail_msg("'%s' was accepted", escapes[i]);
		assert_non_null(strstr(last, "--dp-ckpt="));
		assert_non_null(strstr(last, "'..' component"));
	}
	/* Decoded before the check, never after: "%%252e%%252e" is the
	 * component "%2e%2e", which the storage does not decode again. */
	assert_int_equal(dpt__user_set(&j->u, "ckpt",
				       "file:///ckpt/alice/%%252e%%252e",
				       report),
			 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	/* Equivalent spellings of an allowed directory are accepted. */
	const char *fine[] = {
		"file:///ckpt//alice/r1/",
		"file:///ckpt/al%%69ce/r1",
		"file:///ckpt/alice/..r1",
		"s3://ckpt/alice/runs",
	};
	for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
		assert_int_equal(dpt__user_set(&j->u, "ckpt", fine[i], report),
				 0);
		if (resolve(&j->s, &j->a, &j->u) != 0)
			fail_msg("'%s' was refused: %s", fine[i], last);
	}
	/* Another user's directory, spelled normally, stays refused. */
	assert_int_equal(
		dpt__user_set(&j->u, "ckpt", "file:///ckpt/bob", report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), DPT_ERANGE);

	/* Run names. */
	assert_int_equal(dpt__user_set(&j->u, "train", "..", report),
			 DPT_EINVAL);
	assert_non_null(strstr(last, "--dp-train: '..': '.' and '..' name "
				     "directories, not a run"));
	assert_int_equal(dpt__user_set(&j->u, "train", ".", report),
			 DPT_EINVAL);
	assert_int_equal(dpt__user_set(&j->u, "train", "%2e%2e", report),
			 DPT_EINVAL);
	assert_non_null(strstr(last, "no '/', '%'"));
	assert_int_equal(dpt__user_set(&j->u, "train", "..r", report), 0);
	/* A job name becomes the run name without --dp-train=NAME. */
	assert_int_equal(dpt__user_set(&j->u, "train", NULL, report), 0);
	j->u.ckpt_uri[0] = '\0';
	assert_int_equal(dpt__settings_resolve(&j->s, &j->a, &j->u, "alice",
					       "42", "..", report),
			 DPT_EINVAL);
	assert_non_null(strstr(last, "the job name '..' cannot name the run"));
	assert_non_null(strstr(last, "--dp-train=NAME"));
}

/* The site's defaults loaded with AV (AC arguments, which name the
 * config file PATH) once TEXT is written to PATH. */
static int load_with_file(struct dpt__admin *a, const char *path,
			  const char *text, int ac, char **av)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	assert_true(fd >= 0);
	dprintf(fd, "%s", text);
	close(fd);
	dpt__admin_defaults(a);
	return dpt__admin_load(a, ac, av, report);
}

static void admin_file_errors_name_file_and_line(void **state)
{
	char path[] = "/tmp/dpt-conf-XXXXXX";
	char arg[64];
	struct dpt__admin a;
	int fd = mkstemp(path);
	(void)state;
	assert_true(fd >= 0);
	close(fd);
	snprintf(arg, sizeof(arg), "config=%s", path);
	char *av[] = {arg};
	assert_int_equal(
		load_with_file(&a, path,
			       "# site config\nkeep = 4\ngrace = soon\n", 1,
			       av),
		DPT_ECONFIG);
	assert_non_null(strstr(last, ":3: grace='soon'"));

	assert_int_equal(
		load_with_file(&a, path, "keep = 4\nbogus = 1\n", 1, av),
		DPT_ECONFIG);
	assert_non_null(strstr(last, "unknown key 'bogus'"));

	/* Plugstack arguments win over the file. */
	char *av2[] = {arg, "keep=2"};
	assert_int_equal(
		load_with_file(&a, path, "keep = 4\nmax_keep = 9\n", 2, av2),
		0);
	assert_int_equal(a.def_keep, 2);
	assert_int_equal(a.max_keep, 9);
	unlink(path);
}

/* --dp-gpu-bind and gpu_bind: the user's choice over the site's default,
 * which is none unless the site says otherwise; --dp-torchelastic a flag. */
static void gpu_bind_and_torchelastic(void **state)
{
	struct job *j = *state;
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.gpu_bind, DPT_GPU_BIND_NONE);
	assert_string_equal(dpt__gpu_bind_string(j->s.gpu_bind), "none");
	assert_false(j->s.torchelastic);

	assert_int_equal(
		dpt__admin_set(&j->a, "gpu_bind", "rank", "f:3", report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.gpu_bind, DPT_GPU_BIND_RANK);
	assert_string_equal(dpt__gpu_bind_string(j->s.gpu_bind), "rank");
	assert_int_equal(
		dpt__admin_set(&j->a, "gpu_bind", "socket", "f:4", report),
		DPT_ECONFIG);
	assert_string_equal(last, "dptrain: f:4: gpu_bind='socket': expected "
				  "none or rank");

	/* Twice, as Slurm may call the option callback. */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(
			dpt__user_set(&j->u, "gpu-bind", "none", report), 0);
		assert_int_equal(
			dpt__user_set(&j->u, "torchelastic", NULL, report), 0);
	}
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.gpu_bind, DPT_GPU_BIND_NONE);
	assert_true(j->s.torchelastic);

	assert_int_equal(dpt__user_set(&j->u, "gpu-bind", "1", report),
			 DPT_EINVAL);
	assert_non_null(strstr(last, "--dp-gpu-bind: '1': expected none"));
	assert_int_equal(dpt__user_set(&j->u, "gpu-bind", NULL, report),
			 DPT_EINVAL);
	assert_non_null(strstr(last, "--dp-gpu-bind: a value is required"));
}

/* private= (the site's default, no unless set) and --dp-private[=yes|no],
 * which overrides it either way; alone it means yes. */
static void private_runs(void **state)
{
	struct job *j = *state;
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_false(j->s.private_run);
	assert_int_equal(dpt__admin_set(&j->a, "private", "yes", "f:2", report),
			 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_true(j->s.private_run);
	assert_int_equal(
		dpt__admin_set(&j->a, "private", "maybe", "f:3", report),
		DPT_ECONFIG);
	assert_string_equal(last, "dptrain: f:3: private='maybe': expected yes "
				  "or no");

	/* The user's no wins over the site's yes. */
	for (int i = 0; i < 2; i++)
		assert_int_equal(dpt__user_set(&j->u, "private", "no", report),
				 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_false(j->s.private_run);

	/* And the user's yes (the bare option) over the site's no. */
	dpt__admin_defaults(&j->a);
	memset(&j->u, 0, sizeof(j->u));
	for (int i = 0; i < 2; i++)
		assert_int_equal(dpt__user_set(&j->u, "private", NULL, report),
				 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_true(j->s.private_run);
	assert_int_equal(dpt__user_set(&j->u, "private", "yes", report), 0);
	assert_true(j->u.private_run);
	assert_int_equal(dpt__user_set(&j->u, "private", "0700", report),
			 DPT_EINVAL);
	assert_non_null(
		strstr(last, "--dp-private: '0700': expected yes or no"));
}

/* --dp-metrics and the site's metrics_port= and allow_user_metrics=. */
static void metrics_endpoint(void **state)
{
	struct job *j = *state;
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.metrics_port, -1); /* off by default */
	for (int i = 0; i < 2; i++)
		assert_int_equal(
			dpt__user_set(&j->u, "metrics", "9100", report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.metrics_port, 9100);
	assert_int_equal(dpt__user_set(&j->u, "metrics", "0", report), 0);
	assert_int_equal(j->u.metrics_port, 0);
	assert_int_equal(dpt__user_set(&j->u, "metrics", "http", report),
			 DPT_EINVAL);
	assert_string_equal(last, "dptrain: --dp-metrics: 'http': expected a "
				  "TCP port from 1024 to 65535, 0 for any free "
				  "port, or off");
	assert_int_equal(dpt__user_set(&j->u, "metrics", "80", report),
			 DPT_EINVAL);
	assert_int_equal(dpt__user_set(&j->u, "metrics", "65536", report),
			 DPT_EINVAL);

	/* The site's port for every job; a user's off wins. */
	assert_int_equal(
		dpt__admin_set(&j->a, "metrics_port", "0", "f:1", report), 0);
	memset(&j->u, 0, sizeof(j->u));
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.metrics_port, 0);
	assert_int_equal(dpt__user_set(&j->u, "metrics", "off", report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.metrics_port, -1);
	assert_int_equal(
		dpt__admin_set(&j->a, "metrics_port", "on", "f:2", report),
		DPT_ECONFIG);
	assert_string_equal(last, "dptrain: f:2: metrics_port='on': expected "
				  "off, 0 (any free port) or a port from 1024 "
				  "to 65535");

	assert_int_equal(
		dpt__admin_set(&j->a, "metrics_port", "80", "f:2", report),
		DPT_ECONFIG);

	/* A site that forbids the option refuses it, naming the key. */
	assert_int_equal(dpt__admin_set(&j->a, "allow_user_metrics", "no",
					"f:3", report),
			 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), DPT_ERANGE);
	assert_non_null(strstr(last, "--dp-metrics: the site does not let "
				     "jobs choose their metrics endpoint "
				     "(allow_user_metrics=no)"));
	memset(&j->u, 0, sizeof(j->u));
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.metrics_port, 0);
}

/* --dp-shapes: checked at srun, bounded by the site, alone or --dp-nodes. */
static void shapes(void **state)
{
	struct job *j = *state;
	assert_int_equal(j->a.scaling_efficiency, 90);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_string_equal(j->s.shapes, "");
	assert_int_equal(dpt__user_set(&j->u, "shapes", "1x2-4,2x4", report),
			 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_string_equal(j->s.shapes, "1x2-4,2x4");
	assert_int_equal(dpt__user_set(&j->u, "shapes", "1x8:2", report),
			 DPT_EINVAL);
	assert_string_equal(last, "dptrain: --dp-shapes: '1x8:2': '1x8:2' "
				  "gives tasks to a GPU shape (one task a "
				  "GPU): write NODESxGPUS or NODESx0:TASKS, "
				  "each count a number or a range LO-HI, "
				  "comma-separated (e.g. 1x3-8,2x8 or "
				  "1-2x0:4)");
	assert_int_equal(dpt__user_set(&j->u, "nodes", "1-2", report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), DPT_EINVAL);
	assert_non_null(strstr(last, "--dp-shapes and --dp-nodes: give one"));
	j->u.nodes_min = j->u.nodes_max = 0;
	assert_int_equal(
		dpt__admin_set(&j->a, "allow_shapes", "no", "f:1", report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), DPT_ERANGE);
	assert_string_equal(last, "dptrain: --dp-shapes: the site does not "
				  "let jobs change their size "
				  "(allow_shapes=no): leave the option out");
	assert_int_equal(dpt__admin_set(&j->a, "scaling_efficiency", "101",
					"f:2", report),
			 DPT_ECONFIG);
	assert_int_equal(dpt__admin_set(&j->a, "scaling_efficiency", "75",
					"f:2", report),
			 0);
	memset(&j->u, 0, sizeof(j->u));
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.scaling_efficiency, 75);
}

/* --dp-global-batch: only with --dp-shapes, of which a shape divides it;
 * the site's bounds of a run's size changes reach the settings. */
static void global_batch(void **state)
{
	struct job *j = *state;

	assert_int_equal(dpt__user_set(&j->u, "global-batch", "0", report),
			 DPT_EINVAL);
	assert_non_null(strstr(last, "a number of samples, 1 or more"));
	assert_int_equal(dpt__user_set(&j->u, "global-batch", "96", report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), DPT_EINVAL);
	assert_string_equal(last, "dptrain: --dp-global-batch=96 is for "
				  "--dp-shapes, whose sizes it filters: give "
				  "--dp-shapes too, or leave it out");
	assert_int_equal(dpt__user_set(&j->u, "shapes", "1x5,2x5", report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), DPT_EINVAL);
	assert_string_equal(last, "dptrain: --dp-shapes=1x5,2x5: no shape's "
				  "world size (nodes x tasks a node) divides "
				  "--dp-global-batch=96: list a shape whose "
				  "world divides it");
	assert_int_equal(dpt__user_set(&j->u, "shapes", "1x3-8", report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.global_batch, 96);
	assert_int_equal(j->s.grow_check, 600);
	assert_int_equal(j->s.min_shape_interval, 1800);
	assert_int_equal(j->s.grow_margin, 2);
	assert_int_equal(j->s.max_shape_changes, 20);
	assert_int_equal(
		dpt__admin_set(&j->a, "grow_check", "0", "f:1", report), 0);
	assert_int_equal(resolve(&j->s, &j->a, &j->u), 0);
	assert_int_equal(j->s.grow_check, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(user_values_are_checked),
		cmocka_unit_test_setup(
			bounds_are_enforced_with_the_bound_in_the_message,
			a_job),
		cmocka_unit_test_setup(requeue_keys_bound_the_user, a_job),
		cmocka_unit_test_setup(roots_are_compared_normalised, a_job),
		cmocka_unit_test(admin_file_errors_name_file_and_line),
		cmocka_unit_test_setup(gpu_bind_and_torchelastic, a_job),
		cmocka_unit_test_setup(mtbf_reaches_the_settings, a_job),
		cmocka_unit_test_setup(private_runs, a_job),
		cmocka_unit_test_setup(metrics_endpoint, a_job),
		cmocka_unit_test_setup(shapes, a_job),
		cmocka_unit_test_setup(global_batch, a_job),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

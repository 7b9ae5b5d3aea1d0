/*
 * dpt_init: its options, from the caller's struct dpt_init_opts or the
 * environment that srun --dp-train sets, checked and turned into the
 * context's configuration and the agent's; then the context's creation
 * (worker/dptrain.c joins the first generation). Also the entry points
 * of the struct's ABI.
 */
#define _GNU_SOURCE /* F_GET_SEALS */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dptrain/dptrain.h>

#include "abi.h"
#include "agent.h"
#include "coll.h"
#include "ctx.h"
#include "hash.h"
#include "log.h"
#include "net.h"
#include "parse.h"
#include "wire.h"
#include "setting_names.h"

/* ------------------------------------------------------------ the secret */

/*
 * The step secret of a program that does not pass one (doc/protocol.md,
 * "The secret in the tasks"): DPTRAIN_SECRET where someone set it by hand
 * (tests, other launchers), else the sealed memfd that srun --dp-train
 * leaves open in every task as DPTRAIN_SECRET_FD. The variable read is
 * unset, and the descriptor closed, so that what the program starts next
 * (DataLoader workers, shells, a chained sbatch) inherits neither; the
 * process keeps this copy for its later dpt_init calls, which find the
 * environment empty. Python's binding drops the same variable from
 * os.environ.
 */
static pthread_mutex_t secret_lock = PTHREAD_MUTEX_INITIALIZER;
static char step_secret[DPT_SECRET_HEX_LEN + 1];

static int is_secret(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	return n == DPT_SECRET_HEX_LEN;
}

/* A descriptor that is not a sealed memfd of 64 hex characters is left
 * alone: it was closed and its number reused, and is someone else's. */
static int read_secret_fd(const char *value, char out[DPT_SECRET_HEX_LEN + 1])
{
	char buf[DPT_SECRET_HEX_LEN];
	struct stat st;
	long fd;
	int seals;

	if (dpt__parse_long(value, 0, INT_MAX, &fd)) {
		dpt__error("DPTRAIN_SECRET_FD='%s' is not a descriptor number",
			   value);
		return DPT_ECONFIG;
	}
	seals = fcntl((int)fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_WRITE) || fstat((int)fd, &st) ||
	    !S_ISREG(st.st_mode) || st.st_size != DPT_SECRET_HEX_LEN ||
	    pread((int)fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf) ||
	    !is_secret(buf, sizeof(buf))) {
		dpt__error("descriptor %ld (DPTRAIN_SECRET_FD) is not the step "
			   "secret that srun --dp-train left open: the program "
			   "or its launcher closed or replaced it (a launcher "
			   "that closes inherited descriptors must pass it on, "
			   "e.g. subprocess's pass_fds)",
			   fd);
		return DPT_ECONFIG;
	}
	close((int)fd);
	memcpy(out, buf, sizeof(buf));
	out[DPT_SECRET_HEX_LEN] = '\0';
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

/* The secret into OUT: from the environment, taken, else the copy kept. */
static int take_secret(char out[DPT_SECRET_HEX_LEN + 1])
{
	const char *hex = getenv("DPTRAIN_SECRET");
	const char *fd = getenv("DPTRAIN_SECRET_FD");
	int rc = 0;

	pthread_mutex_lock(&secret_lock);
	if (hex && *hex) {
		if (is_secret(hex, strlen(hex)))
			memcpy(step_secret, hex, sizeof(step_secret));
		else
			rc = DPT_ECONFIG;
		/* unsetenv only drops the pointer: the string stays in
		 * this process (and in its own /proc/PID/environ when it
		 * came with exec), but no child inherits it. */
		unsetenv("DPTRAIN_SECRET");
		if (rc)
			dpt__error("DPTRAIN_SECRET must be 64 hex characters");
	} else if (fd && *fd) {
		rc = read_secret_fd(fd, step_secret);
		unsetenv("DPTRAIN_SECRET_FD");
	} else if (!step_secret[0]) {
		dpt__error("the step secret is not set (DPTRAIN_SECRET_FD or "
			   "DPTRAIN_SECRET): start the program with srun "
			   "--dp-train");
		rc = DPT_ECONFIG;
	}
	if (!rc)
		memcpy(out, step_secret, sizeof(step_secret));
	pthread_mutex_unlock(&secret_lock);
	return rc;
}

/* The context's CURVE keys, from SECRET (the caller's) or the step's. */
static int configure_keys(struct dpt_ctx *ctx, const char *secret)
{
	char taken[DPT_SECRET_HEX_LEN + 1] = "";
	int rc;

	if (!secret) {
		rc = take_secret(taken);
		if (rc)
			return rc;
		secret = taken;
	}
	rc = dpt__wire_derive_keys(secret, &ctx->keys);
	if (!rc)
		snprintf(ctx->secret_hex, sizeof(ctx->secret_hex), "%s",
			 secret);
	explicit_bzero(taken, sizeof(taken));
	if (rc == DPT_EINVAL) {
		dpt__error("the secret of dpt_init_opts must be 64 hex "
			   "characters");
		return DPT_ECONFIG;
	}
	return rc;
}

/* ------------------------------------------------------------ options */

static int env_long(const char *name, long min, long max, long def, long *out)
{
	const char *v = getenv(name);
	int rc;

	*out = def;
	if (!v || !*v)
		return 0;
	rc = dpt__parse_long(v, min, max, out);
	if (rc)
		dpt__error("%s='%s' is not a number in [%ld, %ld]", name, v,
			   min, max);
	return rc ? DPT_ECONFIG : 0;
}

/* An option if set (not -1), else the first environment variable set. */
static int pick_index(int opt, const char *env1, const char *env2, long def,
		      long *out)
{
	long v;
	int rc;

	if (opt >= 0) {
		*out = opt;
		return 0;
	}
	rc = env_long(env1, 0, UINT32_MAX - 1, -1, &v);
	if (!rc && v < 0 && env2)
		rc = env_long(env2, 0, UINT32_MAX - 1, -1, &v);
	*out = v < 0 ? def : v;
	return rc;
}

/* The local address that routes to the coordinator: what the other ranks
 * can reach us at, without asking the user which interface to use. When
 * none is found, 127.0.0.1, said: only ranks of this node reach it. */
static void route_address(const char *endpoint, char *out, size_t size)
{
	char host[256], *port = NULL;
	const char *h = strstr(endpoint, "://");

	snprintf(out, size, "127.0.0.1");
	if (h) {
		snprintf(host, sizeof(host), "%s", h + 3);
		port = strrchr(host, ':');
	}
	if (port) {
		size_t n;

		*port++ = '\0';
		n = strlen(host);
		if (host[0] == '[' && n >= 2 && host[n - 1] == ']') {
			host[n - 1] = '\0';
			memmove(host, host + 1, n - 1);
		}
	}
	if (!port || dpt__route_address(host, port, out, size) != 0)
		dpt__warn("no address of this host routes to the coordinator "
			  "'%s': using 127.0.0.1, which only ranks on this "
			  "node reach (set DPTRAIN_DATA_HOST)",
			  endpoint);
}

/* The backends this worker offers the coordinator (JOIN caps), from
 * BACKEND (auto, or a backend's name; NULL: auto): every available one,
 * or the one named. */
static int configure_caps(struct dpt_ctx *ctx, const char *backend)
{
	bool any = !backend || !strcmp(backend, "auto");

	ctx->caps = 0;
	for (int i = 0; dpt__coll_backends[i]; i++) {
		const struct dpt__coll_ops *b = dpt__coll_backends[i];

		if (any) {
			if (b->available())
				ctx->caps |= b->cap;
			continue;
		}
		if (strcmp(backend, b->name))
			continue;
		if (!b->available()) {
			dpt__error("backend '%s' requested, but %s", backend,
				   b->unavailable);
			return DPT_ENOTSUP;
		}
		ctx->caps = b->cap;
		return 0;
	}
	if (any)
		return 0;
	dpt__error("unknown backend '%s': use auto, nccl or cpu", backend);
	return DPT_ECONFIG;
}

/* This worker's data-plane address (DATA_HOST, else the address on the
 * route to the coordinator) and its host name for the coordinator's log. */
static int configure_host(struct dpt_ctx *ctx, const char *data_host)
{
	char name[256];

	if (data_host) {
		struct in6_addr a;
		if (strlen(data_host) >= sizeof(ctx->data_host) ||
		    (inet_pton(AF_INET, data_host, &a) != 1 &&
		     inet_pton(AF_INET6, data_host, &a) != 1)) {
			dpt__error("DPTRAIN_DATA_HOST '%s' is not a numeric "
				   "address",
				   data_host);
			return DPT_ECONFIG;
		}
		snprintf(ctx->data_host, sizeof(ctx->data_host), "%s",
			 data_host);
	} else {
		route_address(ctx->endpoint, ctx->data_host,
			      sizeof(ctx->data_host));
	}
	/* The host name only names us in the coordinator's log: keep the
	 * characters the protocol allows. */
	if (gethostname(name, sizeof(name)) != 0)
		name[0] = '\0';
	name[sizeof(name) - 1] = '\0';
	size_t n = 0;
	for (size_t i = 0; name[i] && n < DPT_WIRE_NAME_MAX; i++) {
		char ch = name[i];
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '.' || ch == '-' ||
		    ch == '_')
			ctx->hostname[n++] = ch;
	}
	ctx->hostname[n] = '\0';
	return 0;
}

static int configure(struct dpt_ctx *ctx, const struct dpt_init_opts *o,
		     struct dpt__agent_config *ac)
{
	const char *endpoint =
		dpt__opt_or_env(o->coordinator, "DPTRAIN_COORDINATOR");
	const char *backend = dpt__opt_or_env(o->backend, DPT_ENV(BACKEND));
	const char *data_host =
		dpt__opt_or_env(o->data_host, "DPTRAIN_DATA_HOST");
	long node, local, task, connect_ms, timeout_ms, comm_ms;
	int rc;

	if (!endpoint) {
		dpt__error("DPTRAIN_COORDINATOR is not set: start the program "
			   "with srun --dp-train");
		return DPT_ECONFIG;
	}
	if (strlen(endpoint) >= sizeof(ctx->endpoint)) {
		dpt__error("coordinator endpoint too long");
		return DPT_ECONFIG;
	}
	snprintf(ctx->endpoint, sizeof(ctx->endpoint), "%s", endpoint);
	rc = configure_keys(ctx, o->secret);
	if (rc)
		return rc;

	rc = configure_caps(ctx, backend);
	if (rc)
		return rc;

	rc = pick_index(o->node, "SLURM_NODEID", NULL, 0, &node);
	if (!rc)
		rc = pick_index(o->local_rank, "SLURM_LOCALID", "LOCAL_RANK", 0,
				&local);
	if (!rc)
		rc = pick_index(o->task_id, "SLURM_PROCID", NULL,
				DPT_WIRE_NO_TASK, &task);
	if (!rc)
		rc = o->connect_timeout_ms > 0
			     ? (connect_ms = o->connect_timeout_ms, 0)
			     : env_long("DPTRAIN_CONNECT_TIMEOUT_MS", 1,
					INT32_MAX, 30000, &connect_ms);
	if (!rc)
		rc = o->timeout_ms > 0
			     ? (timeout_ms = o->timeout_ms, 0)
			     : env_long("DPTRAIN_TIMEOUT_MS", 20, INT32_MAX,
					DPT_DEF_TIMEOUT_MS, &timeout_ms);
	if (!rc)
		rc = o->comm_timeout_ms > 0
			     ? (comm_ms = o->comm_timeout_ms, 0)
			     : env_long("DPTRAIN_COMM_TIMEOUT_MS", 1, INT32_MAX,
					60000, &comm_ms);
	if (rc)
		return rc;
	ctx->node = (uint32_t)node;
	ctx->local_hint = (uint32_t)local;
	ctx->task_id = (uint32_t)task;
	ctx->comm_timeout_ms = (int)comm_ms;

	rc = configure_host(ctx, data_host);
	if (rc)
		return rc;
	snprintf(ctx->session_base, sizeof(ctx->session_base), "dpt-%016llx",
		 (unsigned long long)dpt__fnv1a(ctx->keys.coord_public,
						DPT_Z85_KEY_LEN,
						DPT_FNV1A_INIT));

	*ac = (struct dpt__agent_config){
		.endpoint = ctx->endpoint,
		.keys = &ctx->keys,
		.connect_timeout_ms = (int)connect_ms,
		.heartbeat_ms = (int)(timeout_ms / 4 > 0 ? timeout_ms / 4 : 1),
		.timeout_ms = (int)timeout_ms,
	};
	return 0;
}

/* ------------------------------------------------------------ the context */

static void init_opts_default(struct dpt_init_opts *o)
{
	*o = (struct dpt_init_opts){
		.coordinator = NULL,
		.secret = NULL,
		.backend = NULL,
		.node = -1,
		.local_rank = -1,
		.task_id = -1,
		.data_host = NULL,
		.connect_timeout_ms = 0,
		.timeout_ms = 0,
		.comm_timeout_ms = 0,
	};
}

static int init_ctx(struct dpt_ctx **out, const struct dpt_init_opts *opts)
{
	struct dpt_init_opts defaults;
	struct dpt__agent_config ac;
	struct dpt_ctx *ctx;
	int rc;

	if (!out)
		return DPT_EINVAL;
	*out = NULL;
	if (!opts) {
		init_opts_default(&defaults);
		opts = &defaults;
	}
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return DPT_ENOMEM;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_cond_init(&ctx->verdict, NULL);
	atomic_init(&ctx->comm_abort, 0);
	atomic_init(&ctx->stop_requested, 0);
	ctx->rank = ctx->world = ctx->local_rank = -1;
	rc = configure(ctx, opts, &ac);
	if (rc)
		goto out;
	ac.abort_fn = dpt__on_abort;
	ac.abort_arg = ctx;
	rc = dpt__agent_start(&ctx->agent, &ac);
	if (rc)
		goto out;
	rc = dpt__join(ctx);
out:
	if (rc) {
		dpt_finalize(&ctx);
		return rc;
	}
	*out = ctx;
	return 0;
}

/* ------------------------------------------------------------ the ABI */

/* The first version of struct dpt_init_opts (<dptrain/dptrain.h>, "the
 * ABI") ends at comm_timeout_ms. */
#define INIT_OPTS_V1 DPT__SIZE_THROUGH(struct dpt_init_opts, comm_timeout_ms)

int dpt_init_opts_default_sized(struct dpt_init_opts *opts, size_t size)
{
	struct dpt_init_opts o;

	init_opts_default(&o);
	return dpt__struct_out(opts, size, &o, sizeof(o), INIT_OPTS_V1,
			       "dpt_init_opts");
}

int dpt_init_sized(struct dpt_ctx **out, const struct dpt_init_opts *opts,
		   size_t size)
{
	struct dpt_init_opts o;
	int rc;

	if (!out)
		return DPT_EINVAL;
	*out = NULL;
	init_opts_default(&o);
	rc = dpt__struct_in(&o, sizeof(o), opts, size, INIT_OPTS_V1,
			    "dpt_init_opts");
	return rc ? rc : init_ctx(out, opts ? &o : NULL);
}

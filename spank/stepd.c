/*
 * slurmstepd side of the plugin: the task environment.
 *
 * slurm_spank_user_init runs once per node before any task starts:
 * variables common to the node's tasks. slurm_spank_task_init runs in each
 * task's process just before exec: its rank, its GPU where
 * --dp-gpu-bind=rank asks for one, and the step secret by descriptor.
 * slurm_spank_task_exit runs in slurmstepd when a task ends and tells the
 * coordinator at once, so a crashed worker is evicted without waiting for
 * its heartbeats to time out; as the job's owner, not as root.
 */
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/spank.h>

#include <dptrain/error.h>

#include "client.h"
#include "net.h"
#include "parse.h"
#include "plugin.h"
#include "setting_names.h"
#include "run_as.h"
#include "wire.h"

/* How long task 0 may take to publish MASTER_ADDR:MASTER_PORT, and the
 * others to wait for it (task 0's node may start its tasks later). */
#define MASTER_PUT_MS  10000
#define MASTER_WAIT_MS 120000
/* slurmstepd waits for the exit report: short, the coordinator is local to
 * srun and answers at once, or is gone with srun. */
#define EXIT_REPORT_MS 500
/* The lowest descriptor number the secret's memfd may take: below 10 are
 * the numbers scripts redirect by hand (`exec 3>log`), which would close
 * it; shells pick their own descriptors at 10 and above among free ones. */
#define SECRET_FD_MIN 10

static int set(spank_t sp, const char *name, const char *value)
{
	if (spank_setenv(sp, name, value, 1) != ESPANK_SUCCESS) {
		slurm_error("dptrain: cannot set %s", name);
		return -1;
	}
	return 0;
}

static int setf(spank_t sp, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int setf(spank_t sp, const char *name, const char *fmt, ...)
{
	char value[1200];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(value, sizeof(value), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(value)) {
		slurm_error("dptrain: value of %s too long", name);
		return -1;
	}
	return set(sp, name, value);
}

/* What a node knows of the step that the settings do not hold. */
struct node {
	const struct dpt__settings *s;
	uint32_t nnodes;
	long nrestart;
};

/*
 * The value of setting ID's variable for the tasks, in VALUE (SIZE bytes)
 * or a constant string; NULL: left unset. A merged setting's is its
 * row's, in its kind's form (dpt__settings_value); the job's MTBF, the
 * requeues so far and --dp-verbose as a level are a case each here.
 */
static const char *task_value(enum dpt__setting id, const struct node *n,
			      char *value, size_t size)
{
	switch (id) {
	case DPT_SET_MTBF:
		/* --dp-ckpt-every=auto: a job fails when any of its nodes
		 * does, so its MTBF is one node's divided by the nodes of
		 * the step. */
		snprintf(value, size, "%ld",
			 n->nnodes > 1
				 ? (n->s->node_mtbf + n->nnodes - 1) / n->nnodes
				 : n->s->node_mtbf);
		return value;
	case DPT_SET_RESTART_COUNT:
		snprintf(value, size, "%ld", n->nrestart);
		return value;
	case DPT_SET_LOG_LEVEL:
		return n->s->verbose ? "info" : NULL;
	default:
		return dpt__settings_value(n->s, id, DPT_FORM_ENV, value, size);
	}
}

int dpt__stepd_user_init(spank_t sp, const struct dpt__settings *s)
{
	char port[16], restart[16], value[DPT_CFG_STR];
	uint32_t ntasks = 0, nlocal = 0, nodeid = 0, nnodes = 0;
	long nrestart = 0;
	int rc = 0;

	if (spank_getenv(sp, "DPTRAIN_COORDINATOR_PORT", port, sizeof(port)) !=
	    ESPANK_SUCCESS) {
		slurm_error("dptrain: this step has no coordinator: was it "
			    "started by an srun without the dptrain plugin?");
		return -1;
	}
	/* Unset on a job's first run, then 1, 2, ... after each requeue. */
	if (spank_getenv(sp, "SLURM_RESTART_COUNT", restart, sizeof(restart)) ==
		    ESPANK_SUCCESS &&
	    dpt__parse_long(restart, 0, 2147483647L, &nrestart)) {
		slurm_error("dptrain: SLURM_RESTART_COUNT='%s' is not a count",
			    restart);
		return -1;
	}
	if (spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) ||
	    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &nlocal) ||
	    spank_get_item(sp, S_JOB_NODEID, &nodeid) ||
	    spank_get_item(sp, S_JOB_NNODES, &nnodes)) {
		slurm_error("dptrain: cannot read the step's layout");
		return -1;
	}

	/* Every setting that has a variable, by its row. */
	for (int i = 0; i < DPT_SET_COUNT; i++) {
		const struct node n = {s, nnodes, nrestart};
		const char *v;

		if (dpt__setting_names[i].env &&
		    (v = task_value(i, &n, value, sizeof(value))))
			rc |= set(sp, dpt__setting_names[i].env, v);
	}
	rc |= setf(sp, "WORLD_SIZE", "%u", ntasks);
	rc |= setf(sp, "LOCAL_WORLD_SIZE", "%u", nlocal);
	rc |= setf(sp, "NODE_RANK", "%u", nodeid);
	rc |= setf(sp, "NUM_NODES", "%u", nnodes);

	/*
	 * The rest of torchrun's contract (torch.distributed.run): one worker
	 * group per node, so the group is the node; one role, named as
	 * torchrun names it by default, so a role rank is the global rank
	 * (set per task). A restart is a Slurm requeue.
	 * TORCHELASTIC_USE_AGENT_STORE stays unset: there is no agent whose
	 * TCPStore the ranks could join, and unset is what makes env://
	 * start its own store on rank 0.
	 */
	rc |= setf(sp, "GROUP_RANK", "%u", nodeid);
	rc |= setf(sp, "GROUP_WORLD_SIZE", "%u", nnodes);
	rc |= set(sp, "ROLE_NAME", "default");
	rc |= setf(sp, "ROLE_WORLD_SIZE", "%u", ntasks);
	rc |= setf(sp, "TORCHELASTIC_RESTART_COUNT", "%ld", nrestart);
	/* torchrun's --max-restarts: the most times dptrain requeues the
	 * job (doc/walltime.md, "Requeue guard"). */
	rc |= setf(sp, "TORCHELASTIC_MAX_RESTARTS", "%ld",
		   s->requeue == DPT_REQUEUE_OFF ? 0 : s->max_requeues);
	/* torch.distributed.is_torchelastic_launched() is exactly "is
	 * TORCHELASTIC_RUN_ID set", and Lightning then chooses its
	 * TorchElasticEnvironment over its SLURMEnvironment: opt-in. */
	if (s->torchelastic)
		rc |= set(sp, "TORCHELASTIC_RUN_ID", s->run);
	return rc ? -1 : 0;
}

/*
 * --dp-gpu-bind=rank: the task sees only the GPU of its local rank.
 *
 * Slurm gives every task of a node all of the node's GPUs of the step, as
 * torchrun does, and that is the default: LOCAL_RANK picks one
 * (torch.cuda.set_device(LOCAL_RANK)), and NCCL sees its peers' devices.
 * Narrowing is for programs that use the first visible device and have
 * no notion of a local rank. Where Slurm itself binds GPUs per task
 * (--gpus-per-task, --gpu-bind: SLURMD_TRES_BIND names gpu), its binding
 * is the more specific request and stays. A node with fewer GPUs of the
 * step than tasks cannot give each its own: the step fails and says so,
 * rather than have two ranks share a GPU the user believes is theirs.
 */
static int bind_gpu(spank_t sp, int local_rank, uint32_t nlocal)
{
	/* The user may not have asked for it: say where it came from. */
	const char *what = dpt__plugin.user.gpu_bind_set
				   ? "--dp-gpu-bind=rank"
				   : "gpu_bind=rank (the site's default)";
	char devs[2048], tres[256], *p;
	spank_err_t e;
	uint32_t n = 1;

	e = spank_getenv(sp, "CUDA_VISIBLE_DEVICES", devs, sizeof(devs));
	if (e == ESPANK_ENV_NOEXIST || (e == ESPANK_SUCCESS && !devs[0]))
		return 0; /* no GPU in this step: nothing to bind */
	if (e != ESPANK_SUCCESS) {
		slurm_error("dptrain: %s: cannot read CUDA_VISIBLE_DEVICES: "
			    "%s",
			    what, spank_strerror(e));
		return -1;
	}
	if (spank_getenv(sp, "SLURMD_TRES_BIND", tres, sizeof(tres)) ==
		    ESPANK_SUCCESS &&
	    strstr(tres, "gpu:"))
		return 0;
	for (p = devs; (p = strchr(p, ',')); p++)
		n++;
	if (n < nlocal || local_rank < 0 || (uint32_t)local_rank >= n) {
		slurm_error("dptrain: %s: this node runs %u tasks of the step "
			    "but has only %u GPUs for them "
			    "(CUDA_VISIBLE_DEVICES=%s): ask for a GPU per task "
			    "(--gres=gpu:%u) or use --dp-gpu-bind=none",
			    what, nlocal, n, devs, nlocal);
		return -1;
	}
	p = devs;
	for (int i = 0; i < local_rank; i++)
		p = strchr(p, ',') + 1;
	p[strcspn(p, ",")] = '\0';
	return set(sp, "CUDA_VISIBLE_DEVICES", p);
}

/* The coordinator of this step, as the task reaches it. */
struct coord_ref {
	char host[64]; /* srun's address as the nodes reach it */
	char port[16];
	char endpoint[96];
	char secret[DPT_SECRET_HEX_LEN + 1];
};

/* S itself when every byte of it prints, so that a value from the job's
 * environment cannot write lines of its own into slurmd's log. */
static const char *printable(const char *s)
{
	for (const char *p = s; *p; p++)
		if (!isprint((unsigned char)*p))
			return "(not printable)";
	return s;
}

/* srun's address (SLURM_LAUNCH_NODE_IPADDR) is in the task's environment in
 * slurm_spank_task_init and slurm_spank_task_exit, not yet in
 * slurm_spank_user_init. */
static int coord_ref(spank_t sp, struct coord_ref *c)
{
	if (spank_getenv(sp, "SLURM_LAUNCH_NODE_IPADDR", c->host,
			 sizeof(c->host)) != ESPANK_SUCCESS ||
	    spank_getenv(sp, "DPTRAIN_COORDINATOR_PORT", c->port,
			 sizeof(c->port)) != ESPANK_SUCCESS ||
	    spank_getenv(sp, "DPTRAIN_SECRET", c->secret, sizeof(c->secret)) !=
		    ESPANK_SUCCESS) {
		slurm_error("dptrain: cannot find the step's coordinator "
			    "(SLURM_LAUNCH_NODE_IPADDR, "
			    "DPTRAIN_COORDINATOR_PORT, DPTRAIN_SECRET)");
		return -1;
	}
	/* These are the job's to change, and slurm_spank_task_exit
	 * connects as root: a name, or a port that libzmq reads as more
	 * than a port ("1023;10.0.0.9:2049" binds source port 1023 and
	 * connects elsewhere), gets no connection. */
	if (dpt__tcp_endpoint(c->host, c->port, c->endpoint,
			      sizeof(c->endpoint))) {
		slurm_error("dptrain: refusing the coordinator at "
			    "SLURM_LAUNCH_NODE_IPADDR='%s' "
			    "DPTRAIN_COORDINATOR_PORT='%s': they must be a "
			    "numeric IP address and a port 1-65535, as srun "
			    "sets them: do not change them",
			    printable(c->host), printable(c->port));
		explicit_bzero(c, sizeof(*c));
		return -1;
	}
	return 0;
}

/*
 * The address of this node on the route to srun's host: the address the
 * other nodes of the step can reach it on, without guessing between
 * interfaces. A UDP connect sends nothing; it only chooses the route.
 */
static int route_address(const struct coord_ref *c, char *addr, size_t size)
{
	if (dpt__route_address(c->host, c->port, addr, size) == 0)
		return 0;
	slurm_error("dptrain: cannot find this node's address on the route "
		    "to %s: %m",
		    c->host);
	return -1;
}

/* Whether TCP port PORT (0: any, which the kernel picks) binds on every
 * address of this node now; *PORT is then the one bound. */
static bool port_binds(int family, unsigned *port)
{
	struct sockaddr_storage ss = {.ss_family = (sa_family_t)family};
	socklen_t len = family == AF_INET6 ? sizeof(struct sockaddr_in6)
					   : sizeof(struct sockaddr_in);
	in_port_t *p = family == AF_INET6
			       ? &((struct sockaddr_in6 *)&ss)->sin6_port
			       : &((struct sockaddr_in *)&ss)->sin_port;
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	*p = htons((uint16_t)*port);
	ok = fd >= 0 && bind(fd, (struct sockaddr *)&ss, len) == 0 &&
	     getsockname(fd, (struct sockaddr *)&ss, &len) == 0;
	if (ok)
		*port = ntohs(*p);
	if (fd >= 0)
		close(fd);
	return ok;
}

/*
 * A TCP port free on every address of this node now, for the program to
 * bind seconds later (PyTorch's TCPStore, after its imports). Taken below
 * the kernel's ephemeral ports (ip_local_port_range, 32768 on): no
 * outgoing connection and no listener bound to port 0 is given it in the
 * meantime, as one was on a busy node. At random in the 16384 ports below
 * them, tried up to 64 times; then any port the kernel picks.
 */
static int free_port(int family, unsigned *port)
{
	unsigned low = 32768, high, r;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");

	if (f) {
		if (fscanf(f, "%u %u", &low, &high) != 2)
			low = 32768;
		fclose(f);
	}
	for (int i = 0; i < 64 && low > 1024 + 1; i++) {
		unsigned base = low > 16384 + 1024 ? low - 16384 : 1024;

		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			break;
		*port = base + r % (low - base);
		if (port_binds(family, port))
			return 0;
	}
	*port = 0;
	if (port_binds(family, port))
		return 0;
	slurm_error("dptrain: cannot find a free TCP port: %m");
	return -1;
}

/*
 * MASTER_ADDR and MASTER_PORT, the rendezvous of programs that bring their
 * own (PyTorch's env://): task 0 picks them on its node and publishes them
 * through the coordinator's key-value store; every other task waits for
 * them there (doc/protocol.md, "Step key-value store").
 */
static int set_master(spank_t sp, const struct coord_ref *c, uint32_t global)
{
	char value[DPT_KV_VALUE_MAX + 1], addr[64];
	unsigned port = 0;
	char *space;
	int rc;

	if (global == 0) {
		if (route_address(c, addr, sizeof(addr)) ||
		    free_port(strchr(addr, ':') ? AF_INET6 : AF_INET, &port))
			return -1;
		snprintf(value, sizeof(value), "%s %u", addr, port);
		rc = dpt__client_kv_put(c->endpoint, c->secret, "master", value,
					MASTER_PUT_MS);
	} else {
		rc = dpt__client_kv_get(c->endpoint, c->secret, "master", value,
					sizeof(value), MASTER_WAIT_MS);
	}
	if (rc) {
		slurm_error("dptrain: task %u cannot %s MASTER_ADDR and "
			    "MASTER_PORT through the coordinator at %s: %s",
			    global, global == 0 ? "publish" : "get",
			    c->endpoint, dpt_strerror(rc));
		return -1;
	}
	space = strchr(value, ' ');
	if (!space) {
		slurm_error("dptrain: malformed master address '%s'", value);
		return -1;
	}
	*space = '\0';
	return set(sp, "MASTER_ADDR", value) ||
	       set(sp, "MASTER_PORT", space + 1);
}

/*
 * The step secret leaves the task's environment, where every child, shell,
 * container and chained sbatch would inherit it and any `env` would print
 * it (doc/protocol.md, "The secret in the tasks"): it goes into a memfd of
 * the task's own, made here in the task's process as the job's user just
 * before exec, sealed and left open across exec; only its number is
 * exported. A memfd has no name in any directory: nothing another user can
 * pre-create or open, nothing to remove when the step ends. slurmstepd's
 * copy of the environment keeps DPTRAIN_SECRET for slurm_spank_task_exit.
 */
static int pass_secret(spank_t sp, const char *secret)
{
	size_t n = strlen(secret);
	int fd, moved = -1, rc = -1;

	fd = memfd_create("dptrain-secret", MFD_ALLOW_SEALING);
	if (fd < 0 || fchmod(fd, 0400) || write(fd, secret, n) != (ssize_t)n ||
	    fcntl(fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)) {
		slurm_error("dptrain: cannot put the step secret in a memfd: "
			    "%m");
		goto out;
	}
	moved = fd >= SECRET_FD_MIN ? fd : fcntl(fd, F_DUPFD, SECRET_FD_MIN);
	if (moved < 0) {
		slurm_error("dptrain: cannot move the step secret's memfd to "
			    "a descriptor >= %d: %m",
			    SECRET_FD_MIN);
		goto out;
	}
	if (setf(sp, "DPTRAIN_SECRET_FD", "%d", moved))
		goto out;
	if (spank_unsetenv(sp, "DPTRAIN_SECRET") != ESPANK_SUCCESS) {
		slurm_error("dptrain: cannot unset DPTRAIN_SECRET");
		goto out;
	}
	rc = 0;
out:
	if (fd >= 0 && fd != moved)
		close(fd);
	if (rc && moved >= 0 && moved != fd)
		close(moved);
	return rc;
}

int dpt__stepd_task_init(spank_t sp, const struct dpt__settings *s)
{
	struct coord_ref c;
	uint32_t global = 0, nlocal = 0;
	int local = 0, rc;

	if (coord_ref(sp, &c) || set(sp, "DPTRAIN_COORDINATOR", c.endpoint))
		return -1;
	if (spank_get_item(sp, S_TASK_GLOBAL_ID, &global) ||
	    spank_get_item(sp, S_TASK_ID, &local) ||
	    spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &nlocal)) {
		slurm_error("dptrain: cannot read the task's ids");
		return -1;
	}
	/* The GPU before the rendezvous: a task that cannot have its GPU
	 * fails at once, not after waiting for MASTER_ADDR. */
	rc = (s->gpu_bind == DPT_GPU_BIND_RANK &&
	      bind_gpu(sp, local, nlocal)) ||
	     setf(sp, "RANK", "%u", global) ||
	     setf(sp, "ROLE_RANK", "%u", global) ||
	     setf(sp, "LOCAL_RANK", "%d", local) ||
	     set_master(sp, &c, global) || pass_secret(sp, c.secret);
	explicit_bzero(&c, sizeof(c));
	return rc ? -1 : 0;
}

/* One task's exit, as the child of dpt__run_as reports it. */
struct exit_report {
	struct coord_ref c;
	uint32_t global;
	int status;
};

static int report_exit(void *arg)
{
	struct exit_report *r = arg;

	return dpt__client_report_exit(r->c.endpoint, r->c.secret, r->global,
				       r->status, EXIT_REPORT_MS);
}

/* The job's owner, as Slurm knows it. */
static int job_user(spank_t sp, struct dpt__run_as_user *u)
{
	gid_t *groups = NULL;
	int n = 0;

	if (spank_get_item(sp, S_JOB_UID, &u->uid) ||
	    spank_get_item(sp, S_JOB_GID, &u->gid) ||
	    spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &groups, &n))
		return -1;
	u->groups = groups;
	u->ngroups = groups ? n : 0;
	return 0;
}

/*
 * Tells the coordinator that a task ended. The endpoint and the secret
 * come from the job's environment, which is the job's owner's to set: the
 * connection is made by a child that has become that user (spank/run_as.c),
 * never as root, so that it reaches nothing the owner could not reach
 * and reads nothing from a source port the owner could not bind.
 */
void dpt__stepd_task_exit(spank_t sp)
{
	struct exit_report r = {0};
	struct dpt__run_as_user u;
	int rc;

	if (spank_get_item(sp, S_TASK_GLOBAL_ID, &r.global) ||
	    spank_get_item(sp, S_TASK_EXIT_STATUS, &r.status))
		return;
	if (job_user(sp, &u)) {
		slurm_error("dptrain: cannot find the job's owner: task %u's "
			    "exit is not reported",
			    r.global);
		return;
	}
	if (coord_ref(sp, &r.c))
		return;
	/* The child's own timeout bounds the exchange; this one, a little
	 * longer, bounds the child. */
	rc = dpt__run_as(&u, report_exit, &r, EXIT_REPORT_MS + 500);
	explicit_bzero(&r.c, sizeof(r.c));
	/* At the end of a step srun may already have stopped the
	 * coordinator: nobody is left to tell, and nothing is wrong. */
	if (rc)
		slurm_debug("dptrain: task %u's exit was not reported: %s",
			    r.global, dpt_strerror(rc));
}

/*
 * dptrain.so: SPANK entry points.
 *
 * This file registers the options and dispatches each callback to the code
 * of its context: spank/srun.c (srun, the local context), spank/stepd.c
 * (slurmstepd, the remote context); sbatch and salloc (the allocator
 * context) only validate. Without --dp-train on the command line, in
 * #SBATCH lines or in the environment, the plugin changes nothing.
 *
 * Errors: every callback returns -1 after slurm_error() with a message
 * that says what to fix. In the remote context nothing is checked in
 * slurm_spank_init, whose failure Slurm treats as a broken node: a broken
 * dptrain.conf fails the step in slurm_spank_user_init and the node stays
 * in service. Where Slurm has slurm_spank_init_failure_mode (newer than
 * Debian 12's 22.05), it says so too: a failure of ours is the job's.
 */
#include "config.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

#include <dptrain/error.h>

#include "log.h"
#include "plugin.h"
#include "setting_names.h"

SPANK_PLUGIN(dptrain, 1)

#if HAVE_DECL_ESPANK_JOB_FAILURE
int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
#endif

struct dpt__plugin dpt__plugin = {
	.admin_loaded = 0,
	.coordinator_pid = -1,
	.rundir = "",
};

/* An option of srun: its setting is the option's val, whose name the
 * plugin's settings parse (spank/settings.c). */
static int opt_cb(int val, const char *optarg, int remote)
{
	(void)remote;
	if (val < 0 || val >= DPT_SET_COUNT || !dpt__setting_names[val].option)
		return -1;
	return dpt__user_set(&dpt__plugin.user, dpt__setting_names[val].option,
			     optarg, slurm_error)
		       ? -1
		       : 0;
}

/*
 * Every --dp-* option, by setting: its row's SRUN column
 * (common/settings.def), its argument, whether it has one (0 no, 1
 * required, 2 optional), and its line in srun --help. Its name, "dp-" and
 * the setting's option, is set in slurm_spank_init; no callback where the
 * setting has no option.
 */
static struct spank_option options[DPT_SET_COUNT] = {
#define SRUN(arg, has, help)                                                   \
	.arginfo = arg, .usage = help, .has_arg = has, .cb = opt_cb
#define NO_SRUN .cb = NULL
#define X(id, option, env, flag, srun, user, keys, coord)                      \
	[DPT_SET_##id] = {.val = DPT_SET_##id, srun},
	DPT_SETTINGS(X)
#include "settings_end.h"
};

static void log_to_slurm(enum dpt__log_level level, const char *msg)
{
	if (level <= DPT_LOG_WARN)
		slurm_error("dptrain: %s", msg);
	else if (level == DPT_LOG_INFO)
		slurm_info("dptrain: %s", msg);
	else
		slurm_debug("dptrain: %s", msg);
}

/* The site's configuration, once per process; -1 after a message when it
 * is broken or disables dptrain. */
static int load_admin(int ac, char **av)
{
	if (!dpt__plugin.admin_loaded &&
	    (dpt__admin_set_defaults(&dpt__plugin.admin, slurm_error) ||
	     dpt__admin_load(&dpt__plugin.admin, ac, av, slurm_error)))
		return -1;
	dpt__plugin.admin_loaded = 1;
	if (!dpt__plugin.admin.enabled) {
		slurm_error("dptrain: --dp-train is disabled on this cluster "
			    "(enabled=no in the site configuration)");
		return -1;
	}
	return 0;
}

int dpt__plugin_settings(spank_t sp, struct dpt__settings *s)
{
	char user[64] = "", jobid[32] = "0", name[256] = "";
	uint32_t id;
	uid_t uid = getuid();
	struct passwd pw, *res = NULL;
	char pwbuf[1024];

	if (spank_remote(sp)) {
		if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS)
			uid = getuid();
		if (spank_getenv(sp, "SLURM_JOB_NAME", name, sizeof(name)) !=
		    ESPANK_SUCCESS)
			name[0] = '\0';
	} else {
		const char *n = getenv("SLURM_JOB_NAME");
		snprintf(name, sizeof(name), "%s", n ? n : "");
	}
	if (spank_get_item(sp, S_JOB_ID, &id) == ESPANK_SUCCESS)
		snprintf(jobid, sizeof(jobid), "%u", id);
	if (getpwuid_r(uid, &pw, pwbuf, sizeof(pwbuf), &res) == 0 && res)
		snprintf(user, sizeof(user), "%s", pw.pw_name);
	else
		snprintf(user, sizeof(user), "%u", (unsigned)uid);
	if (!name[0])
		snprintf(name, sizeof(name), "job%s", jobid);
	return dpt__settings_resolve(s, &dpt__plugin.admin, &dpt__plugin.user,
				     user, jobid, name, slurm_error)
		       ? -1
		       : 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	static char names[DPT_SET_COUNT][32];

	dpt__log_set_sink(log_to_slurm);
	for (int i = 0; i < DPT_SET_COUNT; i++) {
		struct spank_option *o = &options[i];

		if (!o->cb)
			continue;
		snprintf(names[i], sizeof(names[i]), "dp-%s",
			 dpt__setting_names[o->val].option);
		o->name = names[i];
		if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
			slurm_error("dptrain: cannot register --%s", o->name);
			return -1;
		}
	}
	(void)ac;
	(void)av;
	return 0;
}

/*
 * The admin configuration is read only for steps that ask for dptrain, so
 * that a broken dptrain.conf never affects other jobs. In srun, sbatch and
 * salloc it is read here, before the job is submitted; slurmstepd reads it
 * in slurm_spank_user_init (see the comment at the top).
 */
int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	struct dpt__settings s;
	if (!dpt__plugin.user.train || spank_context() == S_CTX_REMOTE)
		return 0;
	if (load_admin(ac, av))
		return -1;
	/* Fail at submission with the same checks the step will make. */
	return dpt__plugin_settings(sp, &s);
}

int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
	struct dpt__settings s;
	(void)ac;
	(void)av;
	if (!dpt__plugin.user.train)
		return 0;
	if (dpt__plugin_settings(sp, &s))
		return -1;
	return dpt__srun_start_coordinator(sp, &s);
}

/*
 * Whether this slurmstepd runs a step that dptrain serves: one launched by
 * an srun with --dp-train. The batch script's step (sbatch --dp-train, or
 * #SBATCH --dp-train, whose options reach every step of the job), the
 * extern and the interactive step have no srun and no coordinator: the
 * sruns inside the job start theirs.
 */
static int remote_train_step(spank_t sp)
{
	uint32_t step = 0;

	if (!dpt__plugin.user.train || spank_context() != S_CTX_REMOTE)
		return 0;
	if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
		return 0;
	return step < SLURM_MAX_NORMAL_STEP_ID;
}

/*
 * Slurm 22.05 starts the tasks even when slurm_spank_user_init or
 * slurm_spank_task_init fail. A task of a step whose dptrain set-up failed
 * must not run as if it had succeeded (it would train without ranks or
 * checkpoints), so a failure ends the task in slurm_spank_task_init, which
 * runs in the task's own process just before exec, after the message that
 * says why.
 */
int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	struct dpt__settings *s = &dpt__plugin.settings;
	if (!remote_train_step(sp))
		return 0;
	dpt__plugin.node_failed = 1;
	if (load_admin(ac, av))
		return -1;
	if (dpt__plugin_settings(sp, s) || dpt__stepd_user_init(sp, s))
		return -1;
	dpt__plugin.node_failed = 0;
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (!remote_train_step(sp))
		return 0;
	if (dpt__plugin.node_failed ||
	    dpt__stepd_task_init(sp, &dpt__plugin.settings)) {
		slurm_error("dptrain: task not started: the step's dptrain "
			    "set-up failed (see the message above)");
		_exit(DPT_TASK_SETUP_FAILED);
	}
	return 0;
}

/* Runs in slurmstepd as each task ends: the coordinator hears of a crashed
 * worker at once instead of after its heartbeat timeout. */
int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (remote_train_step(sp) && !dpt__plugin.node_failed)
		dpt__stepd_task_exit(sp);
	return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void)sp;
	(void)ac;
	(void)av;
	if (spank_context() == S_CTX_LOCAL)
		dpt__srun_stop_coordinator();
	return 0;
}

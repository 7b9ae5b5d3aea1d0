/*
 * State shared by the plugin's files: one struct per process, since every
 * context (srun, sbatch, slurmstepd) loads its own copy of the plugin.
 */
#ifndef DPT_SPANK_PLUGIN_H
#define DPT_SPANK_PLUGIN_H

#include <slurm/spank.h>
#include <stdint.h>
#include <sys/types.h>

#include "setting_names.h"
#include "settings.h"

struct dpt__plugin {
	struct dpt__admin admin;
	struct dpt__user user;
	int admin_loaded; /* admin config read in this process */
	int node_failed;  /* slurmstepd: user_init failed, fail the tasks */
	/* slurmstepd: the step's settings, resolved in user_init; every task
	 * is forked from it and reads them in task_init. */
	struct dpt__settings settings;
	/* srun side */
	pid_t coordinator_pid;
	char rundir[256]; /* private directory for the endpoint file */
};

/* Exit status of a task whose dptrain set-up failed. */
#define DPT_TASK_SETUP_FAILED 1

extern struct dpt__plugin dpt__plugin;

/* Resolve the settings for this job; the job id and user come from SP
 * when available. Returns 0 or -1 after reporting with slurm_error(). */
int dpt__plugin_settings(spank_t sp, struct dpt__settings *s);

/* srun side (spank/srun.c). */
/* The coordinator's command line: its options by their names in
 * common/settings.def, each with its value. */
struct dpt__coord_argv {
	char *v[2 * DPT_SET_COUNT + 2]; /* each setting once, and NULL */
	char flags[DPT_SET_COUNT][32];
	char values[DPT_SET_COUNT][352];
	int n, nflags;
};
/* The coordinator of a step of NTASKS tasks, job JOBID and step STEPID,
 * with S and the site's settings (dpt__plugin.admin), writing its
 * endpoint to ENDPOINT_FILE, into CMD (tests/unit/test_setting_names
 * parses it as the coordinator does). */
void dpt__srun_coord_argv(struct dpt__coord_argv *cmd,
			  const struct dpt__settings *s, uint32_t ntasks,
			  uint32_t jobid, uint32_t stepid,
			  const char *endpoint_file);
int dpt__srun_start_coordinator(spank_t sp, const struct dpt__settings *s);
void dpt__srun_stop_coordinator(void);

/* slurmstepd side (spank/stepd.c). */
int dpt__stepd_user_init(spank_t sp, const struct dpt__settings *s);
int dpt__stepd_task_init(spank_t sp, const struct dpt__settings *s);
/* Tell the coordinator that a task exited; never fails the step. */
void dpt__stepd_task_exit(spank_t sp);

#endif

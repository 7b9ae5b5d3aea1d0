/*
 * dptrain.so: SPANK entry points.
 *
 * This file registers the options and dispatches each callback to the code
 * of its context. Without --dp-train on the command line, in #SBATCH lines
 * or in the environment, the plugin changes nothing in the job.
 */
#include "config.h"

#include <string.h>

#include <slurm/spank.h>

#include <dptrain/error.h>

#include "log.h"

SPANK_PLUGIN(dptrain, 1)

#define DPT_RUN_MAX 256

static struct {
	int enabled;
	char run[DPT_RUN_MAX];
} opts = {
	.enabled = 0,
	.run = "",
};

/* Slurm may call an option callback twice (once from the environment that
 * sbatch exported, once from the command line): the last value wins and
 * nothing accumulates. */
static int opt_train(int val, const char *optarg, int remote)
{
	(void)val;
	(void)remote;
	if (optarg && strlen(optarg) >= sizeof(opts.run)) {
		slurm_error("dptrain: --dp-train: run name longer than %d "
			    "characters",
			    DPT_RUN_MAX - 1);
		return -1;
	}
	opts.enabled = 1;
	if (optarg)
		strncpy(opts.run, optarg, sizeof(opts.run) - 1);
	return 0;
}

struct spank_option spank_options[] = {
	{"dp-train", "[RUN]",
	 "Run this step as a dptrain elastic training step; RUN names the "
	 "training run (default: the job name)",
	 2, 0, opt_train},
	SPANK_OPTIONS_TABLE_END,
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	/* A failure of this plugin must fail the job, not drain the node. */
	(void)sp;
	return ESPANK_SUCCESS;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	(void)ac;
	(void)av;
	if (!opts.enabled || spank_context() != S_CTX_REMOTE)
		return ESPANK_SUCCESS;
	if (opts.run[0] &&
	    spank_setenv(sp, "DPTRAIN_RUN", opts.run, 1) != ESPANK_SUCCESS) {
		slurm_error("dptrain: cannot set DPTRAIN_RUN");
		return -1;
	}
	return ESPANK_SUCCESS;
}

/*
 * The step's settings by id, and every name each has between processes,
 * from their one definition (common/settings.def; doc/architecture.md,
 * "Adding a setting"): srun's --dp- option, the variable slurmstepd
 * exports to each task and the library reads, and the coordinator's
 * option that srun passes. Code names a setting by its id
 * (DPT_ENV(GRACE), DPT_SET_GRACE): a renamed or removed name changes
 * every side at once, and a misspelt id does not compile.
 */
#ifndef DPT_COMMON_SETTING_NAMES_H
#define DPT_COMMON_SETTING_NAMES_H

#include "settings.def"

enum dpt__setting {
#define DPT_SETTING_ID(id, option, env, flag, srun, user, keys, coord)         \
	DPT_SET_##id,
	DPT_SETTINGS(DPT_SETTING_ID)
#undef DPT_SETTING_ID
		DPT_SET_COUNT
};

struct dpt__setting_names {
	const char *option, *env, *flag;
};

/* Indexed by enum dpt__setting (common/setting_names.c). */
extern const struct dpt__setting_names dpt__setting_names[DPT_SET_COUNT];

/* The variable of setting ID (getenv(DPT_ENV(KEEP))). */
#define DPT_ENV(id) (dpt__setting_names[DPT_SET_##id].env)

#endif

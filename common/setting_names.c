/*
 * The names of the step's settings (common/setting_names.h).
 */
#include "config.h"

#include <stddef.h>

#include "setting_names.h"

const struct dpt__setting_names dpt__setting_names[DPT_SET_COUNT] = {
#define DPT_SETTING_NAMES(id, option, env, flag, srun, user, keys, coord)      \
	[DPT_SET_##id] = {option, env, flag},
	DPT_SETTINGS(DPT_SETTING_NAMES)
#undef DPT_SETTING_NAMES
};

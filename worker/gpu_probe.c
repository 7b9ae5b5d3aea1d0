/*
 * Whether a GPU may be usable here, from the device files alone
 * (worker/gpu_probe.h): what dpt_init's automatic backend asks before it
 * lets CUDA initialise its driver.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "gpu_probe.h"

bool dpt__gpu_device_files(const char *dev, const char *visible)
{
	struct dirent *e;
	bool found = false;
	DIR *d;

	if (visible && (!*visible || !strcmp(visible, "NoDevFiles") ||
			!strncmp(visible, "-1", 2)))
		return false;
	d = opendir(dev);
	if (!d)
		return true; /* cannot tell: CUDA is asked */
	while (!found && (e = readdir(d))) {
		struct stat st;

		if (strcmp(e->d_name, "dxg") &&
		    (strncmp(e->d_name, "nvidia", 6) ||
		     !isdigit((unsigned char)e->d_name[6])))
			continue;
		found = fstatat(dirfd(d), e->d_name, &st, 0) == 0 &&
			S_ISCHR(st.st_mode);
	}
	closedir(d);
	return found;
}

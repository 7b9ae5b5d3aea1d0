#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"

int dpt__file_replace(const char *path, const void *data, size_t len,
		      mode_t mode)
{
	const char *base = strrchr(path, '/');
	char tmp[PATH_MAX];
	int fd, n, err = 0;

	base = base ? base + 1 : path;
	n = snprintf(tmp, sizeof(tmp), "%.*s.%s.XXXXXX", (int)(base - path),
		     path, base);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return ENAMETOOLONG;
	fd = mkstemp(tmp);
	if (fd < 0)
		return errno;
	if (fchmod(fd, mode) != 0 || write(fd, data, len) != (ssize_t)len ||
	    fsync(fd) != 0)
		err = errno ? errno : EIO;
	if (close(fd) != 0 && !err)
		err = errno;
	if (!err && rename(tmp, path) != 0)
		err = errno;
	if (err)
		unlink(tmp);
	return err;
}

/*
 * The posix backend's append (storage.h, dpt__storage_append): O_APPEND
 * writes of whole lines to a file that several processes may share (the
 * events.jsonl of a run that several job steps' coordinators write).
 *
 * The directory may be writable by others (a team's run, a 1777 root used
 * as one): whoever can write it could have made the file first, as a link
 * to a file of this user's, as a FIFO that would block the caller (and
 * the exit that waits for it) for good, or as a file of their own that
 * would receive every line. Only a regular file of this user's with one
 * link is appended to, the same rule as the writer's recycled files.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "log.h"
#include "posix.h"

/* Why a file that another user may have planted is not appended to. */
#define PLANTED(what)                                                          \
	"it is " what ", which another user who can write the directory may "  \
	"have made: remove it"

/* Opens KEY (in DIRFD, as NAME) to append, created with a mode that
 * follows the directory's; returns the descriptor or -1 with *WHY set. */
static int open_appendable(struct dpt__posix *b, int dirfd, const char *name,
			   const char **why)
{
	bool priv = b->conf.private_mode;
	struct stat st;
	int fd;

	/* A directory that only its owner may enter is a private run's,
	 * made so by the library, perhaps after this file was created (or
	 * by an earlier run that was not private): the file follows it, as
	 * the library's own files do. */
	if (fstat(dirfd, &st) == 0 && (st.st_mode & 077) == 0)
		priv = true;
	/* O_NONBLOCK: a FIFO without a reader is ENXIO, not a wait. */
	fd = openat(dirfd, name,
		    O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK |
			    O_CLOEXEC,
		    priv ? DPT__POSIX_PRIVATE_FILE_MODE : 0644);
	if (fd < 0) {
		*why = errno == ELOOP	? PLANTED("a symbolic link")
		       : errno == ENXIO ? PLANTED("a FIFO")
					: strerror(errno);
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || st.st_nlink != 1) {
		*why = PLANTED("no regular file of this user's with one link");
		close(fd);
		return -1;
	}
	if (priv && (st.st_mode & 077) &&
	    fchmod(fd, DPT__POSIX_PRIVATE_FILE_MODE) != 0) {
		*why = strerror(errno);
		close(fd);
		return -1;
	}
	return fd;
}

int dpt__posix_append(struct dpt__storage_backend *base, const char *key,
		      const void *buf, size_t len)
{
	struct dpt__posix *b = (struct dpt__posix *)base;
	const char *lines = buf, *name, *why = NULL;
	size_t off = 0;
	int dirfd, fd, rc;

	rc = dpt__posix_open_key_dir(b, key, true, &dirfd, &name);
	if (rc)
		return rc;
	fd = open_appendable(b, dirfd, name, &why);
	close(dirfd);
	if (fd < 0) {
		dpt__error("cannot append to '%s/%s': %s", b->root_msg, key,
			   why);
		return DPT_EIO;
	}
	/* One write per line with O_APPEND: another process appending to
	 * the same file interleaves lines, never bytes of a line (lines
	 * below PIPE_BUF on local and Lustre file systems). */
	while (off < len && !rc) {
		const char *nl = memchr(lines + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (lines + off)) + 1 : len - off;
		ssize_t w = write(fd, lines + off, n);

		if (w != (ssize_t)n) {
			int err = w < 0 ? errno : EIO;
			dpt__error("cannot append to '%s/%s': %s", b->root_msg,
				   key, w < 0 ? strerror(err) : "short write");
			rc = dpt__storage_errno(err);
		}
		off += n;
	}
	/* The lines are written: a failed sync is not an error to try
	 * again, which would write them twice. */
	if (!rc)
		fdatasync(fd);
	close(fd);
	return rc;
}

/*
 * The posix backend's directories (storage/posix.h): the walk from "/" to
 * the root, which follows the path as the URI gives it, and the walks
 * below the root, which trust nothing that another user could have put
 * there.
 *
 * Below the root, every directory is opened from the one before with
 * O_NOFOLLOW, and used only when it belongs to the tree's owner (or to
 * root) and no one else can write it: where another user can write a
 * directory of the run (a team directory, a checkpoint root of mode 1777),
 * they could plant links, files or whole steps that the owner's next save
 * writes through or the next resume loads. The root itself may be
 * writable by others only with the sticky bit, as /tmp and a site's
 * shared checkpoint directory are, and must be the user's or root's.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "log.h"
#include "posix.h"

/* Opens the directory NAME in DIRFD; with NOFOLLOW never through a
 * symbolic link: a link there fails with ELOOP, whatever it points at. */
static int open_subdir(int dirfd, const char *name, bool nofollow)
{
	struct stat st;
	int fd = openat(dirfd, name,
			O_RDONLY | O_DIRECTORY | O_CLOEXEC |
				(nofollow ? O_NOFOLLOW : 0));

	/* O_DIRECTORY's ENOTDIR comes first for a link: tell them apart. */
	if (fd < 0 && nofollow && errno == ENOTDIR &&
	    fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(st.st_mode))
		errno = ELOOP;
	return fd;
}

bool dpt__posix_trusted(int fd, uid_t owner, struct stat *st)
{
	if (fstat(fd, st) != 0)
		return false;
	return (st->st_uid == owner || st->st_uid == 0) &&
	       !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* Whether FD, a directory on the way to the root in a directory that
 * others may write, is one to go through: the user's or root's, or, for
 * root reading or cleaning a tree (HOW->any_owner), anyone's. Its status
 * goes to *ST. */
static bool shared_child_ok(int fd, const struct dpt__posix_walk *how,
			    struct stat *st)
{
	if (fstat(fd, st) != 0)
		return false;
	return how->any_owner || st->st_uid == geteuid() || st->st_uid == 0;
}

/* Creates directory NAME in FD (mode 0700 exactly when PRIV, else 0755
 * less the umask: never writable by others, which the next walk would
 * refuse); its parent is fsync'ed so that the name survives a crash.
 * Returns 0 or an errno; *MADE says whether this call made it. */
static int make_dir(int fd, const char *name, bool priv, bool *made)
{
	*made = mkdirat(fd, name, priv ? DPT__POSIX_PRIVATE_DIR_MODE : 0755) ==
		0;
	if (!*made && errno != EEXIST)
		return errno;
	return dpt__posix_fsync(fd);
}

int dpt__posix_open_dirs(int base, const char *rel,
			 const struct dpt__posix_walk *how, int *out,
			 size_t *failed, struct stat *refused)
{
	/* A new open file description, not dup(): a dup shares the
	 * directory offset, and a walk would leave BASE's at its end. */
	int fd = openat(base, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;
	const char *p = rel;

	if (fd < 0)
		return errno;
	while (*p) {
		size_t n = strcspn(p, "/");
		char comp[256];
		struct stat st;
		bool made = false, shared;
		int next;

		*failed = (size_t)(p - rel) + n;
		if (n == 0) {
			p++;
			continue;
		}
		if (n >= sizeof(comp)) {
			err = ENAMETOOLONG;
			break;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		/* In a directory that others may write (/tmp, a shared
		 * checkpoint directory of mode 1777), on the way to the root
		 * too: no link, and only the user's (or root's) directory. */
		shared =
			how->below_root || (fstat(fd, &st) == 0 &&
					    (st.st_mode & (S_IWGRP | S_IWOTH)));
		next = open_subdir(fd, comp, shared);
		if (next < 0 && errno == ENOENT && how->create) {
			err = make_dir(fd, comp, how->priv, &made);
			if (err)
				break;
			next = open_subdir(fd, comp, shared);
		}
		if (next < 0) {
			err = errno;
			break;
		}
		close(fd);
		fd = next;
		if (shared && !how->below_root &&
		    !shared_child_ok(fd, how, &st)) {
			if (refused)
				*refused = st;
			err = DPT__POSIX_UNTRUSTED;
			break;
		}
		/* Only a directory this call made is made private: one that
		 * another writer made meanwhile is its business. */
		if (made && how->priv &&
		    (err = dpt__posix_make_private(
			     fd, DPT__POSIX_PRIVATE_DIR_MODE, comp)))
			break;
		if (how->below_root &&
		    !dpt__posix_trusted(fd, how->owner, &st)) {
			if (refused)
				*refused = st;
			err = DPT__POSIX_UNTRUSTED;
			break;
		}
		p += n;
		if (*p == '/')
			p++;
	}
	if (err) {
		close(fd);
		return err;
	}
	*out = fd;
	return 0;
}

/* "user NAME (uid N)", or "uid N" when the name is unknown. */
static void user_text(uid_t uid, char *buf, size_t size)
{
	struct passwd pw, *found = NULL;
	char tmp[1024];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &found) == 0 && found)
		snprintf(buf, size, "user %s (uid %u)", pw.pw_name,
			 (unsigned)uid);
	else
		snprintf(buf, size, "uid %u", (unsigned)uid);
}

/* Why ST, a directory of B's tree, was refused, and what to do: into BUF. */
static void refusal(const struct dpt__posix *b, const struct stat *st,
		    char *buf, size_t size)
{
	char who[96], owner[96];

	if (st->st_uid != b->owner && st->st_uid != 0) {
		user_text(st->st_uid, who, sizeof(who));
		user_text(b->owner, owner, sizeof(owner));
		snprintf(buf, size,
			 "it belongs to %s, not to %s, whose checkpoints "
			 "these are: dptrain uses no directory below the "
			 "checkpoint root that another user owns (remove it, "
			 "or use another run name or root)",
			 who, owner);
	} else {
		snprintf(buf, size,
			 "its group or other users can write it (mode %04o), "
			 "and could plant files there: remove their write "
			 "permission (chmod go-w)",
			 (unsigned)(st->st_mode & 07777));
	}
}

int dpt__posix_split_key(const char *key, char **dir, const char **name)
{
	const char *slash = strrchr(key, '/');
	*dir = slash ? strndup(key, (size_t)(slash - key)) : strdup("");
	*name = slash ? slash + 1 : key;
	return *dir ? 0 : DPT_ENOMEM;
}

int dpt__posix_open_key_dir(struct dpt__posix *b, const char *key, bool create,
			    int *dirfd, const char **name)
{
	struct dpt__posix_walk how = {.create = create,
				      .priv = b->conf.private_mode,
				      .below_root = true,
				      .owner = b->owner};
	struct stat refused;
	char why[400];
	char *dir;
	size_t failed = 0;
	int err, rc = dpt__posix_split_key(key, &dir, name);

	if (rc)
		return rc;
	err = dpt__posix_open_dirs(b->rootfd, dir, &how, dirfd, &failed,
				   &refused);
	if (err == DPT__POSIX_UNTRUSTED)
		refusal(b, &refused, why, sizeof(why));
	else if (err)
		snprintf(why, sizeof(why), "%s",
			 err == ELOOP ? DPT__POSIX_LINK_REFUSED
				      : strerror(err));
	if (err) {
		rc = err == DPT__POSIX_UNTRUSTED ? DPT_EIO
						 : dpt__storage_errno(err);
		if (!(rc == DPT_ENOENT && !create))
			dpt__error("cannot %s '%s/%s': cannot %s directory "
				   "'%s/%.*s': %s",
				   create ? "write" : "reach", b->root_msg, key,
				   create ? "create" : "open", b->root_msg,
				   (int)failed, dir, why);
	}
	free(dir);
	return rc;
}

void dpt__posix_shared_refusal(int err, const struct stat *refused, char *buf,
			       size_t size)
{
	char who[96];

	if (err == ELOOP) {
		snprintf(buf, size,
			 "it is a symbolic link in a directory that other "
			 "users can write, and may be theirs: dptrain follows "
			 "none there (name the real directory)");
	} else if (err == DPT__POSIX_UNTRUSTED) {
		user_text(refused->st_uid, who, sizeof(who));
		snprintf(buf, size,
			 "it belongs to %s and lies in a directory that other "
			 "users can write: another user made it first (use "
			 "another name, or a directory of your own)",
			 who);
	} else {
		snprintf(buf, size, "%s", strerror(err));
	}
}

int dpt__posix_trust_root(struct dpt__posix *b)
{
	uid_t me = geteuid();
	struct stat st;
	char why[400], who[96];

	if (fstat(b->rootfd, &st) < 0) {
		dpt__error("cannot stat '%s': %s", b->root, strerror(errno));
		return dpt__storage_errno(errno);
	}
	/* Root reading or cleaning acts on the tree of whoever owns it
	 * (dptrain ckpt gc run by an administrator): below the root, that
	 * user's directories. Root's own job writes in no one else's. */
	b->owner = me == 0 ? st.st_uid : me;
	if ((me != 0 || !b->conf.no_create) && st.st_uid != me &&
	    st.st_uid != 0) {
		user_text(st.st_uid, who, sizeof(who));
		snprintf(why, sizeof(why),
			 "it belongs to %s: another user made it, and could "
			 "read or change every checkpoint in it (use a "
			 "directory of your own; %%u in a site's ckpt_root "
			 "names one per user)",
			 who);
	} else if ((st.st_mode & (S_IWGRP | S_IWOTH)) &&
		   !(st.st_mode & S_ISVTX)) {
		snprintf(why, sizeof(why),
			 "its group or other users can write it (mode %04o) "
			 "and it has no sticky bit, so they could rename or "
			 "replace the runs in it: remove their write "
			 "permission (chmod go-w), or use a directory of your "
			 "own",
			 (unsigned)(st.st_mode & 07777));
	} else {
		return 0;
	}
	dpt__error("cannot use checkpoint root '%s': %s", b->root, why);
	return DPT_ECONFIG;
}

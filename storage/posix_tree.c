/*
 * The posix backend's operations on the tree of objects: list and gc walk
 * it; delete and recycle take objects out of it, and remove the
 * directories they leave empty.
 */
#define _GNU_SOURCE /* renameat2 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "buf.h"
#include "log.h"
#include "posix.h"

struct entry {
	char *key;
	uint64_t size;
};

struct walk {
	struct dpt__posix *b;
	const char *prefix;
	/* list: collect objects; gc: remove temporary files before cutoff */
	bool gc;
	time_t cutoff;
	struct entry *v;
	size_t n, cap;
	size_t removed;
};

static int walk_add(struct walk *wk, const char *key, uint64_t size)
{
	if (wk->n == wk->cap) {
		size_t cap = wk->cap ? 2 * wk->cap : 64;
		struct entry *v = realloc(wk->v, cap * sizeof(*v));
		if (!v)
			return DPT_ENOMEM;
		wk->v = v;
		wk->cap = cap;
	}
	wk->v[wk->n].key = strdup(key);
	if (!wk->v[wk->n].key)
		return DPT_ENOMEM;
	wk->v[wk->n++].size = size;
	return 0;
}

/* Walks directory FD, whose key prefix is DIR ("" or "a/b/"); FILTER is
 * what names in this directory must start with (only at the top). */
static int walk_dir(struct walk *wk, int fd, struct dpt__buf *dir,
		    const char *filter, int depth)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (depth > 64)
		return 0;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return DPT_EIO;
	}
	while (!rc && (de = readdir(d))) {
		const char *nm = de->d_name;
		size_t mark = dir->len;
		struct stat st;
		bool tmp = strstr(nm, DPT__POSIX_TMP_TAG) != NULL;

		if (strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0)
			continue;
		if (strncmp(nm, filter, strlen(filter)) != 0)
			continue;
		/* Symbolic links are no objects and lead nowhere: what they
		 * point at is not the run's (reads refuse them too). */
		if (fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* removed meanwhile */
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), nm,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
						 O_CLOEXEC);
			/* Another user's directory (in a root that others
			 * may write, with the sticky bit) is not the
			 * tree's: neither listed nor cleaned. */
			if (sub >= 0 &&
			    !dpt__posix_trusted(sub, wk->b->owner, &st)) {
				close(sub);
				continue;
			}
			if (sub < 0)
				continue;
			rc = dpt__buf_printf(dir, "%s/", nm);
			if (!rc)
				rc = walk_dir(wk, sub, dir, "", depth + 1);
			else
				close(sub);
		} else if (S_ISREG(st.st_mode)) {
			if (wk->gc) {
				if (tmp && st.st_mtime < wk->cutoff &&
				    unlinkat(dirfd(d), nm, 0) == 0)
					wk->removed++;
				continue;
			}
			if (tmp)
				continue;
			rc = dpt__buf_puts(dir, nm);
			/* Names no key can address are not objects. */
			if (!rc &&
			    dpt__storage_key_check(dir->data, false) == 0)
				rc = walk_add(wk, dir->data,
					      (uint64_t)st.st_size);
		}
		dir->len = mark;
		if (dir->data)
			dir->data[mark] = '\0';
		if (rc == DPT_ETOOBIG)
			rc = 0; /* too deep for a key: not an object */
	}
	closedir(d);
	return rc;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->key,
		      ((const struct entry *)b)->key);
}

static int walk(struct walk *wk)
{
	const char *slash = strrchr(wk->prefix, '/');
	const char *filter = slash ? slash + 1 : wk->prefix;
	struct dpt__buf dir;
	size_t failed = 0;
	char *dirpart;
	int fd, err, rc;

	dirpart = strndup(wk->prefix, slash ? (size_t)(slash - wk->prefix) : 0);
	if (!dirpart)
		return DPT_ENOMEM;
	err = dpt__posix_open_dirs(
		wk->b->rootfd, dirpart,
		&(struct dpt__posix_walk){.below_root = true,
					  .owner = wk->b->owner},
		&fd, &failed, NULL);
	if (err) {
		free(dirpart);
		if (err == ENOENT || err == ENOTDIR)
			return 0;
		dpt__error("cannot list '%s/%s': %s", wk->b->root_msg,
			   wk->prefix,
			   err == DPT__POSIX_UNTRUSTED
				   ? "a directory of it is another user's, or "
				     "others can write it"
			   : err == ELOOP ? DPT__POSIX_LINK_REFUSED
					  : strerror(err));
		return err == DPT__POSIX_UNTRUSTED ? DPT_EIO
						   : dpt__storage_errno(err);
	}
	dpt__buf_init(&dir, DPT__STORAGE_KEY_MAX);
	rc = dpt__buf_puts(&dir, dirpart);
	if (!rc && dir.len)
		rc = dpt__buf_puts(&dir, "/");
	if (!rc)
		rc = walk_dir(wk, fd, &dir, filter, 0);
	else
		close(fd);
	if (rc == DPT_EIO)
		dpt__error("cannot list '%s/%s': %s", wk->b->root_msg,
			   wk->prefix, strerror(errno));
	dpt__buf_release(&dir);
	free(dirpart);
	return rc;
}

static void walk_release(struct walk *wk)
{
	for (size_t i = 0; i < wk->n; i++)
		free(wk->v[i].key);
	free(wk->v);
}

int dpt__posix_list(struct dpt__storage_backend *base, const char *prefix,
		    dpt__storage_list_fn fn, void *ctx)
{
	struct dpt__posix *b = (struct dpt__posix *)base;
	struct walk wk = {.b = b, .prefix = prefix};
	int rc = walk(&wk);

	if (!rc) {
		if (wk.n) /* qsort's array may not be NULL, even empty */
			qsort(wk.v, wk.n, sizeof(*wk.v), cmp_entry);
		for (size_t i = 0; i < wk.n && !rc; i++)
			rc = fn(ctx, wk.v[i].key, wk.v[i].size);
	}
	walk_release(&wk);
	return rc;
}

int dpt__posix_gc(struct dpt__storage_backend *base, const char *prefix,
		  long older_than_s, size_t *removed)
{
	struct dpt__posix *b = (struct dpt__posix *)base;
	struct walk wk = {.b = b, .prefix = prefix, .gc = true};
	int rc;

	wk.cutoff = time(NULL) - older_than_s;
	rc = walk(&wk);
	*removed = wk.removed;
	walk_release(&wk);
	return rc;
}

/* Removes the directories of KEY that are empty, deepest first; the
 * first one still in use stops it. */
static void remove_empty_dirs(struct dpt__posix *b, const char *key)
{
	const char *name;
	char *dir;

	if (dpt__posix_split_key(key, &dir, &name))
		return;
	for (;;) {
		char *slash;
		if (!dir[0] || unlinkat(b->rootfd, dir, AT_REMOVEDIR))
			break;
		slash = strrchr(dir, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	free(dir);
}

int dpt__posix_delete(struct dpt__storage_backend *base,
		      const char *const *keys, size_t n)
{
	struct dpt__posix *b = (struct dpt__posix *)base;
	int first = 0;

	for (size_t i = 0; i < n; i++) {
		const char *name;
		int dirfd, rc;

		rc = dpt__posix_open_key_dir(b, keys[i], false, &dirfd, &name);
		if (rc == DPT_ENOENT)
			continue;
		if (rc) {
			first = first ? first : rc;
			continue;
		}
		if (unlinkat(dirfd, name, 0) < 0) {
			int err = errno;
			close(dirfd);
			if (err == ENOENT)
				continue;
			dpt__error("cannot delete '%s/%s': %s", b->root_msg,
				   keys[i], strerror(err));
			first = first ? first : dpt__storage_errno(err);
			continue;
		}
		dpt__posix_fsync(dirfd);
		close(dirfd);
		remove_empty_dirs(b, keys[i]);
	}
	return first;
}

/* Renames each file to RECYCLED in the root for the next writers, and
 * sets its time, from which gc counts its age; what cannot be recycled is
 * deleted. */
int dpt__posix_recycle(struct dpt__storage_backend *base,
		       const char *const *keys, size_t n)
{
	struct dpt__posix *b = (struct dpt__posix *)base;
	int first = 0;

	for (size_t i = 0; i < n; i++) {
		char bin[300];
		const char *name;
		int dirfd, rc;

		rc = dpt__posix_open_key_dir(b, keys[i], false, &dirfd, &name);
		if (rc == DPT_ENOENT)
			continue;
		if (!rc &&
		    dpt__posix_tmp_name(bin, sizeof(bin),
					DPT__POSIX_RECYCLED_AS) == 0 &&
		    renameat2(dirfd, name, b->rootfd, bin, RENAME_NOREPLACE) ==
			    0) {
			if (utimensat(b->rootfd, bin, NULL,
				      AT_SYMLINK_NOFOLLOW) < 0)
				unlinkat(b->rootfd, bin, 0);
			dpt__posix_fsync(dirfd);
			close(dirfd);
			remove_empty_dirs(b, keys[i]);
			continue;
		}
		if (!rc)
			close(dirfd);
		rc = dpt__posix_delete(base, &keys[i], 1);
		if (rc && !first)
			first = rc;
	}
	return first;
}

/*
 * The posix backend on a temporary directory: what a checkpoint writer and
 * reader see (bytes back, visibility only after finish, the commit
 * primitive, listings, deletes, gc, appends), with writes split over the
 * thread pool, concurrent writers and O_DIRECT.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "buf.h"
#include "log.h"
#include "storage/storage.h"

#define MIB (1024 * 1024)

struct fixture {
	char dir[64];
	char uri[96];
	struct dpt__storage *s;
};

static struct dpt__buf logged;

static void capture(enum dpt__log_level level, const char *msg)
{
	(void)level;
	dpt__buf_printf(&logged, "%s\n", msg);
}

static void fill(unsigned char *p, size_t n, uint64_t seed)
{
	/* Position-dependent bytes: a misplaced range shows. */
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)((i + seed) * 2654435761u >> 13);
}

static int open_with(struct fixture *f, bool direct, size_t part_size)
{
	struct dpt__storage_opts o;
	dpt__storage_destroy(&f->s);
	dpt__storage_opts_init(&o);
	o.direct_io = direct;
	o.part_size = part_size;
	return dpt__storage_open(f->uri, &o, &f->s);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/dpt-test-posix-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	/* The root does not exist yet: open creates it. */
	snprintf(f->uri, sizeof(f->uri), "file://%s/root", f->dir);
	if (open_with(f, false, 0))
		return -1;
	dpt__buf_reset(&logged);
	*state = f;
	return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	dpt__storage_destroy(&f->s);
	nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

struct listing {
	struct dpt__buf text;
};

static int collect(void *ctx, const char *key, uint64_t size)
{
	struct listing *l = ctx;
	return dpt__buf_printf(&l->text, "%s=%llu ", key,
			       (unsigned long long)size);
}

/* Listing PREFIX of S gives WANT, "key=size " a key. */
static void assert_list(struct dpt__storage *s, const char *prefix,
			const char *want)
{
	struct listing l;
	dpt__buf_init(&l.text, 1 << 20);
	assert_int_equal(dpt__storage_list(s, prefix, collect, &l), 0);
	assert_string_equal(l.text.data ? l.text.data : "", want);
	dpt__buf_release(&l.text);
}

static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void round_trip_and_ranges(void **state)
{
	struct fixture *f = *state;
	struct dpt__storage_writer *w;
	size_t n = 3 * MIB + 12345;
	unsigned char *src = malloc(n), *dst = malloc(n);
	uint64_t size;

	fill(src, n, 1);
	assert_int_equal(open_with(f, false, MIB), 0);
	assert_int_equal(
		dpt__storage_writer_new(f->s, "step-1/shard-0.bin", &w), 0);
	/* Out of order, one range spanning several pool jobs. */
	assert_int_equal(dpt__storage_writer_write_at(w, src + 2 * MIB,
						      n - 2 * MIB, 2 * MIB),
			 0);
	assert_int_equal(
		dpt__storage_writer_write_at(w, src + 100, 2 * MIB - 100, 100),
		0);
	/* Not visible while being written. */
	assert_int_equal(dpt__storage_stat(f->s, "step-1/shard-0.bin", &size),
			 DPT_ENOENT);
	assert_list(f->s, "", "");
	assert_int_equal(dpt__storage_writer_write_at(w, src, 100, 0), 0);
	assert_int_equal(dpt__storage_writer_finish(&w), 0);
	assert_null(w);

	assert_int_equal(dpt__storage_stat(f->s, "step-1/shard-0.bin", &size),
			 0);
	assert_int_equal(size, n);
	memset(dst, 0, n);
	assert_int_equal(
		dpt__storage_read(f->s, "step-1/shard-0.bin", 0, n, dst), 0);
	assert_memory_equal(dst, src, n);
	/* Ranged reads, one of them across pool jobs. */
	assert_int_equal(
		dpt__storage_read(f->s, "step-1/shard-0.bin", 777, 10, dst), 0);
	assert_memory_equal(dst, src + 777, 10);
	assert_int_equal(dpt__storage_read(f->s, "step-1/shard-0.bin", MIB - 5,
					   2 * MIB + 7, dst),
			 0);
	assert_memory_equal(dst, src + MIB - 5, 2 * MIB + 7);
	assert_int_equal(
		dpt__storage_read(f->s, "step-1/shard-0.bin", n - 1, 1, dst),
		0);
	assert_int_equal(
		dpt__storage_read(f->s, "step-1/shard-0.bin", n - 1, 2, dst),
		DPT_ERANGE);
	assert_non_null(strstr(logged.data, "past its end"));
	assert_int_equal(dpt__storage_read(f->s, "step-1/none", 0, 1, dst),
			 DPT_ENOENT);
	assert_int_equal(dpt__storage_read(f->s, "step-1", 0, 1, dst),
			 DPT_ENOENT); /* a directory is not an object */
	assert_int_equal(dpt__storage_read(f->s, "../x", 0, 1, dst),
			 DPT_EINVAL);

	/* Finishing over an existing key replaces it. */
	assert_int_equal(
		dpt__storage_writer_new(f->s, "step-1/shard-0.bin", &w), 0);
	assert_int_equal(dpt__storage_writer_write_at(w, "new", 3, 0), 0);
	assert_int_equal(dpt__storage_writer_finish(&w), 0);
	assert_int_equal(dpt__storage_stat(f->s, "step-1/shard-0.bin", &size),
			 0);
	assert_int_equal(size, 3);
	free(src);
	free(dst);
}

static void abort_and_holes_leave_nothing(void **state)
{
	struct fixture *f = *state;
	struct dpt__storage_writer *w;
	char path[160], buf[64] = {0};
	uint64_t size;

	assert_int_equal(dpt__storage_writer_new(f->s, "a/b/x", &w), 0);
	assert_int_equal(dpt__storage_writer_write_at(w, buf, sizeof(buf), 0),
			 0);
	snprintf(path, sizeof(path), "%s/root/a/b", f->dir);
	assert_int_equal(count_files(path), 1); /* the temporary file */
	dpt__storage_writer_abort(&w);
	assert_null(w);
	dpt__storage_writer_abort(&w);
	assert_int_equal(count_files(path), 0);

	/* A hole: bytes 64..127 never written. */
	assert_int_equal(dpt__storage_writer_new(f->s, "a/b/x", &w), 0);
	assert_int_equal(dpt__storage_writer_write_at(w, buf, sizeof(buf), 0),
			 0);
	assert_int_equal(dpt__storage_writer_write_at(w, buf, sizeof(buf), 128),
			 0);
	assert_int_equal(dpt__storage_writer_finish(&w), DPT_EINVAL);
	assert_non_null(strstr(logged.data, "holes or overlapping"));
	assert_int_equal(dpt__storage_stat(f->s, "a/b/x", &size), DPT_ENOENT);
	assert_int_equal(count_files(path), 0);

	/* An empty object is an object. */
	assert_int_equal(dpt__storage_writer_new(f->s, "a/empty", &w), 0);
	assert_int_equal(dpt__storage_writer_finish(&w), 0);
	assert_int_equal(dpt__storage_stat(f->s, "a/empty", &size), 0);
	assert_int_equal(size, 0);
}

struct stripe_arg {
	struct dpt__storage_writer *w;
	const unsigned char *src;
	int id, nthreads;
	size_t piece, total;
	int rc;
};

static void *write_stripes(void *p)
{
	struct stripe_arg *a = p;
	/* Thread i writes pieces i, i + n, i + 2n, ...: ranks writing
	 * their parts of one shard file. */
	for (size_t off = (size_t)a->id * a->piece; off < a->total && !a->rc;
	     off += a->piece * (size_t)a->nthreads) {
		size_t len =
			a->total - off < a->piece ? a->total - off : a->piece;
		a->rc = dpt__storage_writer_write_at(a->w, a->src + off, len,
						     off);
	}
	return NULL;
}

static void concurrent_writes(struct fixture *f, bool direct, size_t piece,
			      size_t total)
{
	struct dpt__storage_writer *w;
	unsigned char *src = malloc(total), *dst = malloc(total);
	struct stripe_arg args[6];
	pthread_t t[6];

	fill(src, total, 7);
	assert_int_equal(open_with(f, direct, MIB), 0);
	assert_int_equal(dpt__storage_writer_new(f->s, "c/shard", &w), 0);
	for (int i = 0; i < 6; i++) {
		args[i] = (struct stripe_arg){w, src, i, 6, piece, total, 0};
		assert_int_equal(
			pthread_create(&t[i], NULL, write_stripes, &args[i]),
			0);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(args[i].rc, 0);
	}
	assert_int_equal(dpt__storage_writer_finish(&w), 0);
	memset(dst, 0, total);
	assert_int_equal(dpt__storage_read(f->s, "c/shard", 0, total, dst), 0);
	assert_memory_equal(dst, src, total);
	free(src);
	free(dst);
}

static void concurrent_positional_writes(void **state)
{
	/* Pieces larger than the 1 MiB I/O size, and not aligned. */
	concurrent_writes(*state, false, 3 * MIB / 2 + 3, 40 * MIB + 17);
}

static void direct_io(void **state)
{
	struct fixture *f = *state;
	struct dpt__storage_writer *w;
	size_t n = 5 * MIB + 333;
	/* Memory not aligned to 4 KiB: goes through the bounce buffers. */
	unsigned char *mem = malloc(n + 1), *src = mem + 1, *dst = malloc(n);

	concurrent_writes(f, true, 2 * MIB + 4096, 24 * MIB); /* aligned */
	concurrent_writes(f, true, 1000003, 20 * MIB + 5);    /* unaligned */
	fill(src, n, 3);
	assert_int_equal(open_with(f, true, MIB), 0);
	assert_int_equal(dpt__storage_writer_new(f->s, "d/x", &w), 0);
	assert_int_equal(dpt__storage_writer_write_at(w, src + 10, n - 10, 10),
			 0);
	assert_int_equal(dpt__storage_writer_write_at(w, src, 10, 0), 0);
	assert_int_equal(dpt__storage_writer_finish(&w), 0);
	assert_int_equal(dpt__storage_read(f->s, "d/x", 0, n, dst), 0);
	assert_memory_equal(dst, src, n);
	free(mem);
	free(dst);
}

/* Ranged reads of a file written with O_DIRECT: aligned and unaligned
 * offsets, lengths and memory, pieces spread over the pool, and the file's
 * unaligned end. */
static void ranged_reads(void **state)
{
	static const struct {
		uint64_t off;
		size_t len;
		size_t mem; /* offset of the destination from a page */
	} r[] = {
		{0, 5 * MIB + 333, 0}, /* whole file, aligned memory */
		{4096, 3 * MIB, 0},    /* all aligned: no bounce */
		{4096, 3 * MIB, 8},    /* aligned file, unaligned memory */
		{17, 2 * MIB + 5, 0},  /* unaligned head and tail */
		{4095, 4098, 1},       /* one whole block between two bytes */
		{100, 3000, 0},	       /* inside one block */
		{5 * MIB - 4096, 4429, 0}, /* up to the unaligned end */
	};
	struct fixture *f = *state;
	struct dpt__storage_writer *w;
	size_t n = 5 * MIB + 333;
	unsigned char *src = malloc(n), *dst = NULL;

	assert_int_equal(posix_memalign((void **)&dst, 4096, n + 4096), 0);
	fill(src, n, 11);
	assert_int_equal(open_with(f, true, MIB), 0);
	assert_int_equal(dpt__storage_writer_new(f->s, "r/x", &w), 0);
	assert_int_equal(dpt__storage_writer_write_at(w, src, n, 0), 0);
	assert_int_equal(dpt__storage_writer_finish(&w), 0);
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
		memset(dst, 0, n + 4096);
		assert_int_equal(dpt__storage_read(f->s, "r/x", r[i].off,
						   r[i].len, dst + r[i].mem),
				 0);
		assert_memory_equal(dst + r[i].mem, src + r[i].off, r[i].len);
		assert_int_equal(dst[r[i].mem + r[i].len], 0); /* no overrun */
	}
	assert_int_equal(dpt__storage_read(f->s, "r/x", n - 4096, 4097, dst),
			 DPT_ERANGE);
	free(src);
	free(dst);
}

static void put_if_absent_commits_once(void **state)
{
	struct fixture *f = *state;
	char buf[16] = {0};
	char path[160];

	assert_int_equal(dpt__storage_put_if_absent(f->s,
						    "step-2/manifest.json",
						    "{\"step\":2}", 10),
			 0);
	dpt__buf_reset(&logged);
	assert_int_equal(dpt__storage_put_if_absent(f->s,
						    "step-2/manifest.json",
						    "{\"step\":3}", 10),
			 DPT_EEXIST);
	assert_null(logged.data ? strstr(logged.data, "manifest") : NULL);
	assert_int_equal(
		dpt__storage_read(f->s, "step-2/manifest.json", 0, 10, buf), 0);
	assert_string_equal(buf, "{\"step\":2}");
	snprintf(path, sizeof(path), "%s/root/step-2", f->dir);
	assert_int_equal(count_files(path), 1); /* no temporary file left */
}

struct race {
	struct dpt__storage *s;
	int rc;
	char body[8];
};

static void *commit(void *p)
{
	struct race *r = p;
	r->rc = dpt__storage_put_if_absent(r->s, "race/manifest", r->body, 8);
	return NULL;
}

static void put_if_absent_race_has_one_winner(void **state)
{
	struct fixture *f = *state;
	struct race r[8];
	pthread_t t[8];
	char got[8];
	int winners = 0;

	for (int i = 0; i < 8; i++) {
		r[i].s = f->s;
		snprintf(r[i].body, sizeof(r[i].body), "body-%02u",
			 (unsigned)i % 100u);
		pthread_create(&t[i], NULL, commit, &r[i]);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(dpt__storage_read(f->s, "race/manifest", 0, 8, got),
			 0);
	for (int i = 0; i < 8; i++) {
		if (r[i].rc == 0) {
			winners++;
			assert_memory_equal(got, r[i].body, 8);
		} else {
			assert_int_equal(r[i].rc, DPT_EEXIST);
		}
	}
	assert_int_equal(winners, 1);
}

static void list_delete_gc(void **state)
{
	struct fixture *f = *state;
	const char *keys[] = {"step-10/b", "step-1/a", "step-1/sub/c",
			      "step-2/a", "top"};
	char path[200];
	struct dpt__storage_writer *w;
	size_t removed = 99;
	int fd;

	for (size_t i = 0; i < 5; i++)
		assert_int_equal(
			dpt__storage_put_if_absent(f->s, keys[i], "xy", i % 3),
			0);
	/* A writer in progress and a file no key can name: not listed. */
	assert_int_equal(dpt__storage_writer_new(f->s, "step-1/pending", &w),
			 0);
	snprintf(path, sizeof(path), "%s/root/step-1/bad name", f->dir);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	close(fd);

	assert_list(f->s, "",
		    "step-1/a=1 step-1/sub/c=2 step-10/b=0 "
		    "step-2/a=0 top=1 ");
	assert_list(f->s, "step-1", "step-1/a=1 step-1/sub/c=2 step-10/b=0 ");
	assert_list(f->s, "step-1/", "step-1/a=1 step-1/sub/c=2 ");
	assert_list(f->s, "step-1/s", "step-1/sub/c=2 ");
	assert_list(f->s, "nothing/here", "");

	/* gc keeps a recent temporary file, removes an old one. */
	assert_int_equal(dpt__storage_gc(f->s, "", 3600, &removed), 0);
	assert_int_equal(removed, 0);
	snprintf(path, sizeof(path),
		 "%s/root/step-2/.a.dpt-tmp.0123456789abcdef", f->dir);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	struct timespec old[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
	futimens(fd, old);
	close(fd);
	assert_int_equal(dpt__storage_gc(f->s, "step-2", 3600, &removed), 0);
	assert_int_equal(removed, 1);
	assert_int_equal(access(path, F_OK), -1);
	dpt__storage_writer_abort(&w);

	/* Delete: missing keys are fine; emptied directories go. */
	const char *del[] = {"step-1/sub/c", "step-10/b", "missing/key"};
	assert_int_equal(dpt__storage_delete(f->s, del, 3), 0);
	assert_list(f->s, "", "step-1/a=1 step-2/a=0 top=1 ");
	snprintf(path, sizeof(path), "%s/root/step-10", f->dir);
	assert_int_equal(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/root/step-1/sub", f->dir);
	assert_int_equal(access(path, F_OK), -1);
	const char *bad[] = {"ok", "../escape"};
	assert_int_equal(dpt__storage_delete(f->s, bad, 2), DPT_EINVAL);
	assert_non_null(strstr(logged.data, "invalid key '../escape'"));
}

/* Writes N bytes of fill(SEED) to KEY with a writer. */
static void write_object(struct dpt__storage *s, const char *key, size_t n,
			 uint64_t seed)
{
	struct dpt__storage_writer *w;
	unsigned char *buf = malloc(n);

	fill(buf, n, seed);
	assert_int_equal(dpt__storage_writer_new(s, key, &w), 0);
	assert_int_equal(dpt__storage_writer_write_at(w, buf, n, 0), 0);
	assert_int_equal(dpt__storage_writer_finish(&w), 0);
	free(buf);
}

static ino_t inode_of(const struct fixture *f, const char *key)
{
	char path[200];
	struct stat st;

	snprintf(path, sizeof(path), "%s/root/%s", f->dir, key);
	assert_int_equal(stat(path, &st), 0);
	return st.st_ino;
}

/* The names in the root of the files recycle() left there. */
static int recycled_files(const struct fixture *f, char *name, size_t size)
{
	char root[80];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(root, sizeof(root), "%s/root", f->dir);
	d = opendir(root);
	assert_non_null(d);
	while ((de = readdir(d)))
		if (strncmp(de->d_name, ".@recycled.dpt-tmp.", 19) == 0 &&
		    n++ == 0 && name)
			assert_true((size_t)snprintf(name, size, "%.79s/%.200s",
						     root, de->d_name) < size);
	closedir(d);
	return n;
}

static void recycle_reuses_files(void **state)
{
	struct fixture *f = *state;
	const char *old[] = {"step-1/shard", "missing/key"};
	const char *again[] = {"step-2/shard"};
	size_t n = 3 * MIB + 123, m = MIB + 4096 * 3, removed = 99;
	unsigned char *want = malloc(n), *got = malloc(n);
	char bin[300], path[200];
	struct stat st;
	ino_t ino;

	write_object(f->s, "step-1/shard", n, 1);
	ino = inode_of(f, "step-1/shard");
	/* Recycled: gone from the listing and its directory, kept in the
	 * root under a temporary name with a fresh time. */
	assert_int_equal(dpt__storage_recycle(f->s, old, 2), 0);
	assert_list(f->s, "", "");
	snprintf(path, sizeof(path), "%s/root/step-1", f->dir);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(recycled_files(f, bin, sizeof(bin)), 1);
	assert_int_equal(stat(bin, &st), 0);
	assert_true(st.st_mtime >= time(NULL) - 60);
	assert_int_equal(st.st_size, n);

	/* The next writer (O_DIRECT here) writes over it: same inode, cut to
	 * the shorter length, the new bytes only. */
	assert_int_equal(open_with(f, true, 0), 0);
	write_object(f->s, "step-2/shard", m, 2);
	assert_int_equal(recycled_files(f, NULL, 0), 0);
	assert_true(inode_of(f, "step-2/shard") == ino);
	fill(want, m, 2);
	assert_int_equal(dpt__storage_stat(f->s, "step-2/shard", &n), 0);
	assert_int_equal(n, m);
	assert_int_equal(dpt__storage_read(f->s, "step-2/shard", 0, m, got), 0);
	assert_memory_equal(got, want, m);
	/* With none left, a writer creates its file. */
	write_object(f->s, "step-3/shard", 4096, 3);
	assert_true(inode_of(f, "step-3/shard") != ino);

	/* gc keeps a recycled file younger than its age, removes an older
	 * one; a plain delete never recycles. */
	assert_int_equal(dpt__storage_recycle(f->s, again, 1), 0);
	assert_int_equal(dpt__storage_gc(f->s, "", 3600, &removed), 0);
	assert_int_equal(removed, 0);
	assert_int_equal(recycled_files(f, bin, sizeof(bin)), 1);
	struct timespec past[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
	assert_int_equal(utimensat(AT_FDCWD, bin, past, 0), 0);
	assert_int_equal(dpt__storage_gc(f->s, "", 3600, &removed), 0);
	assert_int_equal(removed, 1);
	assert_int_equal(recycled_files(f, NULL, 0), 0);
	const char *third[] = {"step-3/shard"};
	assert_int_equal(dpt__storage_delete(f->s, third, 1), 0);
	assert_int_equal(recycled_files(f, NULL, 0), 0);
	free(want);
	free(got);
}

/* Writes TEXT into PATH (made by the test, as another user would). */
static void put_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
}

static void assert_file_is(const char *path, const char *text)
{
	char buf[64] = "";
	FILE *fp = fopen(path, "r");

	assert_non_null(fp);
	assert_true(fread(buf, 1, sizeof(buf) - 1, fp) <= strlen(text));
	fclose(fp);
	assert_string_equal(buf, text);
}

/* What whoever else can write the root (a team directory, a 1777
 * checkpoint root) plants there: files under recycled names that are a
 * symbolic link, a hard link or another user's file, a run directory
 * that is a link into another tree, an object that is a link. No write
 * goes through them, no read follows them, no delete reaches past them,
 * and the listing shows none of them. */
static void planted_links(void **state)
{
	struct fixture *f = *state;
	char victim[128], other[128], p[200], buf[16];
	const char *run_key[] = {"run/step-9/shard"};
	const char *obj_key[] = {"step-5/shard"};
	uint64_t size;

	snprintf(victim, sizeof(victim), "%s/victim", f->dir);
	put_file(victim, "precious");
	/* Recycled names: a link to the victim's file, a hard link to it,
	 * and (as root) a file of another user's. */
	snprintf(p, sizeof(p), "%s/root/.@recycled.dpt-tmp.0000000000000001",
		 f->dir);
	assert_int_equal(symlink(victim, p), 0);
	snprintf(p, sizeof(p), "%s/root/.@recycled.dpt-tmp.0000000000000002",
		 f->dir);
	assert_int_equal(link(victim, p), 0);
	snprintf(p, sizeof(p), "%s/root/.@recycled.dpt-tmp.0000000000000003",
		 f->dir);
	put_file(p, "theirs");
	if (geteuid() == 0)
		assert_int_equal(chown(p, 65534, 65534), 0);
	else
		assert_int_equal(unlink(p), 0);
	write_object(f->s, "step-1/shard", 3 * 4096 + 5, 7);
	write_object(f->s, "step-2/shard", 100, 8);
	assert_file_is(victim, "precious");
	assert_int_equal(recycled_files(f, NULL, 0), geteuid() == 0 ? 3 : 2);

	/* A run directory that is a link into another tree. */
	snprintf(other, sizeof(other), "%s/other", f->dir);
	assert_int_equal(mkdir(other, 0700), 0);
	snprintf(p, sizeof(p), "%s/step-9", other);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/step-9/shard", other);
	put_file(p, "not yours");
	snprintf(p, sizeof(p), "%s/root/run", f->dir);
	assert_int_equal(symlink(other, p), 0);
	dpt__buf_reset(&logged);
	assert_int_not_equal(dpt__storage_read(f->s, run_key[0], 0, 4, buf), 0);
	assert_non_null(strstr(logged.data, "it is a symbolic link"));
	assert_int_not_equal(dpt__storage_stat(f->s, run_key[0], &size), 0);
	assert_int_not_equal(dpt__storage_delete(f->s, run_key, 1), 0);
	snprintf(p, sizeof(p), "%s/step-9/shard", other);
	assert_file_is(p, "not yours");
	assert_int_not_equal(
		dpt__storage_put_if_absent(f->s, "run/step-10/manifest.json",
					   "{}", 2),
		0);
	snprintf(p, sizeof(p), "%s/step-10", other);
	assert_int_equal(access(p, F_OK), -1);

	/* An object that is a link: not listed, not read; deleting it
	 * removes the link, never its target. */
	snprintf(p, sizeof(p), "%s/root/step-5", f->dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/root/step-5/shard", f->dir);
	assert_int_equal(symlink(victim, p), 0);
	dpt__buf_reset(&logged);
	assert_int_not_equal(dpt__storage_read(f->s, obj_key[0], 0, 4, buf), 0);
	assert_non_null(strstr(logged.data, "it is a symbolic link"));
	assert_list(f->s, "", "step-1/shard=12293 step-2/shard=100 ");
	assert_int_equal(dpt__storage_delete(f->s, obj_key, 1), 0);
	assert_int_equal(access(p, F_OK), -1);
	assert_file_is(victim, "precious");
}

struct claim {
	struct dpt__storage *s;
	char key[32];
};

static void *write_claim(void *p)
{
	struct claim *c = p;
	write_object(c->s, c->key, 64 * 1024 + 7, (uint64_t)c->key[4]);
	return NULL;
}

/* Eight writers start at once with two recycled files in the root: each
 * file is claimed by one writer, the others create theirs, and every
 * object reads back whole. */
static void recycle_claims_race(void **state)
{
	struct fixture *f = *state;
	const char *old[] = {"old-1/shard", "old-2/shard"};
	size_t n = 64 * 1024 + 7;
	unsigned char want[64 * 1024 + 7], got[64 * 1024 + 7];
	ino_t inos[2];
	struct claim c[8];
	pthread_t t[8];
	int reused = 0;

	write_object(f->s, old[0], 3 * MIB, 9);
	write_object(f->s, old[1], 3 * MIB, 9);
	inos[0] = inode_of(f, old[0]);
	inos[1] = inode_of(f, old[1]);
	assert_int_equal(dpt__storage_recycle(f->s, old, 2), 0);
	assert_int_equal(recycled_files(f, NULL, 0), 2);
	for (int i = 0; i < 8; i++) {
		c[i].s = f->s;
		snprintf(c[i].key, sizeof(c[i].key), "new-%d/shard", i);
		pthread_create(&t[i], NULL, write_claim, &c[i]);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(recycled_files(f, NULL, 0), 0);
	for (int i = 0; i < 8; i++) {
		ino_t ino = inode_of(f, c[i].key);
		uint64_t size;

		reused += ino == inos[0] || ino == inos[1];
		fill(want, n, (uint64_t)c[i].key[4]);
		assert_int_equal(dpt__storage_stat(f->s, c[i].key, &size), 0);
		assert_int_equal(size, n);
		assert_int_equal(dpt__storage_read(f->s, c[i].key, 0, n, got),
				 0);
		assert_memory_equal(got, want, n);
	}
	assert_int_equal(reused, 2);
}

static void open_errors(void **state)
{
	struct fixture *f = *state;
	struct dpt__storage *s = NULL;
	char uri[160];
	int fd;
	(void)state;

	snprintf(uri, sizeof(uri), "%s/file", f->dir);
	fd = open(uri, O_CREAT | O_WRONLY, 0644);
	close(fd);
	snprintf(uri, sizeof(uri), "file://%s/file/below", f->dir);
	assert_int_equal(dpt__storage_open(uri, NULL, &s), DPT_ENOENT);
	assert_non_null(strstr(logged.data, "cannot create directory"));
	assert_null(s);
	assert_int_equal(dpt__storage_open("relative/dir", NULL, &s),
			 DPT_EINVAL);
	assert_non_null(strstr(logged.data, "invalid storage URI"));
}

static mode_t mode_of(const char *dir, const char *rel)
{
	char path[300];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	assert_int_equal(stat(path, &st), 0);
	return st.st_mode & 07777;
}

/* A private run: every directory the storage creates (parents included)
 * is 0700 and every file 0600 exactly, under a umask of 022; the root,
 * when it exists and is the user's, is made 0700; a file recycled from
 * an older step is made 0600. Without it, the umask decides. */
static void private_modes(void **state)
{
	struct fixture *f = *state;
	struct dpt__storage_opts o;
	struct dpt__storage *p = NULL;
	const char *old[] = {"step-1/shard"};
	char uri[160], bin[300];
	struct stat st;
	mode_t mask = umask(022);

	dpt__storage_opts_init(&o);
	o.private_mode = true;
	snprintf(uri, sizeof(uri), "file://%s/new/parent/run", f->dir);
	assert_int_equal(dpt__storage_open(uri, &o, &p), 0);
	assert_int_equal(mode_of(f->dir, "new"), 0700);
	assert_int_equal(mode_of(f->dir, "new/parent"), 0700);
	assert_int_equal(mode_of(f->dir, "new/parent/run"), 0700);
	write_object(p, "step-1/rank-00000-of-00001.safetensors", 5000, 1);
	assert_int_equal(mode_of(f->dir, "new/parent/run/step-1"), 0700);
	assert_int_equal(mode_of(f->dir, "new/parent/run/step-1/"
					 "rank-00000-of-00001.safetensors"),
			 0600);
	assert_int_equal(
		dpt__storage_put_if_absent(p, "step-1/manifest.json", "{}", 2),
		0);
	assert_int_equal(mode_of(f->dir, "new/parent/run/step-1/manifest.json"),
			 0600);
	dpt__storage_destroy(&p);

	/* Not private (the fixture's storage at DIR/root): the umask's
	 * modes, 0755 and 0644, below a new root, which is 0700. */
	write_object(f->s, "step-1/shard", 5000, 2);
	assert_int_equal(mode_of(f->dir, "root/step-1"), 0755);
	assert_int_equal(mode_of(f->dir, "root/step-1/shard"), 0644);
	assert_int_equal(mode_of(f->dir, "root"), 0700);
	assert_int_equal(dpt__storage_recycle(f->s, old, 1), 0);
	assert_int_equal(recycled_files(f, bin, sizeof(bin)), 1);
	assert_int_equal(stat(bin, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);

	/* The same root opened private: it becomes 0700, and the file
	 * recycled from step 1 (0644) is 0600 once a writer claims it. */
	snprintf(uri, sizeof(uri), "file://%s/root", f->dir);
	assert_int_equal(dpt__storage_open(uri, &o, &p), 0);
	assert_int_equal(mode_of(f->dir, "root"), 0700);
	write_object(p, "step-2/shard", 5000, 3);
	assert_int_equal(mode_of(f->dir, "root/step-2"), 0700);
	assert_int_equal(mode_of(f->dir, "root/step-2/shard"), 0600);
	assert_true(inode_of(f, "step-2/shard") == st.st_ino); /* claimed */
	dpt__storage_destroy(&p);
	umask(mask);
}

/* Directories that another user owns or can write, in a run's tree or as
 * its root: refused with what to do, never listed. Root (as an
 * administrator's `dptrain ckpt gc`) acts on the tree of the root's
 * owner. Needs root (to make another user's directories); skipped
 * otherwise. */
/* Appends: whole lines, several appenders to one file, the file's mode
 * following its directory's. */
static void append_lines(void **state)
{
	struct fixture *f = *state;
	struct dpt__storage_appender *a = NULL, *b = NULL;
	char p[200], buf[64] = "";
	uint64_t size;

	assert_true(dpt__storage_caps(f->s) & DPT__STORAGE_CAP_APPEND);
	assert_int_equal(dpt__storage_appender_new(f->s, "../x", &a),
			 DPT_EINVAL);
	assert_null(a);
	assert_int_equal(dpt__storage_appender_new(f->s, "events.jsonl", &a),
			 0);
	assert_int_equal(dpt__storage_appender_new(f->s, "events.jsonl", &b),
			 0);
	/* Nothing is created before the first append. */
	assert_int_equal(dpt__storage_stat(f->s, "events.jsonl", &size),
			 DPT_ENOENT);
	assert_int_equal(dpt__storage_append(a, "a1\na2\n", 6), 0);
	assert_int_equal(dpt__storage_append(b, "b1\n", 3), 0);
	assert_int_equal(dpt__storage_append(a, "a3\n", 3), 0);
	assert_int_equal(dpt__storage_append(a, "", 0), 0);
	assert_int_equal(dpt__storage_read(f->s, "events.jsonl", 0, 12, buf),
			 0);
	assert_string_equal(buf, "a1\na2\nb1\na3\n");
	/* The root that open made is its user's alone: so is the file. */
	assert_int_equal(mode_of(f->dir, "root/events.jsonl"), 0600);
	dpt__storage_appender_destroy(&a);
	dpt__storage_appender_destroy(&b);
	assert_null(a);
	dpt__storage_appender_destroy(&a);

	/* In a directory that others may enter, 0644 less the umask; made
	 * private later, the file follows at the next append. */
	snprintf(p, sizeof(p), "%s/root", f->dir);
	assert_int_equal(chmod(p, 0755), 0);
	assert_int_equal(dpt__storage_appender_new(f->s, "run/log", &a), 0);
	assert_int_equal(dpt__storage_append(a, "x\n", 2), 0);
	assert_int_equal(mode_of(f->dir, "root/run/log") & 0600, 0600);
	snprintf(p, sizeof(p), "%s/root/run/log", f->dir);
	assert_int_equal(chmod(p, 0644), 0);
	snprintf(p, sizeof(p), "%s/root/run", f->dir);
	assert_int_equal(chmod(p, 0700), 0);
	assert_int_equal(dpt__storage_append(a, "y\n", 2), 0);
	assert_int_equal(mode_of(f->dir, "root/run/log"), 0600);
	assert_int_equal(dpt__storage_stat(f->s, "run/log", &size), 0);
	assert_int_equal(size, 4);
	dpt__storage_appender_destroy(&a);
}

/* What another user who can write the directory plants under the name
 * first: a symbolic link, a hard link, a FIFO (which would block a
 * writer that waited for a reader), a file of their own. Nothing is
 * written to any, and the message says what it is. */
static void append_refuses_planted(void **state)
{
	struct fixture *f = *state;
	struct dpt__storage_appender *a = NULL;
	char victim[128], p[200];
	static const struct {
		const char *key, *said;
	} planted[] = {
		{"link", "it is a symbolic link"},
		{"hard", "it is no regular file of this user's with one link"},
		{"fifo", "it is a FIFO"},
		{"theirs",
		 "it is no regular file of this user's with one link"},
	};

	snprintf(victim, sizeof(victim), "%s/victim", f->dir);
	put_file(victim, "precious");
	snprintf(p, sizeof(p), "%s/root/link", f->dir);
	assert_int_equal(symlink(victim, p), 0);
	snprintf(p, sizeof(p), "%s/root/hard", f->dir);
	assert_int_equal(link(victim, p), 0);
	snprintf(p, sizeof(p), "%s/root/fifo", f->dir);
	assert_int_equal(mkfifo(p, 0666), 0);
	snprintf(p, sizeof(p), "%s/root/theirs", f->dir);
	put_file(p, "");
	for (size_t i = 0; i < sizeof(planted) / sizeof(planted[0]); i++) {
		if (strcmp(planted[i].key, "theirs") == 0) {
			if (geteuid() != 0)
				continue; /* needs another user */
			assert_int_equal(chown(p, 65534, 65534), 0);
		}
		assert_int_equal(
			dpt__storage_appender_new(f->s, planted[i].key, &a), 0);
		dpt__buf_reset(&logged);
		assert_int_equal(dpt__storage_append(a, "line\n", 5), DPT_EIO);
		assert_non_null(logged.data);
		if (!strstr(logged.data, planted[i].said) ||
		    !strstr(logged.data, "/root/") ||
		    !strstr(logged.data, planted[i].key))
			fail_msg("%s: %s", planted[i].key, logged.data);
		dpt__storage_appender_destroy(&a);
	}
	assert_file_is(victim, "precious");
	assert_file_is(p, "");
}

static void untrusted_dirs(void **state)
{
	struct fixture *f = *state;
	struct dpt__storage *p = NULL;
	struct dpt__storage_opts o;
	char path[200], uri[160];
	uint64_t size;

	if (geteuid() != 0)
		skip();
	write_object(f->s, "mine/step-1/shard", 100, 1);
	/* A run directory that another user made. */
	snprintf(path, sizeof(path), "%s/root/theirs", f->dir);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(chown(path, 65534, 65534), 0);
	dpt__buf_reset(&logged);
	assert_int_equal(dpt__storage_put_if_absent(
				 f->s, "theirs/step-1/manifest.json", "{}", 2),
			 DPT_EIO);
	assert_non_null(strstr(logged.data, "belongs to user nobody"));
	assert_int_not_equal(dpt__storage_stat(f->s, "theirs/x", &size), 0);
	/* One that its group may write. */
	snprintf(path, sizeof(path), "%s/root/mine", f->dir);
	assert_int_equal(chmod(path, 0775), 0);
	dpt__buf_reset(&logged);
	assert_int_not_equal(
		dpt__storage_stat(f->s, "mine/step-1/shard", &size), 0);
	assert_non_null(strstr(logged.data, "chmod go-w"));
	assert_int_equal(chmod(path, 0755), 0);
	assert_int_equal(dpt__storage_stat(f->s, "mine/step-1/shard", &size),
			 0);
	/* The listing shows the tree's runs only. */
	snprintf(path, sizeof(path), "%s/root/theirs/x", f->dir);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_list(f->s, "", "mine/step-1/shard=100 ");

	/* Another user's tree, as root: a job (which may create its root)
	 * writes into no other user's tree; reading or cleaning it
	 * (no_create, as the dptrain tool opens a root) acts for its owner,
	 * whose directories below are then used. */
	snprintf(uri, sizeof(uri), "file://%s/root/theirs", f->dir);
	dpt__buf_reset(&logged);
	assert_int_equal(dpt__storage_open(uri, NULL, &p), DPT_ECONFIG);
	assert_non_null(strstr(logged.data, "belongs to user nobody"));
	snprintf(path, sizeof(path), "%s/root/theirs/x/m", f->dir);
	put_file(path, "{}");
	snprintf(path, sizeof(path), "%s/root/theirs/x", f->dir);
	assert_int_equal(chown(path, 65534, 65534), 0);
	dpt__storage_opts_init(&o);
	o.no_create = true;
	assert_int_equal(dpt__storage_open(uri, &o, &p), 0);
	assert_int_equal(dpt__storage_stat(p, "x/m", &size), 0);
	dpt__storage_destroy(&p);

	/* On the way to a root, in a directory that others may write (a
	 * shared checkpoint directory of mode 1777): another user's run
	 * directory, made first, and a link are refused. */
	snprintf(path, sizeof(path), "%s/shared", f->dir);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(chmod(path, 01777), 0);
	snprintf(path, sizeof(path), "%s/shared/run", f->dir);
	assert_int_equal(mkdir(path, 0777), 0);
	assert_int_equal(chown(path, 65534, 65534), 0);
	snprintf(path, sizeof(path), "%s/shared/link", f->dir);
	assert_int_equal(symlink(f->dir, path), 0);
	snprintf(uri, sizeof(uri), "file://%s/shared/run", f->dir);
	dpt__buf_reset(&logged);
	assert_int_equal(dpt__storage_open(uri, NULL, &p), DPT_ECONFIG);
	assert_non_null(strstr(logged.data, "another user made it first"));
	snprintf(uri, sizeof(uri), "file://%s/shared/link/root", f->dir);
	dpt__buf_reset(&logged);
	assert_int_not_equal(dpt__storage_open(uri, NULL, &p), 0);
	assert_non_null(strstr(logged.data, "symbolic link in a directory"));
	snprintf(uri, sizeof(uri), "file://%s/shared/new", f->dir);
	assert_int_equal(dpt__storage_open(uri, NULL, &p), 0);
	dpt__storage_destroy(&p);

	/* Roots: one that others may write needs the sticky bit. */
	snprintf(path, sizeof(path), "%s/root", f->dir);
	assert_int_equal(chmod(path, 0777), 0);
	snprintf(uri, sizeof(uri), "file://%s/root", f->dir);
	dpt__buf_reset(&logged);
	assert_int_equal(dpt__storage_open(uri, NULL, &p), DPT_ECONFIG);
	assert_non_null(strstr(logged.data, "no sticky bit"));
	assert_int_equal(chmod(path, 01777), 0);
	assert_int_equal(dpt__storage_open(uri, NULL, &p), 0);
	dpt__storage_destroy(&p);

	/* A user's root that another user made (pre-created in a shared
	 * directory): refused, as nobody, for a root of uid 65533. */
	assert_int_equal(chmod(f->dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/planted", f->dir);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(chown(path, 65533, 65533), 0);
	snprintf(uri, sizeof(uri), "file://%s/planted", f->dir);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int rc;

		dpt__buf_reset(&logged);
		rc = setgid(65534) || setuid(65534)
			     ? 99
			     : dpt__storage_open(uri, NULL, &p);
		_exit(rc == DPT_ECONFIG && strstr(logged.data, "belongs to uid "
							       "65533")
			      ? 0
			      : 1);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(round_trip_and_ranges, setup,
						teardown),
		cmocka_unit_test_setup_teardown(abort_and_holes_leave_nothing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(concurrent_positional_writes,
						setup, teardown),
		cmocka_unit_test_setup_teardown(direct_io, setup, teardown),
		cmocka_unit_test_setup_teardown(ranged_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(put_if_absent_commits_once,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			put_if_absent_race_has_one_winner, setup, teardown),
		cmocka_unit_test_setup_teardown(list_delete_gc, setup,
						teardown),
		cmocka_unit_test_setup_teardown(recycle_reuses_files, setup,
						teardown),
		cmocka_unit_test_setup_teardown(recycle_claims_race, setup,
						teardown),
		cmocka_unit_test_setup_teardown(planted_links, setup, teardown),
		cmocka_unit_test_setup_teardown(untrusted_dirs, setup,
						teardown),
		cmocka_unit_test_setup_teardown(open_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(private_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(append_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(append_refuses_planted, setup,
						teardown),
	};
	dpt__buf_init(&logged, 1 << 20);
	dpt__log_set_sink(capture);
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * A full file system: on a 4 MiB tmpfs that this test mounts (it needs
 * root), writing an object that does not fit fails with DPT_ENOSPC and a
 * message naming its path, leaves no temporary file behind, and leaves the
 * object committed before intact. Without root or tmpfs the program says
 * SKIP (the whole plan: the TAP driver counts "not ok # SKIP" as a failure).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include <dptrain/error.h>

#include "buf.h"
#include "log.h"
#include "storage/storage.h"

#define MIB (1024 * 1024)

static char dir[] = "/tmp/dpt-test-enospc-XXXXXX";
static struct dpt__buf logged;

static void capture(enum dpt__log_level level, const char *msg)
{
	(void)level;
	dpt__buf_printf(&logged, "%s\n", msg);
}

static int count_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.' || strstr(de->d_name, "dpt-tmp"))
			n++;
	if (d)
		closedir(d);
	return n;
}

static void committed_object_survives(void **state)
{
	struct dpt__storage *s;
	struct dpt__storage_writer *w;
	unsigned char *big = malloc(8 * MIB), *small = malloc(MIB);
	unsigned char *back = malloc(MIB);
	char want[200], path[200];
	uint64_t size;
	int rc;
	(void)state;

	for (size_t i = 0; i < MIB; i++)
		small[i] = (unsigned char)(i * 31);
	memset(big, 0xab, 8 * MIB);
	assert_int_equal(dpt__storage_open(dir, NULL, &s), 0);
	assert_int_equal(
		dpt__storage_put_if_absent(s, "step-1/manifest", small, MIB),
		0);

	/* A writer: the failure comes from write_at or from finish. */
	dpt__buf_reset(&logged);
	assert_int_equal(dpt__storage_writer_new(s, "step-2/shard", &w), 0);
	rc = dpt__storage_writer_write_at(w, big, 8 * MIB, 0);
	if (rc == 0)
		rc = dpt__storage_writer_finish(&w);
	else
		dpt__storage_writer_abort(&w);
	assert_int_equal(rc, DPT_ENOSPC);
	snprintf(want, sizeof(want),
		 "cannot write '%s/step-2/shard': No space "
		 "left on device",
		 dir);
	if (!strstr(logged.data, want))
		fail_msg("expected '%s' in the log, got '%s'", want,
			 logged.data);
	assert_int_equal(dpt__storage_stat(s, "step-2/shard", &size),
			 DPT_ENOENT);
	snprintf(path, sizeof(path), "%s/step-2", dir);
	assert_int_equal(count_entries(path), 0);

	/* The commit primitive too. */
	dpt__buf_reset(&logged);
	assert_int_equal(
		dpt__storage_put_if_absent(s, "step-2/manifest", big, 8 * MIB),
		DPT_ENOSPC);
	snprintf(want, sizeof(want),
		 "cannot write '%s/step-2/manifest': No "
		 "space left on device",
		 dir);
	assert_non_null(strstr(logged.data, want));
	assert_int_equal(count_entries(path), 0);

	/* What was committed before is intact, and the space is back. */
	assert_int_equal(dpt__storage_read(s, "step-1/manifest", 0, MIB, back),
			 0);
	assert_memory_equal(back, small, MIB);
	assert_int_equal(dpt__storage_writer_new(s, "step-3/shard", &w), 0);
	assert_int_equal(dpt__storage_writer_write_at(w, big, 2 * MIB, 0), 0);
	assert_int_equal(dpt__storage_writer_finish(&w), 0);
	dpt__storage_destroy(&s);
	free(big);
	free(small);
	free(back);
}

static int teardown(void **state)
{
	(void)state;
	umount(dir);
	return rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(committed_object_survives),
	};
	if (geteuid() != 0) {
		printf("1..0 # SKIP mounting a small tmpfs needs root\n");
		return 0;
	}
	if (!mkdtemp(dir)) {
		printf("1..0 # SKIP cannot create a directory in /tmp\n");
		return 0;
	}
	if (mount("tmpfs", dir, "tmpfs", 0, "size=4m") != 0) {
		printf("1..0 # SKIP cannot mount a tmpfs on %s: %m\n", dir);
		rmdir(dir);
		return 0;
	}
	dpt__buf_init(&logged, 1 << 16);
	dpt__log_set_sink(capture);
	return cmocka_run_group_tests(tests, NULL, teardown);
}

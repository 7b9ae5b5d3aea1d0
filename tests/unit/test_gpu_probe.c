/*
 * The device-file probe (worker/gpu_probe.c) that decides whether dpt_init's
 * automatic backend may ask CUDA at all: a node without NVIDIA device
 * files, or a job whose CUDA_VISIBLE_DEVICES hides every GPU, never
 * initialises CUDA's driver.
 */
#define _GNU_SOURCE /* mkdtemp, mknod's makedev */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "worker/gpu_probe.h"

static char dir[64];

static void path_in(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/dpt-gpu-probe.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	static const char *names[] = {"nvidia0", "nvidiactl", "nvidia-uvm",
				      "nvidia7", "dxg"};
	char p[128];

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		path_in(p, sizeof(p), names[i]);
		unlink(p);
	}
	return rmdir(dir);
}

/* A character device NAME in the directory (root only), or a skip. */
static void chardev(const char *name)
{
	char p[128];

	path_in(p, sizeof(p), name);
	if (mknod(p, S_IFCHR | 0600, makedev(195, 0)) != 0)
		skip(); /* not root: no device nodes can be made */
}

static void regular(const char *name)
{
	char p[128];
	FILE *f;

	path_in(p, sizeof(p), name);
	f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
}

/* No device file, or only the control devices: no GPU, whatever the
 * environment says. */
static void no_gpu_files(void **state)
{
	(void)state;
	assert_false(dpt__gpu_device_files(dir, NULL));
	assert_false(dpt__gpu_device_files(dir, "0"));
	regular("nvidia0"); /* a planted regular file is no device */
	assert_false(dpt__gpu_device_files(dir, NULL));
	chardev("nvidiactl");
	chardev("nvidia-uvm");
	assert_false(dpt__gpu_device_files(dir, NULL));
}

static void gpu_files(void **state)
{
	(void)state;
	chardev("nvidia7");
	assert_true(dpt__gpu_device_files(dir, NULL));
	assert_true(dpt__gpu_device_files(dir, "0,1"));
	assert_true(dpt__gpu_device_files(dir, "GPU-8f3c"));
	/* Slurm and users hide every GPU these ways. */
	assert_false(dpt__gpu_device_files(dir, ""));
	assert_false(dpt__gpu_device_files(dir, "-1"));
	assert_false(dpt__gpu_device_files(dir, "-1,0"));
	assert_false(dpt__gpu_device_files(dir, "NoDevFiles"));
}

static void wsl_and_unreadable(void **state)
{
	(void)state;
	chardev("dxg");
	assert_true(dpt__gpu_device_files(dir, NULL));
	/* A device directory that cannot be read: CUDA is asked. */
	assert_true(dpt__gpu_device_files("/nonexistent/dev", NULL));
	assert_false(dpt__gpu_device_files("/nonexistent/dev", ""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(no_gpu_files, setup, teardown),
		cmocka_unit_test_setup_teardown(gpu_files, setup, teardown),
		cmocka_unit_test_setup_teardown(wsl_and_unreadable, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

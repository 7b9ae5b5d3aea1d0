/*
 * Saves steps of one run without a coordinator (a context-free checkpoint
 * handle): a small state of known bytes, each step committed before the
 * next. For the tests of the `dptrain` tool (tests/ckpt/cli.sh), which
 * then run under the sanitizers with no Python in the way.
 *
 *   save_steps URI RUN STEP...
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <dptrain/ckpt.h>
#include <dptrain/error.h>

int main(int argc, char **argv)
{
	static float a[1000];
	uint64_t n = sizeof(a) / sizeof(a[0]);
	struct dpt_ckpt_opts o;
	struct dpt_ckpt *ck = NULL;
	int rc;

	if (argc < 4) {
		fprintf(stderr, "usage: save_steps URI RUN STEP...\n");
		return 2;
	}
	for (uint64_t i = 0; i < n; i++)
		a[i] = (float)i;
	dpt_ckpt_opts_default(&o);
	o.uri = argv[1];
	o.run = argv[2];
	o.keep_last = 1000;
	rc = dpt_ckpt_new(&ck, NULL, &o);
	if (!rc)
		rc = dpt_ckpt_register(ck, &(struct dpt_ckpt_tensor){
						   .name = "a",
						   .dtype = DPT_FLOAT32,
						   .kind = DPT_CKPT_REPLICATED,
						   .ndim = 1,
						   .shape = &n,
						   .data = a});
	for (int i = 3; i < argc && !rc; i++) {
		struct dpt_ckpt_meta m = {.step = strtoull(argv[i], NULL, 10)};

		rc = dpt_ckpt_save(ck, &m);
		if (!rc)
			rc = dpt_ckpt_wait(ck);
	}
	dpt_ckpt_destroy(&ck);
	if (rc) {
		fprintf(stderr, "save_steps: %s\n", dpt_strerror(rc));
		return 1;
	}
	return 0;
}

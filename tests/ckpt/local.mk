# Checkpoint tests (the unit tests are in tests/unit/local.mk): integration
# tests that run a real coordinator and real workers (tests/ckpt/ckpt_worker,
# linked with libdptrain) saving and loading through the public API, and the
# `dptrain ckpt` tool.
check_PROGRAMS += tests/ckpt/ckpt_worker
tests_ckpt_ckpt_worker_SOURCES = tests/ckpt/ckpt_worker.c
tests_ckpt_ckpt_worker_CFLAGS = $(AM_CFLAGS) $(XXHASH_CFLAGS)
tests_ckpt_ckpt_worker_LDADD = worker/libdptrain.la $(XXHASH_LIBS)
# A training loop that stops in time and resumes (tests/spank/walltime.sh,
# tests/coord/stop.sh).
check_PROGRAMS += tests/ckpt/train_loop
tests_ckpt_train_loop_SOURCES = tests/ckpt/train_loop.c
tests_ckpt_train_loop_LDADD = worker/libdptrain.la
# Steps of one run saved without a coordinator (tests/ckpt/cli.sh).
check_PROGRAMS += tests/ckpt/save_steps
tests_ckpt_save_steps_SOURCES = tests/ckpt/save_steps.c
tests_ckpt_save_steps_LDADD = worker/libdptrain.la
if HAVE_CUDA
# --device: the tensors in GPU memory (tests/ckpt/cuda.sh).
tests_ckpt_ckpt_worker_CFLAGS += $(CUDA_CFLAGS)
tests_ckpt_ckpt_worker_LDADD += $(CUDA_LIBS)
endif

CKPT_TESTS = \
	tests/ckpt/reshard.sh \
	tests/ckpt/damage.sh \
	tests/ckpt/crash.sh \
	tests/ckpt/enospc.sh \
	tests/ckpt/s3.sh \
	tests/ckpt/s3_kill.sh \
	tests/ckpt/policy.sh \
	tests/ckpt/device.sh \
	tests/ckpt/cuda.sh \
	tests/ckpt/plot_path.sh \
	tests/ckpt/cli.sh
TESTS += $(CKPT_TESTS)
EXTRA_DIST += $(CKPT_TESTS) tests/ckpt/lib.sh tests/ckpt/torch_loop.py

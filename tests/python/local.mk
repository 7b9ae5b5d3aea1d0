# The Python binding with Debian's python3-torch on the real test cluster
# (lightning.sh: with the torch 2 venv).
# (lightning.sh, preempt.sh and the other tests named in LONG_TESTS,
# tests/local.mk, run first.)
# torch.sh and fmnist.sh (both torches') run among the LONG_TESTS.
TESTS += tests/python/binding.sh tests/python/errors.sh tests/python/log.sh
EXTRA_DIST += tests/python/binding.sh tests/python/worker.py \
	tests/python/torch.sh tests/python/torch_worker.py \
	tests/python/fmnist.sh tests/python/fmnist_check.py \
	tests/python/lightning.sh tests/python/lightning_fit.py tests/python/preempt.sh \
	tests/python/errors.sh tests/python/errors.py \
	tests/python/log.sh tests/python/log.py \
	tests/python/torch_features.py
# dptrain.lightning with torch 2 and Lightning 2.6 (the venv of
# contrib/setup/install-deps.sh) on the real test cluster: a Lightning
# user's script across world sizes, its stops (walltime, signals), and the
# Trainer's other modes.
EXTRA_DIST += tests/python/lightning_stop.sh tests/python/lightning_modes.sh
# A task lost before the start: DptrainEnvironment, and
# dptrain.torch.init_process_group, fail the step at once.
TESTS += tests/python/lost_task.sh
EXTRA_DIST += tests/python/lost_task.sh
# A manifest another user planted names a tensor of 1 TiB: refused before
# anything is allocated (without a cluster).
TESTS += tests/python/planted.sh
EXTRA_DIST += tests/python/planted.sh tests/python/planted.py
# dptrain.torch's step() takes the library's rule for a failed save
# (dpt_ckpt_step_error), without a cluster.
TESTS += tests/python/step_error.sh
EXTRA_DIST += tests/python/step_error.sh tests/python/step_error.py
# import dptrain before import torch: one libnccl, torch's.
TESTS += tests/python/nccl.sh
EXTRA_DIST += tests/python/nccl.sh
# The same tests again on torch 2, the Python of the venv that
# contrib/setup/install-deps.sh makes (tests/python/torch2/run.sh; each
# says SKIP without it). The demo and the Lightning tests run on torch 2
# only.
TORCH2_TESTS = tests/python/torch2/binding.sh tests/python/torch2/errors.sh \
	tests/python/torch2/log.sh tests/python/torch2/layout.sh \
	tests/python/torch2/nccl.sh tests/python/torch2/planted.sh \
	tests/python/torch2/step_error.sh
TESTS += $(TORCH2_TESTS)
EXTRA_DIST += $(TORCH2_TESTS) tests/python/torch2/preempt.sh \
	tests/python/torch2/torch.sh tests/python/torch2/fmnist.sh \
	tests/python/torch2/run.sh
# The package installed by pip into a fresh venv of the python3 first on
# PATH (not Debian's), with no package index.
TESTS += tests/python/venv.sh
EXTRA_DIST += tests/python/venv.sh
# The binding's ctypes structs against the C layouts (tests/python/layout
# prints them) and the library's size checks.
check_PROGRAMS += tests/python/layout
tests_python_layout_SOURCES = tests/python/layout.c
TESTS += tests/python/layout.sh
EXTRA_DIST += tests/python/layout.sh tests/python/layout_check.py
# The README's demo (contrib/demo/elastic.sh), shorter.
EXTRA_DIST += tests/python/demo.sh

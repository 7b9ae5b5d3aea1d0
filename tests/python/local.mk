# The Python binding with Debian's python3-torch on the real test cluster.
TESTS += tests/python/binding.sh tests/python/torch.sh tests/python/fmnist.sh \
	tests/python/lightning.sh tests/python/preempt.sh tests/python/errors.sh \
	tests/python/log.sh
EXTRA_DIST += tests/python/binding.sh tests/python/worker.py \
	tests/python/torch.sh tests/python/torch_worker.py \
	tests/python/fmnist.sh tests/python/fmnist_check.py \
	tests/python/lightning.sh tests/python/lightning_fit.py tests/python/preempt.sh \
	tests/python/errors.sh tests/python/errors.py \
	tests/python/log.sh tests/python/log.py \
	tests/python/torch_features.py
# import dptrain before import torch: one libnccl, torch's.
TESTS += tests/python/nccl.sh
EXTRA_DIST += tests/python/nccl.sh
# The same tests again on torch 2, the Python of the venv that
# contrib/setup/install-deps.sh makes (tests/python/torch2/run.sh; each
# says SKIP without it). Not demo.sh: contrib/demo runs Debian's python3.
TORCH2_TESTS = tests/python/torch2/binding.sh tests/python/torch2/torch.sh \
	tests/python/torch2/fmnist.sh tests/python/torch2/preempt.sh \
	tests/python/torch2/errors.sh tests/python/torch2/log.sh \
	tests/python/torch2/layout.sh tests/python/torch2/nccl.sh
TESTS += $(TORCH2_TESTS)
EXTRA_DIST += $(TORCH2_TESTS) tests/python/torch2/run.sh
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
TESTS += tests/python/demo.sh
EXTRA_DIST += tests/python/demo.sh

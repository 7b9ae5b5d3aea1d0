# The Python binding with Debian's python3-torch on the real test cluster.
TESTS += tests/python/binding.sh tests/python/torch.sh tests/python/fmnist.sh \
	tests/python/lightning.sh tests/python/preempt.sh tests/python/errors.sh
EXTRA_DIST += tests/python/binding.sh tests/python/worker.py \
	tests/python/torch.sh tests/python/torch_worker.py \
	tests/python/fmnist.sh tests/python/fmnist_check.py \
	tests/python/lightning.sh tests/python/lightning_fit.py tests/python/preempt.sh \
	tests/python/errors.sh tests/python/errors.py

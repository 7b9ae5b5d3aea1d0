# The Python binding with Debian's python3-torch on the real test cluster.
TESTS += tests/python/binding.sh
EXTRA_DIST += tests/python/binding.sh tests/python/worker.py

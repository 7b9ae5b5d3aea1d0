# Live shrink (doc/shrink.md) on the real test cluster: the survivors of a
# dead rank or node go on training. The C example is built here so that the
# tests run it; its source is also installed as an example.
check_PROGRAMS += contrib/examples/shrink
contrib_examples_shrink_SOURCES = contrib/examples/shrink.c
contrib_examples_shrink_LDADD = worker/libdptrain.la
TESTS += tests/shrink/worker.sh tests/shrink/node.sh tests/shrink/python.sh
EXTRA_DIST += contrib/examples/fmnist_shrink.py tests/shrink/lib.sh tests/shrink/check.py tests/shrink/worker.sh tests/shrink/node.sh tests/shrink/python.sh

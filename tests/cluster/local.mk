# Integration tests on the Slurm test bed: a real slurmctld and four slurmd
# on this machine (tests/cluster/up, tests/cluster/down), with the plugin of
# this build tree loaded. They need root; without it they SKIP.
CLUSTER_TESTS = tests/cluster/basic.sh tests/cluster/netns.sh
TESTS += $(CLUSTER_TESTS)
EXTRA_DIST += $(CLUSTER_TESTS) tests/cluster/up tests/cluster/down

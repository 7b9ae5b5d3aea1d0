# Integration tests on the Slurm test bed: a real slurmctld and four slurmd
# on this machine (tests/cluster/up, tests/cluster/down), with the plugin of
# this build tree loaded. They need root; without it they SKIP.
TESTS += \
	tests/cluster/basic.sh \
	tests/cluster/netns.sh
EXTRA_DIST += \
	tests/cluster/up \
	tests/cluster/down \
	tests/cluster/basic.sh \
	tests/cluster/netns.sh

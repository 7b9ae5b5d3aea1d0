# The Debian packages: built, installed with dpkg, used by srun --dp-train
# on the test cluster, removed and purged. Needs root and
# dpkg-buildpackage; without them it SKIPs.
# Run among the LONG_TESTS (tests/local.mk).
EXTRA_DIST += tests/packaging/deb.sh

# The Debian packages: built, installed with dpkg, used by srun --dp-train
# on the test cluster, removed and purged. Needs root and
# dpkg-buildpackage; without them it SKIPs.
TESTS += tests/packaging/deb.sh
EXTRA_DIST += tests/packaging/deb.sh

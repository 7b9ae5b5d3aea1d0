# The seeded fault campaign on the real test cluster: a short one in
# `make check`, long ones by hand (tests/faults/campaign --trials N --seed S;
# doc/RELIABILITY.md records them).
# Runs first: LONG_TESTS, tests/local.mk.
EXTRA_DIST += tests/faults/short.sh tests/faults/campaign

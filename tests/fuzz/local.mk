# A libFuzzer target for the wire decoder. fuzz_wire.sh builds it with clang
# at test time, so that the project's compiler may stay gcc, and skips when
# clang's libFuzzer runtime is absent.
EXTRA_DIST += tests/fuzz/fuzz_wire.c tests/fuzz/fuzz_wire.sh
TESTS += tests/fuzz/fuzz_wire.sh

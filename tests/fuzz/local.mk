# libFuzzer targets, one per parser that reads what others write: the wire
# protocol, the manifest, S3's XML answers, URIs, endpoints and keys, the
# admin configuration and the user's options, typed values. Each
# tests/fuzz/fuzz_NAME.sh builds tests/fuzz/fuzz_NAME.c with clang at test
# time (tests/fuzz/lib.sh), so that the project's compiler may stay gcc,
# runs it briefly from the seeds in tests/fuzz/corpus/NAME/, and skips
# when clang's libFuzzer runtime is absent. doc/RELIABILITY.md records the
# long runs.
FUZZ_TESTS = \
	tests/fuzz/fuzz_wire.sh \
	tests/fuzz/fuzz_parse.sh \
	tests/fuzz/fuzz_uri.sh \
	tests/fuzz/fuzz_s3xml.sh \
	tests/fuzz/fuzz_manifest.sh \
	tests/fuzz/fuzz_settings.sh
EXTRA_DIST += tests/fuzz/lib.sh $(FUZZ_TESTS) $(FUZZ_TESTS:.sh=.c) \
	tests/fuzz/s3xml.dict tests/fuzz/manifest.dict tests/fuzz/settings.dict \
	tests/fuzz/corpus
TESTS += $(FUZZ_TESTS)

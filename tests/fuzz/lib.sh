# tests/fuzz/lib.sh: what every libFuzzer test shares. A test script
# (tests/fuzz/fuzz_NAME.sh) names its target, the pkg-config modules its
# sources need, the largest input worth trying and the project's real
# sources that the target calls, then hands them to fuzz_run:
#
#   . "$top_srcdir/tests/fuzz/lib.sh"
#   fuzz_run uri "" 4096 common/uri.c storage/storage.c ...
#
# fuzz_run builds tests/fuzz/fuzz_NAME.c with clang's libFuzzer, ASan and
# UBSan (the project's own compiler may be gcc, which has no libFuzzer),
# then runs it from the seeds in tests/fuzz/corpus/NAME/, with
# tests/fuzz/NAME.dict as its dictionary when there is one. The seeds are
# only read: inputs that reach new code go to a scratch directory. It skips
# (exit 77) when clang or its libFuzzer runtime is missing.
#
# Environment knobs: DPT_FUZZ_RUNS (executions, default 20000; libFuzzer
# stops at whichever of this and DPT_FUZZ_TIME comes first), DPT_FUZZ_TIME
# (seconds, default 20; 0: no limit), DPT_FUZZ_KEEP=1 (keep the scratch
# directory, which holds the binary, the log and any crashing input),
# DPT_FUZZ_ARGS (more libFuzzer flags: -seed=N repeats a run whose seed
# the log gave), CLANG (default clang).

: "${top_srcdir:?}" "${top_builddir:?}"

# The storage library's sources, which a target that opens storage (or
# whose sources call into storage.c) links whole.
# common/uri.c is the grammar of storage URIs and keys.
fuzz_storage_sources="common/uri.c storage/storage.c storage/posix.c
	storage/posix_writer.c storage/posix_append.c storage/posix_tree.c
	storage/posix_dirs.c
	storage/s3.c storage/s3_writer.c storage/s3_request.c
	storage/s3_outcome.c storage/s3_config.c storage/sigv4.c storage/xml.c"

fuzz_run()
{
	name=$1
	pkgs=$2
	max_len=$3
	shift 3
	clang=${CLANG:-clang}
	runs=${DPT_FUZZ_RUNS:-20000}
	time=${DPT_FUZZ_TIME:-20}
	seeds=$top_srcdir/tests/fuzz/corpus/$name
	dict=$top_srcdir/tests/fuzz/$name.dict

	work=$(mktemp -d "${TMPDIR:-/tmp}/dpt-fuzz-$name.XXXXXX") || exit 1
	# shellcheck disable=SC2064
	trap "[ -n \"\$DPT_FUZZ_KEEP\" ] || rm -rf '$work'" EXIT

	if ! command -v "$clang" >/dev/null 2>&1; then
		echo "1..0 # SKIP clang not found (apt-get install clang)"
		exit 77
	fi
	printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$work/probe.c"
	if ! "$clang" -fsanitize=fuzzer "$work/probe.c" -o "$work/probe" \
		>/dev/null 2>&1; then
		echo "1..0 # SKIP clang has no libFuzzer runtime (apt-get install libclang-rt-14-dev)"
		exit 77
	fi

	echo "1..2"
	cflags= libs=
	if [ -n "$pkgs" ]; then
		# shellcheck disable=SC2086
		cflags=$(pkg-config --cflags $pkgs) &&
			libs=$(pkg-config --libs $pkgs) || {
			echo "not ok 1 - fuzz_$name builds # pkg-config $pkgs failed"
			echo "not ok 2 - fuzz_$name runs # SKIP not built"
			exit 1
		}
	fi
	srcs=
	for s in "$@"; do
		srcs="$srcs $top_srcdir/$s"
	done
	# shellcheck disable=SC2086
	if "$clang" -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined -std=gnu11 $cflags \
		-I"$top_builddir" -I"$top_srcdir" -I"$top_srcdir/include" \
		-I"$top_srcdir/common" -I"$top_srcdir/storage" \
		-I"$top_srcdir/ckpt" -I"$top_srcdir/spank" \
		"$top_srcdir/tests/fuzz/fuzz_$name.c" $srcs $libs -lm \
		-o "$work/fuzz_$name" >"$work/build.log" 2>&1; then
		echo "ok 1 - fuzz_$name builds with libFuzzer"
	else
		sed 's/^/# /' "$work/build.log"
		echo "not ok 1 - fuzz_$name builds with libFuzzer"
		echo "not ok 2 - fuzz_$name runs # SKIP not built"
		exit 1
	fi

	mkdir "$work/corpus"
	set -- -runs="$runs" -max_total_time="$time" -max_len="$max_len" \
		-print_final_stats=1 -artifact_prefix="$work/"
	[ -f "$dict" ] && set -- "$@" -dict="$dict"
	# shellcheck disable=SC2086
	if (cd "$work" && "./fuzz_$name" "$@" ${DPT_FUZZ_ARGS:-} corpus \
		"$seeds" >fuzz.log 2>&1); then
		# libFuzzer's last status line: executions, coverage (cov:
		# edges, ft: features), corpus size.
		grep -E '^INFO: Seed: ' "$work/fuzz.log" | sed 's/^/# /'
		grep -E '^#[0-9]+[[:space:]]+DONE' "$work/fuzz.log" |
			sed 's/^/# /'
		grep -E '^stat::' "$work/fuzz.log" | sed 's/^/# /'
		echo "ok 2 - fuzz_$name: no finding"
	else
		tail -n 60 "$work/fuzz.log" | sed 's/^/# /'
		ls "$work"/crash-* "$work"/leak-* "$work"/timeout-* \
			"$work"/oom-* 2>/dev/null | sed 's/^/# input: /'
		DPT_FUZZ_KEEP=1
		echo "# kept $work"
		echo "not ok 2 - fuzz_$name found a failing input"
		exit 1
	fi
}

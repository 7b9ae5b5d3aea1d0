#!/bin/sh
# Builds tests/fuzz/fuzz_wire.c with clang's libFuzzer (the project's own
# compiler may be gcc) and runs it briefly from a small seed corpus of valid
# messages. Skips when clang or its libFuzzer runtime is missing.
: "${top_srcdir:?}" "${top_builddir:?}"
CLANG=${CLANG:-clang}
RUNS=${DPT_FUZZ_RUNS:-20000}

work=$(mktemp -d "${TMPDIR:-/tmp}/dpt-fuzz.XXXXXX") || exit 1
trap '[ -n "$DPT_FUZZ_KEEP" ] || rm -rf "$work"' EXIT

if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "1..0 # SKIP clang not found (apt-get install clang)"
	exit 77
fi
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' >"$work/probe.c"
if ! "$CLANG" -fsanitize=fuzzer "$work/probe.c" -o "$work/probe" >/dev/null 2>&1; then
	echo "1..0 # SKIP clang has no libFuzzer runtime (apt-get install libclang-rt-14-dev)"
	exit 77
fi

echo "1..2"
libs=$(pkg-config --libs libzmq libcrypto 2>/dev/null) || libs="-lzmq -lcrypto"
cflags=$(pkg-config --cflags libzmq libcrypto 2>/dev/null)
# shellcheck disable=SC2086
if "$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined -std=gnu11 $cflags \
	-I"$top_builddir" -I"$top_srcdir/include" -I"$top_srcdir/common" \
	"$top_srcdir/tests/fuzz/fuzz_wire.c" "$top_srcdir/common/wire.c" \
	"$top_srcdir/common/error.c" "$top_srcdir/common/log.c" \
	"$top_srcdir/common/parse.c" \
	$libs -o "$work/fuzz_wire" >"$work/build.log" 2>&1; then
	echo "ok 1 - fuzz_wire builds with libFuzzer"
else
	sed 's/^/# /' "$work/build.log"
	echo "not ok 1 - fuzz_wire builds with libFuzzer"
	echo "not ok 2 - fuzz_wire runs # SKIP not built"
	exit 1
fi

# Seeds (protocol version 4): a JOIN, a ROSTER of two ranks, a GEN_END, a
# BARRIER and a VOTE_DONE with the STOP flag.
mkdir "$work/corpus"
hdr() { printf '\104\120\004'"$1"'\000\000\000\001\000\000\000\001\000\000\000'"$2"; }
{ hdr '\001' '\041'
  printf '\000\000\000\001\000\000\000\002\000\000\000\003\000\000\000\004\000\000\000\003\020\000'
  printf '\011127.0.0.1\000'; } >"$work/corpus/join"
{ hdr '\003' '\044'
  printf '\000\000\000\002'
  printf '\000\000\000\000\020\000\011127.0.0.1'
  printf '\000\000\000\001\020\001\011127.0.0.1'; } >"$work/corpus/roster"
{ hdr '\010' '\013'
  printf '\000\000\000\001\000\000\000\002\002ab'; } >"$work/corpus/gen_end"
hdr '\005' '\000' >"$work/corpus/barrier"
{ hdr '\022' '\014'
  printf '\000\000\000\000\000\000\000\000\000\000\000\001'; } >"$work/corpus/vote_done"

if (cd "$work" && ./fuzz_wire -runs="$RUNS" -max_total_time=60 -max_len=4096 \
	corpus >fuzz.log 2>&1); then
	echo "ok 2 - fuzz_wire: $RUNS inputs without a finding"
else
	tail -n 40 "$work/fuzz.log" | sed 's/^/# /'
	echo "not ok 2 - fuzz_wire found a failing input"
	exit 1
fi

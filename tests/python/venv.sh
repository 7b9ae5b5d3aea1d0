#!/bin/bash
# The Python package installed by pip (worker/python/pyproject.toml) into a
# fresh virtual environment of a python3 that is not Debian's (the first on
# PATH; $DPT_VENV_PYTHON chooses another), with no package index: it finds
# the build tree's libdptrain through DPTRAIN_LIBRARY and through the
# dynamic loader, calls into it, says what to do when neither finds it, and
# `import dptrain.torch` without torch says what to install.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

py=${DPT_VENV_PYTHON:-$(command -v python3)} || skip_all "no python3 on PATH"
# The interpreter itself, not a wrapper (pyenv's shims are scripts).
py=$("$py" -c 'import sys; print(sys.executable)') || skip_all "$py does not run"
libdir=$top_builddir/worker/.libs
[ -f "$libdir/libdptrain.so.0" ] || skip_all "build libdptrain first ($libdir/libdptrain.so.0)"
dpt_scratch_dir tmp venv
venv=$tmp/venv
out=$("$py" -m venv "$venv" 2>&1) && [ -x "$venv/bin/pip" ] ||
	skip_all "$py -m venv with pip does not work here (Debian: python3-venv): ${out##*$'\n'}"
vpy=$venv/bin/python

plan 9

# No index: the build backend has no requirement, so an isolated build
# needs nothing from outside. The source tree stays untouched (it is
# read-only under make distcheck).
out=$(cd "$tmp" && PIP_NO_INDEX=1 PIP_FIND_LINKS= "$venv/bin/pip" install --no-deps \
	--no-cache-dir "$top_srcdir/worker/python" 2>&1)
ok $? "pip install worker/python into a fresh venv of $py, without an index" || diag "$out"

# Only the venv's own site-packages: the source tree must not shadow it.
run_py() { (cd "$tmp" && env -u PYTHONPATH "$@"); }

out=$(run_py DPTRAIN_LIBRARY="$libdir/libdptrain.so.0" "$vpy" -c '
import importlib.metadata, sys, dptrain
assert dptrain.__file__.startswith(sys.prefix), dptrain.__file__
print(dptrain.__version__, importlib.metadata.version("dptrain"))' 2>&1)
set -- $out
[ $# = 2 ] && [ "$1" = "$2" ]
ok $? "import dptrain from the venv with DPTRAIN_LIBRARY; the library's version is the package's ($out)" ||
	diag "$out" "a pyproject.toml version that differs from configure.ac's AC_INIT fails here"

# Known answers of doc/sampler.md: 64-bit arguments reach the C sampler.
out=$(run_py DPTRAIN_LIBRARY="$libdir/libdptrain.so.0" "$vpy" -c '
import dptrain
print(dptrain.permutation(0xdeadbeef, 0, 5), dptrain.permutation(2026, 5, 100000)[-4:])' 2>&1)
is "$out" "[2, 4, 0, 1, 3] [66641, 99414, 41367, 88180]" "permutation() calls the C sampler with 64-bit seeds"

# A checkpoint object of one process, on a directory with no step yet.
out=$(run_py DPTRAIN_LIBRARY="$libdir/libdptrain.so.0" "$vpy" -c '
import dptrain, sys
with dptrain.Checkpoint(uri="file://" + sys.argv[1], run="r") as ck:
    print(ck.inspect(), ck.stats()["saves"])
try:
    dptrain.Checkpoint(uri="nosuch://x")
except dptrain.DptrainError as e:
    print(e.name)' "$tmp/ckpt" 2>"$tmp/err")
is "$out" "None 0
DPT_EINVAL" "a one-process Checkpoint: inspect() of an empty run is None; a bad URI raises DptrainError" ||
	diag "$(cat "$tmp/err")"

out=$(run_py -u DPTRAIN_LIBRARY LD_LIBRARY_PATH="$libdir" "$vpy" -c '
import dptrain; print(dptrain.__version__, dptrain.permutation(0, 0, 10))' 2>&1)
[[ "$out" == *" [1, 4, 5, 0, 7, 6, 9, 8, 2, 3]" ]]
ok $? "without DPTRAIN_LIBRARY the dynamic loader finds libdptrain.so.0 on LD_LIBRARY_PATH" || diag "$out"

if ldconfig -p 2>/dev/null | grep -q 'libdptrain\.so\.0 '; then
	skip "without DPTRAIN_LIBRARY nor the library on the loader's path, import fails" \
		"libdptrain.so.0 is installed on this machine"
else
	out=$(run_py -u DPTRAIN_LIBRARY -u LD_LIBRARY_PATH "$vpy" -c 'import dptrain' 2>&1)
	[ $? != 0 ] && grep -q "^ImportError: dptrain: cannot load libdptrain.so.0 .*LD_LIBRARY_PATH.*set DPTRAIN_LIBRARY" <<<"$out"
	ok $? "with neither, import dptrain fails naming the loader's path and DPTRAIN_LIBRARY" || diag "$out"
fi

out=$(run_py DPTRAIN_LIBRARY="$tmp/nonexistent.so" "$vpy" -c 'import dptrain' 2>&1)
[ $? != 0 ] && grep -q "^ImportError: dptrain: cannot load $tmp/nonexistent.so .*unset DPTRAIN_LIBRARY" <<<"$out"
ok $? "a wrong DPTRAIN_LIBRARY is reported as such" || diag "$out"

if run_py "$vpy" -c 'import torch' >/dev/null 2>&1; then
	skip "import dptrain.torch without torch says what to install" "torch is importable in the venv"
else
	out=$(run_py DPTRAIN_LIBRARY="$libdir/libdptrain.so.0" "$vpy" -c 'import dptrain.torch' 2>&1)
	[ $? != 0 ] && grep -q "^ImportError: dptrain.torch needs PyTorch .*pip install torch" <<<"$out"
	ok $? "import dptrain.torch without torch: ImportError saying what to install" || diag "$out"
fi

out=$(cd "$tmp" && PIP_NO_INDEX=1 "$venv/bin/pip" uninstall -y dptrain 2>&1) &&
	! run_py DPTRAIN_LIBRARY="$libdir/libdptrain.so.0" "$vpy" -c 'import dptrain' 2>/dev/null
ok $? "pip uninstall dptrain removes it" || diag "$out"

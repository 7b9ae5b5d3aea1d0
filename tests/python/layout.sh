#!/bin/bash
# The Python binding's ctypes copies of the public structs against the C
# ones: every struct of include/dptrain/*.h, every field's name, order,
# offset and size, as the compiler lays them out (tests/python/layout)
# and as the binding declares them; and the library's refusal of a struct
# size it does not know (<dptrain/dptrain.h>, "the ABI").
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_python # any python3 does; the binding needs neither torch nor numpy
layout=$top_builddir/tests/python/layout
lib=$top_builddir/worker/.libs/libdptrain.so.0
[ -x "$layout" ] && [ -f "$lib" ] || skip_all "build the library and tests/python/layout first"
export PYTHONPATH=$top_srcdir/worker/python DPTRAIN_LIBRARY=$lib
check=$top_srcdir/tests/python/layout_check.py

plan 2

out=$("$layout" >"${tap_name}.out" 2>&1 && $py "$check" "${tap_name}.out" \
	"$top_srcdir"/include/dptrain/*.h 2>&1)
ok $? "the binding's structs match the headers and the compiler, field by field" || diag "$out"
rm -f "${tap_name}.out"

out=$($py "$check" --sizes 2>&1)
ok $? "the *_sized functions take the binding's sizes and refuse larger and truncated ones" || diag "$out"

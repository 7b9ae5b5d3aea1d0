#!/bin/bash
# `import dptrain` before `import torch` loads no second libnccl: where
# torch's NCCL (the nvidia-nccl wheel's site-packages/nvidia/nccl/lib) is
# importable, the binding loads it before libdptrain, so that both use
# that one. Counted in /proc/self/maps: with this Python's torch as it is,
# and with a stand-in libnccl.so.2 (a stub built here) where the wheel
# puts it, alone and after another NCCL was loaded.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_python torch
lib=$top_builddir/worker/.libs/libdptrain.so
[ -f "$lib" ] || skip_all "build libdptrain first ($lib)"
cc=${CC:-cc}
command -v "$cc" >/dev/null || skip_all "no C compiler ($cc) for the stand-in libnccl.so.2"
dir=$(dpt_state_dir nccl) || exit 1
dpt_scratch+=("$dir")
export DPTRAIN_LIBRARY=$lib
plan 3

# Prints how many libnccl files are mapped, and their paths, after
# loading ARGV[1] (if any), import dptrain, import torch.
maps='
import ctypes, sys
if sys.argv[1:]:
    ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
import dptrain
import torch
assert dptrain.permutation(1, 0, 3) and torch.zeros(1).sum() == 0
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "/libnccl" in l})
print(len(libs), " ".join(libs))
'
out=$(PYTHONPATH=$top_srcdir/worker/python $py -c "$maps" 2>&1)
[[ "$out" =~ ^[01]( [^ ]*)?$ ]]
ok $? "import dptrain, then torch: at most one libnccl mapped (${out%% *})" || diag "$out"
[ "${out%% *}" = 0 ] && diag "torch $($py -c 'import torch; print(torch.__version__)') loads no NCCL here, nor does this libdptrain: zero is all this check can see (the stand-in below shows the order)"

for d in site/nvidia/nccl/lib other; do
	mkdir -p "$dir/$d"
	echo 'int dpt_nccl_stand_in;' | "$cc" -shared -fPIC -Wl,-soname,libnccl.so.2 -x c - \
		-o "$dir/$d/libnccl.so.2" || bail_out "cannot build a stand-in libnccl.so.2 with $cc"
done
out=$(PYTHONPATH=$top_srcdir/worker/python:$dir/site $py -c "$maps" 2>&1)
is "$out" "1 $dir/site/nvidia/nccl/lib/libnccl.so.2" \
	"with an NCCL where torch's wheel puts it, import dptrain loads that one, and only it"
out=$(PYTHONPATH=$top_srcdir/worker/python:$dir/site $py -c "$maps" "$dir/other/libnccl.so.2" 2>&1)
is "$out" "1 $dir/other/libnccl.so.2" \
	"with an NCCL loaded already, import dptrain adds none (not the wheel's)"

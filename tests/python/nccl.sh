#!/bin/bash
# `import dptrain` before `import torch` loads no second libnccl and no
# second CUDA runtime: where torch's NCCL and CUDA runtime (the nvidia
# wheels' site-packages/nvidia/nccl/lib, nvidia/cu13/lib) are importable,
# the binding loads them before libdptrain, so that both use those.
# Counted in /proc/self/maps: with this Python's torch as it is, and with
# stand-ins where the wheels put them: a libnccl.so.2 (a stub built here),
# alone and after another NCCL was loaded, and a libcudart.so.13.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_python torch
require_binding
cc=${CC:-cc}
command -v "$cc" >/dev/null || skip_all "no C compiler ($cc) for the stand-in libraries"
dpt_scratch_dir dir nccl
plan 4

# Prints, for NAME in ARGV[1], how many such files are mapped and their
# paths, after loading ARGV[2] (if any), import dptrain, import torch.
maps='
import ctypes, sys
if sys.argv[2:]:
    ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_GLOBAL)
import dptrain
import torch
assert dptrain.permutation(1, 0, 3) and torch.zeros(1).sum() == 0
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if "/" + sys.argv[1] in l})
print(len(libs), " ".join(libs))
'
out=$(PYTHONPATH=$top_srcdir/worker/python $py -c "$maps" libnccl 2>&1)
[[ "$out" =~ ^[01]( [^ ]*)?$ ]]
ok $? "import dptrain, then torch: at most one libnccl mapped (${out%% *})" || diag "$out"
[ "${out%% *}" = 0 ] && diag "torch $($py -c 'import torch; print(torch.__version__)') loads no NCCL here, nor does this libdptrain: zero is all this check can see (the stand-ins below show the order)"

stand_in() { # SONAME DIR
	mkdir -p "$2"
	echo 'int dpt_stand_in;' | "$cc" -shared -fPIC -Wl,-soname,"$1" -x c - \
		-o "$2/$1" || bail_out "cannot build a stand-in $1 with $cc"
}
stand_in libnccl.so.2 "$dir/site/nvidia/nccl/lib"
stand_in libnccl.so.2 "$dir/other"
# The CUDA runtime: where libdptrain links one (a CUDA build), a copy of
# that one, which it can use; a stub otherwise.
mkdir -p "$dir/cuda/nvidia/cu13/lib"
cudart=$(ldd "$lib" | awk '$1 == "libcudart.so.13" { print $3 }')
if [ -n "$cudart" ]; then
	cp -L "$cudart" "$dir/cuda/nvidia/cu13/lib/libcudart.so.13"
else
	stand_in libcudart.so.13 "$dir/cuda/nvidia/cu13/lib"
fi
out=$(PYTHONPATH=$top_srcdir/worker/python:$dir/site $py -c "$maps" libnccl 2>&1)
is "$out" "1 $dir/site/nvidia/nccl/lib/libnccl.so.2" \
	"with an NCCL where torch's wheel puts it, import dptrain loads that one, and only it"
out=$(PYTHONPATH=$top_srcdir/worker/python:$dir/site $py -c "$maps" libnccl "$dir/other/libnccl.so.2" 2>&1)
is "$out" "1 $dir/other/libnccl.so.2" \
	"with an NCCL loaded already, import dptrain adds none (not the wheel's)"
out=$(PYTHONPATH=$top_srcdir/worker/python:$dir/cuda $py -c "$maps" libcudart 2>&1)
is "$out" "1 $dir/cuda/nvidia/cu13/lib/libcudart.so.13" \
	"with a CUDA runtime where torch's cu13 wheel puts it, import dptrain loads that one, and only it"

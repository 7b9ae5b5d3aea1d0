#!/bin/bash
# dptrain.torch (worker/python/dptrain/torch.py) with Debian's python3-torch
# (or DPT_PYTHON's torch: tests/python/torch2/)
# under srun --dp-train on the real test cluster: a state of every dtype,
# nested, saved by 4 ranks and loaded by 3; a model, Adam (whose state
# does not exist before its first step) and an LR scheduler restored
# exactly; bad calls raise clear exceptions; a checkpoint written by a C
# program loads in Python, and what Python saves loads in C; the elastic
# sampler is the C sampler, bit for bit; what torch 2 adds works or is
# refused clearly (tests/python/torch_features.py).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
require_python torch
require_binding
ckpt_worker=$top_builddir/tests/ckpt/ckpt_worker
[ -x "$ckpt_worker" ] || skip_all "build the test programs first ($ckpt_worker)"
worker=$top_srcdir/tests/python/torch_worker.py

plan 21

out=$($py "$worker" sampler 2>&1)
ok $? "ElasticSampler yields dpt_sampler_next's indices for 1 to 8 ranks over 3 epochs" || diag "$out"

out=$(PYTHONPATH=$top_srcdir/worker/python DPTRAIN_LIBRARY=$lib $py -c '
import builtins, sys
real = builtins.__import__
def no_torch(name, *a, **k):
    if name == "torch" or name.startswith("torch."):
        raise ImportError("No module named torch")
    return real(name, *a, **k)
builtins.__import__ = no_torch
import dptrain.torch' 2>&1)
[ $? != 0 ] && grep -q "ImportError: dptrain.torch needs PyTorch" <<<"$out"
ok $? "without torch, import dptrain.torch says it needs PyTorch" || diag "$out"

cluster_up NODES=2 CPUS=4 GPUS=0
dpt_scratch_dir ckdir torch
ckpt=file://$ckdir
run() { # NTASKS PROGRAM ARG...: srun -N 2 with --dp-train, output in $out
	local n=$1
	shift
	out=$(DPT_TIMEOUT=180 srun_t -N 2 -n "$n" --dp-train=torch-test --dp-ckpt="$ckpt" "$@" 2>&1)
}
ranks_ok() { # WORLD MODE: every rank printed "rank=R world=WORLD MODE ok"
	local want="" r
	for r in $(seq 0 $(($1 - 1))); do want+="rank=$r world=$1 $2 ok|"; done
	is "$(grep -o "^rank=[0-9]* world=$1 $2 ok" <<<"$out" | sort | tr '\n' '|')" "$want" \
		"$3" || diag "$out"
}

run 4 $py "$worker" dtypes save "$ckpt" dtypes
ok $? "4 ranks save a nested state of every dtype, plain values with it" || diag "$out"
saved_random=$(grep -o '^rank=0 next_random=[0-9.e-]*' <<<"$out" | cut -d= -f3)
run 3 $py "$worker" dtypes load "$ckpt" dtypes
ranks_ok 3 dtypes "3 ranks load it: every tensor, dtype and value equal, missing entries created"
is "$(grep -o '^rank=[0-9]* next_random=[0-9.e-]*' <<<"$out" | cut -d= -f3 | sort -u | tr '\n' ' ')" \
	"$saved_random " "Python's random state restored on every rank from rank 0's"

run 4 $py "$worker" adam save "$ckpt" adam
ok $? "4 ranks save a model, Adam and an LR scheduler after 3 steps" || diag "$out"
run 2 $py "$worker" adam load "$ckpt" adam
ranks_ok 2 adam "2 ranks load them into a fresh optimizer without state: equal, saving the loaded step again is a no-op, and 2 more steps bitwise equal"

if $py -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
	run 1 $py "$worker" cuda "$ckpt" cuda
	ranks_ok 1 cuda "CUDA tensors: a model and Adam on the GPU saved and loaded through the device path"
else
	skip "CUDA tensors through the device path" "torch $($py -c 'import torch; print(torch.__version__)') sees no GPU here (tests/gpu runs this where one is)"
fi

run 2 $py "$worker" bad "$ckpt" bad
ranks_ok 2 bad "bad calls raise exceptions that name the cause; the object works after them"
is "$(grep -c 'trying the previous committed step' <<<"$out")" 0 \
	"a mismatch is not retried on older steps" || diag "$out"
grep -q "^bad load into another model: dptrain: step 1 of '$ckpt/bad' does not match the state (3 differences" <<<"$out"
ok $? "the mismatch names the step, the run and the count of differences" || diag "$out"

# C -> Python -> C: ckpt_worker saves every dtype it has, replicated and
# sharded; 3 Python ranks load it (resharded) and save it again from torch
# tensors; 2 C ranks load that and check every byte.
run 4 "$ckpt_worker" save "$ckpt/cworld" 5
ok $? "a C program on 4 ranks saves step 5" || diag "$out"
run 3 $py "$worker" c2py "$ckpt/cworld" "$ckpt/pyworld"
ranks_ok 3 c2py "3 Python ranks load it into torch tensors and save them under '$ckpt/pyworld'"
run 2 "$ckpt_worker" --foreign load "$ckpt/pyworld"
is "$(grep -c '^loaded step=5 written_by=3 .* ok' <<<"$out")" 2 \
	"2 C ranks load what Python saved: every byte as the C program wrote it" || diag "$out"
# Torch before 2.3 has no unsigned 16, 32 and 64-bit tensors: those the C
# program wrote are left out by Python, and only those.
want=$($py -c 'import torch; print(" ".join(n for n, d in (("x.u16", "uint16"), ("x.u32", "uint32"), ("x.u64", "uint64")) if not hasattr(torch, d)))')
is "$(grep -o '^skipped [a-z0-9.]*' <<<"$out" | sort -u | cut -d' ' -f2 | tr '\n' ' ' | sed 's/ $//')" "$want" \
	"the C side checked every tensor but those torch $($py -c 'import torch; print(torch.__version__)') lacks${want:+: $want}" || diag "$out"

# What torch 2 adds, on 2 ranks: each works, or is refused with a
# TypeError naming the tensor; SKIP with the reason where this torch lacks
# the feature.
run 2 $py "$top_srcdir/tests/python/torch_features.py" "$ckpt" features
features=$out
declare -A what=(
	[uint]="uint16/32/64 saved and loaded exactly, uint64 above 2**63 too"
	[float8]="float8 and float4 tensors saved as bytes and loaded bit for bit, with their dtype"
	[sched]="OneCycleLR and CyclicLR with momentum restored: the same lr and momentum 9 steps on"
	[compile]="a torch.compile'd model saves plain names; it and a plain one load each other's steps"
	[device]="a meta tensor and a DTensor: TypeError naming the tensor, in dptrain.torch and the binding; a dtype of a skeleton must be a torch.dtype"
	[rng]="another torch's CPU and CUDA RNG states in a checkpoint: a warning each, the load goes on")
for f in uint float8 sched compile device rng; do
	why=$(grep -m1 "^rank=0 $f skip: " <<<"$features" | sed "s/^rank=0 $f skip: //")
	if [ -n "$why" ]; then
		skip "${what[$f]}" "$why"
	else
		out=$features ranks_ok 2 "$f" "${what[$f]}"
	fi
done

#!/bin/bash
# dptrain.lightning's callback in a real Lightning Trainer under
# srun --dp-train: a fit to step 10, then a second run of the same job that
# resumes there and trains to step 20. Lightning is not in Debian: this
# runs where it is importable (the GPU machine's bundle, tests/gpu) and
# says SKIP elsewhere.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
py=${DPT_PYTHON:-/usr/bin/python3}
$py -c 'import torch' 2>/dev/null || skip_all "$py has no torch"
$py -c 'import lightning' 2>/dev/null || $py -c 'import pytorch_lightning' 2>/dev/null ||
	skip_all "Lightning is not importable by $py (not packaged in Debian 12)"
lib=$top_builddir/worker/.libs/libdptrain.so
[ -f "$lib" ] || skip_all "build libdptrain first ($lib)"
export PYTHONPATH=$top_srcdir/worker/python DPTRAIN_LIBRARY=$lib
cluster_up NODES=1 CPUS=2 GPUS=0
ckdir=$(dpt_state_dir lightning) || exit 1
dpt_scratch+=("$ckdir")
plan 3

fit() { out=$(DPT_TIMEOUT=300 srun_t -n 1 --dp-train=fit --dp-ckpt="file://$ckdir" \
	$py "$top_srcdir/tests/python/lightning_fit.py" "$1" 2>&1); }
fit 10
ok $? "a Trainer with DptrainCallback fits to step 10" || diag "$out"
fit 20
ok $? "a second run fits on to step 20" || diag "$out"
grep -q '^start=10 end=20 stopped=False ' <<<"$out"
ok $? "it resumed at step 10 from the callback's checkpoint" || diag "$out"

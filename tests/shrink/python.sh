#!/bin/bash
# Live shrink in PyTorch (doc/shrink.md), on the real test cluster with
# Debian's python3-torch and Fashion-MNIST: contrib/examples/fmnist_shrink.py
# trains on 4 ranks of 2 nodes; rank 1 is killed with SIGKILL after step
# 30. The 3 survivors catch DptrainError (restartable), rejoin, take rank
# 0's state and go on from memory to the last step. The run is compared
# with an uninterrupted one of 3 ranks (float32: relative tolerance 1e-5
# for the order of the additions); its last checkpoint, written by 3 ranks,
# loads on 2 with the same parameters, bit for bit.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"
. "$top_srcdir/tests/shrink/lib.sh"

[ "${DPT_SANITIZED:-0}" = 1 ] && skip_all "python3 is not built with the sanitizers"
require_python_module /usr/bin/python3 torch
require_fmnist
require_binding
shrink_setup python
plan 9
steps=100

live_start fmnist --dp-ckpt-every=10steps -- $py "$fmnist" --steps $steps --step-ms 30
kill_task_after fmnist 30 1 "^$py $fmnist "

# 1-2. What the job says.
survivors_finished 3 $steps
from_memory

# 3-6. The same run as an uninterrupted one of 3 ranks.
reference_against 1e-5 -N 2 -n 3 -- $py "$fmnist" --steps $steps

# 7-9. The checkpoints.
is "$(newest_world fmnist)" 3 "step $steps was written by 3 ranks"
verifies fmnist
want=$(final_params "$out" | sed 's/.* sha256=//')
DPT_TIMEOUT=120 srun_t -N 1 -n 2 --dp-train=fmnist --dp-ckpt="file://$work/ckpt" \
	$py "$fmnist" --steps $steps >"$work/load.out" 2>"$work/load.err"
is "$(grep -c "^resumed step=$steps " "$work/load.out")/$(final_params "$work/load.out" | sed 's/.* sha256=//')" \
	"2/$want" "step $steps loads on 2 ranks with the same parameters (sha256), bit for bit" ||
	diag "$(cat "$work/load.out" "$work/load.err")"

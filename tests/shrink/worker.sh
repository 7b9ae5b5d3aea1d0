#!/bin/bash
# Live shrink of a dead rank (doc/shrink.md), on the real test cluster: the
# C example (contrib/examples/shrink.c) trains on 4 ranks of 2 nodes and
# saves at every step, so that a save is always in flight; rank 0, the
# rank that writes the manifests, is killed with SIGKILL mid-training. The
# 3 survivors go on from memory to the last step, without a requeue; the
# run is compared with an uninterrupted one of 3 ranks; the steps saved
# after the shrink are written by 3 ranks, verify, and load exactly on 1
# and on 4 ranks.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"
. "$top_srcdir/tests/shrink/lib.sh"

shrink_setup worker
plan 12
steps=200

live_start live --dp-ckpt-every=1steps -- "$shrink" --steps $steps --step-ms 40
kill_task_after live 40 0 'examples/\.libs/(lt-)?shrink '

# 1-3. What the job and the coordinator say.
survivors_finished 3 $steps
# The survivors' report of the broken collective may come first.
grep -q "evicting \(rank 0\|worker\) (task 0, .*: \(its task exited (signal 9)\|its connection closed\)" "$err" &&
	grep -q "generation 1 ended: " "$err"
ok $? "the coordinator evicted task 0 and ended generation 1" || diag "$(grep -v committed "$err")"
from_memory

# 4-7. The same run as an uninterrupted one of 3 ranks.
reference_against 1e-9 -N 2 -n 3 -- "$shrink" --steps $steps

# 8-10. The checkpoints: the save in flight at the failure was not
# committed by anyone; those after it are of 3 ranks; all verify.
adopted=$(sed -n 's/^adopted step=\([0-9]*\) gen=2 rank=0 .*/\1/p' "$out")
first=$(grep -o "committed step [0-9]* of 3 ranks" "$err" | head -n 1 | cut -d' ' -f3)
! grep -q "committed step $((adopted + 1)) of 4 ranks\|committed step $((adopted + 2)) of 4 ranks" "$err" &&
	[ -n "$first" ] && [ "$first" -le $((adopted + 1)) ]
ok $? "no step past the adopted $adopted was committed by 4 ranks; the first by 3 is $first" ||
	diag "$(grep -v retention "$err" | grep -C 5 "step $adopted ")"
is "$(newest_world live)" 3 "step $steps was written by 3 ranks"
verifies live

# 11-12. It loads anywhere, exactly.
want=$(final_params "$out")
for n in 1 4; do
	DPT_TIMEOUT=60 srun_t -N $((n > 2 ? 2 : 1)) -n $n --dp-train=live --dp-ckpt="file://$work/ckpt" \
		"$shrink" --steps $steps >"$work/load$n.out" 2>"$work/load$n.err"
	is "$(grep -c "^resumed step=$steps " "$work/load$n.out")/$(final_params "$work/load$n.out")" \
		"$n/$want" "step $steps loads on $n rank(s) with the same parameters, bit for bit" ||
		diag "$(cat "$work/load$n.out" "$work/load$n.err")"
done

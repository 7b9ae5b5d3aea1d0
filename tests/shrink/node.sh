#!/bin/bash
# Live shrink of a dead node (doc/shrink.md), on the real test cluster in
# network namespaces (a node is a namespace with its own address): the C
# example trains on 4 ranks, 2 on each node, with srun --no-kill; every
# process of node n2 (its slurmd, the step's slurmstepd, its 2 ranks) is
# killed with SIGKILL mid-training, as when a node loses power. The 2
# ranks of n1 go on from memory to the last step; slurmctld declares n2
# DOWN after SlurmdTimeout (10 s here), srun is told and ends. The run is
# compared with an uninterrupted one of 2 ranks; the steps saved after the
# shrink are written by 2 ranks, verify and load exactly on 1 rank.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"
. "$top_srcdir/tests/shrink/lib.sh"

require_prog ip
shrink_setup node MODE=netns SLURMD_TIMEOUT=10
plan 11
steps=300

live_start live --no-kill --dp-ckpt-every=10steps -- "$shrink" --steps $steps --step-ms 40
wait_for 90 saved live 40
ns=${DPTRAIN_CLUSTER_NETNS_PREFIX}n2
victims=$(ip netns pids "$ns")
kill -9 $victims
killed_at=$SECONDS
live_wait
rc=$?
out=$work/live.out err=$work/live.err

# 1-4. What the job, Slurm and the coordinator say.
grep -q "Node failure on n2" "$err" && [ $((SECONDS - killed_at)) -lt 120 ]
ok $? "srun learned of n2's failure and ended $((SECONDS - killed_at)) s after it (status $rc)" ||
	diag "$(grep -v 'committed\|retention' "$err")"
is "$(finals "$out" 2 2)" 2 "the 2 ranks of n1 finished step $steps in generation 2 of 2 ranks" ||
	diag "$(grep -v '^trained' "$out")" "$(grep -v 'committed\|retention' "$err")"
[ "$(grep -c "evicting .*(task [23], n2 .*: its connection closed" "$err")" = 2 ] &&
	grep -q "generation 1 ended: " "$err"
ok $? "the coordinator evicted n2's 2 ranks when their connections closed" ||
	diag "$(grep -v 'committed\|retention' "$err")"
from_memory

# 5-8. The same run as an uninterrupted one of 2 ranks (on n1: n2 is down).
reference_against 1e-9 -w n1 -N 1 -n 2 -- "$shrink" --steps $steps

# 9-11. The checkpoints.
is "$(newest_world live)" 2 "step $steps was written by 2 ranks"
verifies live
want=$(final_params "$out")
DPT_TIMEOUT=60 srun_t -w n1 -N 1 -n 1 --dp-train=live --dp-ckpt="file://$work/ckpt" \
	"$shrink" --steps $steps >"$work/load.out" 2>"$work/load.err"
is "$(grep -c "^resumed step=$steps " "$work/load.out")/$(final_params "$work/load.out")" \
	"1/$want" "step $steps loads on 1 rank with the same parameters, bit for bit" ||
	diag "$(cat "$work/load.out" "$work/load.err")"

#!/bin/bash
# The Python binding (worker/python/dptrain/) with Debian's python3-torch
# (or DPT_PYTHON's torch: tests/python/torch2/)
# on the real test cluster: collectives of torch tensors and numpy arrays
# under srun -N 2 -n 4 --dp-train, a checkpoint saved by 4 ranks and
# loaded resharded by 3, a run without a checkpoint, and a clear error when
# the library cannot be found.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
require_python torch numpy
require_binding
worker=$top_srcdir/tests/python/worker.py
dptrain_cli=$top_builddir/dptrain

plan 11

# Without the cluster: a missing library says what to do.
out=$(DPTRAIN_LIBRARY=/nonexistent/libdptrain.so $py -c 'import dptrain' 2>&1)
[ $? != 0 ] && grep -q "ImportError: dptrain: cannot load /nonexistent/libdptrain.so .*set DPTRAIN_LIBRARY" <<<"$out"
ok $? "import without the library fails and names DPTRAIN_LIBRARY" || diag "$out"

cluster_up NODES=2 CPUS=4 GPUS=0
dpt_scratch_dir ckdir pyckpt
ckpt=file://$ckdir
run() { # NTASKS RUN ARG...: srun of worker.py, output in $out
	local n=$1 name=$2
	shift 2
	out=$(DPT_TIMEOUT=180 srun_t -N 2 -n "$n" --dp-train="$name" --dp-ckpt="$ckpt" \
		--dp-backend=cpu ${srun_args:-} $py "$worker" "$@" 2>&1)
}

run 4 coll collectives
ok $? "srun -N 2 -n 4 --dp-train python3 worker.py collectives exits 0" || diag "$out"
is "$(grep -o '^rank=[0-9]* world=4 collectives ok' <<<"$out" | sort | tr '\n' '|')" \
	"rank=0 world=4 collectives ok|rank=1 world=4 collectives ok|rank=2 world=4 collectives ok|rank=3 world=4 collectives ok|" \
	"allreduce/broadcast/allgather exact on 4 ranks for every dtype; bad arguments raise" || diag "$out"

run 4 model save 7
ok $? "4 ranks save step 7 of run 'model'" || diag "$out"
vout=$("$dptrain_cli" ckpt verify "$ckpt/model" 2>&1)
ok $? "dptrain ckpt verify passes on the saved step" || diag "$vout"

run 3 model load
ok $? "3 ranks load the newest step of run 'model'" || diag "$out"
is "$(grep -c '^rank=[0-2] world=3 loaded step=7 written_by=4 .* ok' <<<"$out")" 3 \
	"every tensor byte-exact after resharding 4 -> 3; rng, user blob and sample cursor restored" || diag "$out"
# Each rank needs all of params and its third of m and v; it reads its
# byte ranges rounded out to the 1 MiB checksum blocks, never more than
# the chunks it needs hold.
needed=0
for n in $(grep -o 'needed=[0-9]*' <<<"$out" | cut -d= -f2); do needed=$((needed + n)); done
is "$needed" $((3 * 4000 + 100003 * 10)) "the 3 ranks needed the replicated tensor each and one share of the sharded ones" || diag "$out"

run 2 empty fresh
is "$?:$(grep -c '^rank=[01] world=2 fresh ok' <<<"$out")" "0:2" \
	"load() of a run with no committed step returns None on every rank" || diag "$out"

# A job of one minute with a grace of 55 s: should_stop() turns True about
# 5 s in, on every rank after the same number of questions.
srun_args="--time=1 --dp-grace=55s" run 4 wall stop
asked=$(grep -o '^rank=[0-3] world=4 stop asked=[0-9]* ok' <<<"$out" | grep -o 'asked=[0-9]*' | sort | uniq -c)
[[ "$asked" =~ ^\ *4\ asked=[0-9]+$ ]]
ok $? "should_stop() turns True near the end, on all 4 ranks at once ($asked)" || diag "$out"
step=${asked##*=}
"$dptrain_cli" ckpt ls "$ckpt/wall" 2>&1 | grep -q "^\. *$step *committed"
ok $? "Checkpoint.step($step) at the stop saved and committed it" || diag "$("$dptrain_cli" ckpt ls "$ckpt/wall" 2>&1)"

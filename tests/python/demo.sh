#!/bin/bash
# The README's demo, contrib/demo/elastic.sh, on the real test cluster and
# shorter (the steps after run 2's stop: 40): one batch job of --nodes=1-2
# trains Fashion-MNIST with PyTorch Lightning through dptrain.lightning on 4 ranks,
# is stopped before its walltime and requeued, runs on 2 ranks while the
# demo drains a node, then on 4 again, and finishes. Checked here: the world
# sizes and restarts the demo reports and the job's own output shows, that
# every run resumed the step the previous one committed, that no global
# step was trained twice or skipped (the demo's report.py checks each
# step's samples too, and fails the demo otherwise), that the model
# learned, and that the plot is a PNG.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_root
torch2_lightning
require_fmnist
command -v gnuplot >/dev/null || skip_all "gnuplot is not installed (apt-get install gnuplot-nox)"
[ -f "$top_builddir/worker/.libs/libdptrain.so" ] || skip_all "build libdptrain first"

cluster_up NODES=2 CPUS=4 GPUS=0
dpt_scratch_dir dir demo
plan 8

# The demo finds the package, and the library in $top_builddir.
out=$(top_builddir=$top_builddir DPT_TIMEOUT=600 timed bash "$top_srcdir/contrib/demo/elastic.sh" --dir "$dir/run" --last-steps 40 2>&1)
rc=$?
last=$(tail -n 1 <<<"$out")
# Three runs where the machine is quick enough; on a loaded one run 3 may
# spend its 40 s starting Python and be stopped and requeued again
# before its 40 steps, which is the service doing its job: a fourth run
# on 4 ranks, and so on.
[ $rc = 0 ] && [[ $last =~ ^dptrain\ demo:\ restarts=([0-9]+)\ world_sizes=4,2,4(,4)*\ final_step=([0-9]+)\ test_accuracy=(0\.[0-9]+)\ plot=$dir/run/demo.png$ ]]
ok $? "the demo ends: world sizes 4, 2, 4 ($last)" || diag "exit $rc" "$out"
restarts=${BASH_REMATCH[1]:-0} final=${BASH_REMATCH[3]:-0} accuracy=${BASH_REMATCH[4]:-0}
job=$dir/run/job.out
runs=$(grep -o '^fmnist: \(starting\|resumed\) at step [0-9]* on [0-9]* ranks (restart [0-9])' "$job" | sed 's/ at step [0-9]*//' | tr '\n' ';')
want="fmnist: starting on 4 ranks (restart 0);fmnist: resumed on 2 ranks (restart 1);"
for ((r = 2; r <= restarts; r++)); do
	want+="fmnist: resumed on 4 ranks (restart $r);"
done
[ "$restarts" -ge 2 ] && [ "$runs" = "$want" ]
ok $? "the job's output: 4 ranks, 2 while a node was drained, then 4 ($((restarts + 1)) runs)" ||
	diag "$runs" "$(cat "$job")"
stops=$(grep -o '^fmnist: stopped at step [0-9]*' "$job" | grep -o '[0-9]*$' | tr '\n' ' ')
resumes=$(grep -o '^fmnist: resumed at step [0-9]*' "$job" | grep -o '[0-9]*$' | tr '\n' ' ')
is "$resumes" "${stops:-none}" "each run resumed the step the previous one committed at its stop ($stops)" ||
	diag "$(cat "$job")"
[ "$(grep -c "requeueing job [0-9]* after step [0-9]* (committed) onto 1-2 nodes" "$job")" = "$restarts" ]
ok $? "dptrain said each of the $restarts requeues, with the node range" || diag "$(cat "$job")"
stop2=$(cut -d' ' -f2 <<<"$stops")
[ -n "$stop2" ] && [ "$final" = $((stop2 + 40)) ] && grep -q "^fmnist: done at step $final " "$job"
ok $? "the last run trained to step $final, 40 steps after run 2's stop" || diag "$(cat "$job")"
# The report's checks, again here on the trace: each step once, by one
# whole world.
res=$($py - "$dir/run/trace.jsonl" "$final" <<'PY'
import json, sys
seen = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    seen.setdefault(r["step"], set()).add((r["world"], r["restart"], r["rank"]))
final = int(sys.argv[2])
bad = [s for s in range(1, final + 1) if s not in seen
       or len({(w, k) for w, k, _ in seen[s]}) != 1
       or sorted(r for _, _, r in seen[s]) != list(range(next(iter(seen[s]))[0]))]
print("%d steps, %d bad %s" % (len(seen), len(bad), bad[:5]))
sys.exit(1 if bad or max(seen) != final else 0)
PY
)
ok $? "the trace: steps 1 to $final, each trained once by every rank of one world ($res)"
awk -v a="$accuracy" 'BEGIN { exit !(a > 0.75) }'
ok $? "the model learned: test accuracy $accuracy" || diag "$out"
[ "$(head -c 8 "$dir/run/demo.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
	[ "$(stat -c %s "$dir/run/demo.png")" -gt 10000 ]
ok $? "the plot is a PNG ($(stat -c %s "$dir/run/demo.png" 2>/dev/null) bytes)"

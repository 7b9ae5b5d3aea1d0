#!/bin/bash
# dptrain.torch's Checkpoint.log, total_steps and global_batch reach the
# run's events (doc/python.md, "Logging and progress"), without a
# cluster: a coordinator and two Python ranks started here. Rank 0's
# values become one log line per step (a tensor, a float, a NaN as null),
# rank 1's are dropped, a bad name raises on every rank, the total is one
# line, the global batch that load() declares from an ElasticSampler one
# line, and dptrain status reads them back.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

require_python torch
lib=$top_builddir/worker/.libs/libdptrain.so
coord=$top_builddir/coordinator/dptrain-coordinator
[ -f "$lib" ] && [ -x "$coord" ] || skip_all "build libdptrain and the coordinator first"
export PYTHONPATH=$top_srcdir/worker/python DPTRAIN_LIBRARY=$lib
dpt_scratch_dir dir pylog
unset DPTRAIN_LOG_LEVEL SLURM_RESTART_COUNT SLURM_JOB_ID
plan 6

DPTRAIN_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
export DPTRAIN_SECRET
"$coord" --world-size 2 --bind 'tcp://127.0.0.1:*' --endpoint-file "$dir/endpoint" \
	>"$dir/coord.out" 2>"$dir/coord.log" &
coord_pid=$!
endpoint_written() { [ -s "$dir/endpoint" ] || ! kill -0 "$coord_pid" 2>/dev/null; }
wait_for 30 endpoint_written
[ -s "$dir/endpoint" ] || bail_out "the coordinator did not start: $(cat "$dir/coord.log")"
export DPTRAIN_COORDINATOR=$(cat "$dir/endpoint")
export DPTRAIN_CKPT_URI=file://$dir/ckpt DPTRAIN_RUN=pylog
mkdir -p "$dir/ckpt"

pids=()
for r in 0 1; do
	timeout 120 $py "$top_srcdir/tests/python/log.py" 50 >"$dir/w$r.out" 2>"$dir/w$r.err" &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
timeout 30 tail --pid="$coord_pid" -f /dev/null
kill "$coord_pid" 2>/dev/null
ok $rc "both ranks ran 50 steps of log() and saved" || diag "$(cat "$dir"/w*.out "$dir"/w*.err)"
is "$(grep -h '^bad name' "$dir"/w*.out | sort | uniq -c | sed 's/^ *//')" "2 bad name: DPT_EINVAL" \
	"a bad name raises DPT_EINVAL on both ranks"

events=$dir/ckpt/pylog/events.jsonl
check='
import json, math, sys
logs, totals, batches = [], [], []
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["event"] == "log":
        logs.append(d)
    elif d["event"] == "total_steps":
        totals.append(d["total_steps"])
    elif d["event"] == "global_batch":
        batches.append(d["global_batch"])
ok = [d["step"] for d in logs] == list(range(1, 51))
ok = ok and all(abs(d["scalars"]["loss"] - 1.0 / d["step"]) < 1e-6 and
                d["scalars"]["samples_per_s"] == 100.0 * d["step"] and
                d["scalars"]["lr"] is None for d in logs)
print(ok, totals, batches)
'
out=$($py -c "$check" "$events" 2>&1)
is "$out" "True [50] [48]" "one log line per step, rank 0 values (tensor, float, NaN as null); one total_steps line, one global_batch line" ||
	diag "$(head -c 2000 "$events" 2>&1)"
grep -q '"loss":-1' "$events"
is $? 1 "rank 1's values are not in the events"

js=$("$top_builddir/dptrain" status --json "file://$dir/ckpt/pylog" 2>&1)
$py -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["step"]==50 and d["total_steps"]==50 and d["progress"]==1 and d["samples_per_s"]==5000, d' "$js"
ok $? "dptrain status --json reads step 50 of 50 and samples/s 5000" || diag "$js"
out=$("$top_builddir/dptrain" status "file://$dir/ckpt/pylog" 2>&1)
grep -q "step       50 of 50 (100%)" <<<"$out"
ok $? "as text (not a terminal): step 50 of 50 (100%)" || diag "$out"

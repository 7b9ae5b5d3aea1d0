#!/bin/bash
# Logged values on the real test cluster (doc/checkpoint-format.md,
# "Events"; dptrain(1), "dptrain plot"): a job whose ranks all call
# dpt_log every step and declare 100 steps; `dptrain status --json` of the
# running job shows its step, total and progress; a second job resumes the
# run on 2 ranks instead of 4; the events then hold one log line per step,
# rank 0's; `dptrain plot` draws a PNG with both runs marked, and says
# what is wrong when a scalar was never logged or gnuplot is missing.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/spank/lib.sh"

require_prog python3 gnuplot
walltime_setup plot
plan 10
dptrain=$top_builddir/dptrain
export DPTRAIN_STATUS_DIR=$work/status
uri=file://$work/ckpt/curve

# submit NAME NODES TASKS LOOP_OPTIONS: the job's id.
submit() {
	cat >"$work/$1.sh" <<EOF
#!/bin/bash
#SBATCH -N $2 -n $3 --ntasks-per-node=2 --time=30 -o $work/$1.out -J $1
srun --dp-train=curve --dp-ckpt=file://$work/ckpt $train $4
echo "srun exit \$?"
EOF
	sbatch_t --parsable "$work/$1.sh" | cut -d';' -f1
}
field() { # JSON KEY
	python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get(sys.argv[2]))' "$1" "$2" 2>/dev/null
}

# 1. The first run, 4 ranks, 60 steps of 100 ms: asked while it runs.
id=$(submit first 2 4 "--steps 60 --step-ms 100 --every 20 --log 1 --total 100")
js=
for ((i = 0; i < 90; i++)); do
	js=$("$dptrain" status --json "$id" 2>/dev/null)
	s=$(field "$js" step)
	[ "$(field "$js" source)" = coordinator ] && [ "$(field "$js" total_steps)" = 100 ] &&
		[[ "$s" =~ ^[0-9]+$ ]] && [ "$s" -gt 0 ] && [ "$(field "$js" samples_per_s)" != None ] && break
	sleep 1
done
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["source"]=="coordinator" and d["total_steps"]==100 and 0<d["step"]<=60 and abs(d["progress"]-d["step"]/100)<1e-9 and d["samples_per_s"]>0, d' "$js"
ok $? "status --json of the running job: step, total_steps 100, progress, samples_per_s" || diag "$js"
wait_job "$id" 120

# 2. The second run, 2 ranks, resumes at step 60 and ends at 100.
id=$(submit second 1 2 "--steps 100 --step-ms 20 --every 20 --log 1 --total 100")
wait_job "$id" 120
grep -q "resumed step=60 rank=0 world=2" "$work/second.out"
ok $? "the second job resumed step 60 on 2 ranks" || diag "$(cat "$work/second.out")"

# 3-4. One log line per step 1..100 (rank 0's only), and the total.
check_events='
import json, sys
steps, totals = [], []
for line in open(sys.argv[1]):
    d = json.loads(line)
    if d["event"] == "log":
        s = d["scalars"]
        assert set(s) == {"loss", "samples_per_s"}, d
        assert abs(s["loss"] - 1.0 / d["step"]) < 1e-6 and s["samples_per_s"] > 0, d
        steps.append(d["step"])
    elif d["event"] == "total_steps":
        totals.append(d["total_steps"])
print(steps == list(range(1, 101)), totals)
'
out=$(python3 -c "$check_events" "$work/ckpt/curve/events.jsonl" 2>&1)
is "$out" "True [100, 100]" "one log line for each step 1..100, with its loss; a total_steps line per run"
js=$(timed "$dptrain" status --json "$uri" 2>&1)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["source"]=="events" and d["step"]==100 and d["total_steps"]==100 and d["progress"]==1 and d["samples_per_s"]>0, d' "$js"
ok $? "status --json of the run: step 100 of 100, progress 1" || diag "$js"

# 5-7. The plot: a PNG, its path printed, both runs marked. A gnuplot
# wrapper keeps the script that dptrain wrote.
printf '#!/bin/sh\ncp "$1" "%s/plot.gp"\nexec gnuplot "$1"\n' "$work" >"$work/gnuplot"
chmod 755 "$work/gnuplot"
out=$(cd "$work" && DPTRAIN_GNUPLOT=$work/gnuplot timed "$dptrain" plot "$uri" 2>&1)
ok $? "dptrain plot of the run succeeds" || diag "$out"
is "$out" "$work/curve.png" "it prints the PNG's path (RUN.png in the current directory)"
magic=$(od -An -tx1 -N4 "$work/curve.png" 2>/dev/null | tr -d ' ')
[ "$magic" = 89504e47 ] && grep -q "run 1: 4 ranks' at 0," "$work/plot.gp" &&
	grep -q "run 1: 2 ranks' at 60," "$work/plot.gp"
ok $? "a PNG (magic $magic), marked 'run 1: 4 ranks' at 0 and 'run 1: 2 ranks' at 60" ||
	diag "$(grep label "$work/plot.gp" 2>&1)"

# 8-10. What is wrong, said.
out=$(timed "$dptrain" plot "$uri" -o "$work/x.png" --y accuracy 2>&1)
[ $? = 1 ] && grep -q "logged no 'accuracy' (it logged: loss, samples_per_s)" <<<"$out"
ok $? "a scalar never logged: exit 1, names those logged" || diag "$out"
out=$(DPTRAIN_GNUPLOT=$work/no-gnuplot timed "$dptrain" plot "$uri" -o "$work/x.png" 2>&1)
[ $? = 1 ] && grep -q "apt-get install gnuplot-nox" <<<"$out"
ok $? "no gnuplot: exit 1, says what to install" || diag "$out"
out=$(timed "$dptrain" plot "file://$work/ckpt/none" -o "$work/x.png" 2>&1)
[ $? = 1 ] && grep -q "no events" <<<"$out"
ok $? "a run without events: exit 1, says so" || diag "$out"

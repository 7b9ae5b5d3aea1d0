"""Where the time between a walltime stop and the resumed run's first
trained step goes, from the files of one run of contrib/demo/elastic.sh:
its job output (the batch script's "job start EPOCH restart=R" lines), the
run's events (doc/checkpoint-format.md) and the training trace (the wall
time of every step).

    restart_split.py DEMO_DIR [RUN]

RUN: the run's name (default fmnist-demo, the demo's), whose events are
DEMO_DIR/ckpt/RUN/events.jsonl. Without a trace (bench/shapes' runs of
tests/ckpt/train_loop), the first step is the run's first `log` or
`commit` event after its resume, which the coordinator writes up to 2 s
late (doc/checkpoint-format.md, "Events").

For each requeue, seconds from the coordinator's stop to:
  wind-down    the requeue (the stop's save and commit, the tasks' exit)
  slurm        the job's start again (requeue delay, scheduling, launch)
  srun         the coordinator's start (srun, the SPANK plugin)
  program      the last rank's join (Python imports torch, gloo's own
               rendezvous, the data and the model: the program's)
  rendezvous   the generation (dptrain's)
  load         rank 0's resume: the checkpoint loaded (dptrain's)
  first step   the first step trained (the program's)
dptrain's part is wind-down + srun + rendezvous + load; Slurm's is slurm;
the program's the rest. Prints a table, then "restart dptrain_s=D
slurm_s=S program_s=P total_s=T dptrain_share=X" (medians over the
requeues).
"""
import json
import os
import re
import statistics
import sys

PARTS = ["wind-down", "slurm", "srun", "program", "rendezvous", "load", "first step"]
DPTRAIN = ["wind-down", "srun", "rendezvous", "load"]
PROGRAM = ["program", "first step"]


def main():
    d = sys.argv[1]
    run = sys.argv[2] if len(sys.argv) > 2 else "fmnist-demo"
    out = open(os.path.join(d, "job.out")).read()
    starts = {int(r): float(t) for t, r in re.findall(r"^job start ([0-9.]+) restart=(\d+)", out, re.M)}
    events = [json.loads(l) for l in open(os.path.join(d, "ckpt", run, "events.jsonl"))]
    first_step = {}
    trace = os.path.join(d, "trace.jsonl")
    if os.path.exists(trace):
        for line in open(trace):
            r = json.loads(line)
            if r["rank"] == 0:
                first_step.setdefault(r["restart"], r["time"])
    else:
        resumed = set()
        for e in events:
            if e["event"] == "resume":
                resumed.add(e["restarts"])
            elif e["event"] in ("log", "commit") and e["restarts"] in resumed:
                first_step.setdefault(e["restarts"], e["time"])

    def ev(kind, restart, last=False):
        t = [e["time"] for e in events if e["event"] == kind and e["restarts"] == restart]
        if not t:
            sys.exit("no %s event of run %d in the events" % (kind, restart + 1))
        return t[-1] if last else t[0]

    rows = []
    for r in sorted(starts):
        if r == 0:
            continue
        stop, requeue = ev("stop", r - 1), ev("requeue", r - 1)
        coord = ev("start", r)
        last_join = ev("join", r, last=True)
        gen = ev("generation", r)
        resume = ev("resume", r)
        marks = [stop, requeue, starts[r], coord, last_join, gen, resume, first_step[r]]
        rows.append({p: marks[i + 1] - marks[i] for i, p in enumerate(PARTS)})
    if not rows:
        sys.exit("no requeue in %s" % d)
    print("%-8s" % "requeue" + "".join("%12s" % p for p in PARTS) + "%10s" % "total")
    for i, row in enumerate(rows, 1):
        print("%-8d" % i + "".join("%12.3f" % row[p] for p in PARTS) +
              "%10.3f" % sum(row.values()))

    def med(keys):
        return statistics.median(sum(row[k] for k in keys) for row in rows)
    dpt, slurm, prog = med(DPTRAIN), med(["slurm"]), med(PROGRAM)
    total = statistics.median(sum(row.values()) for row in rows)
    print("restart dptrain_s=%.3f slurm_s=%.3f program_s=%.3f total_s=%.3f dptrain_share=%.3f" % (
        dpt, slurm, prog, total, dpt / total))


if __name__ == "__main__":
    main()

"""The demo's account of an elastic training run, from the --trace file of
contrib/examples/fmnist_lightning.py or fmnist_dptrain.py (one JSON line
per step and rank).

    report.py TRACE --png FILE [--batch 48] [--seed 7] [--samples 60000]

Checks what the demo claims, and exits 1 saying what failed:
- every global step from 1 to the last was trained exactly once, by every
  rank of one world (a step trained twice or skipped shows);
- each step trained on the samples the elastic sampler assigns to it
  (doc/sampler.md: they depend on the step alone, not on the world size),
  the union of its ranks' samples being that global batch.
Then writes FILE, a PNG (gnuplot) of the loss and the samples per second
against the global step, each run's first step marked with its world size,
and prints one line: "restarts=R world_sizes=A,B,C final_step=S".
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import dptrain.torch as dpt


def read_steps(path):
    """step -> {"world", "restart", "loss", "time", "ranks", "indices"}."""
    steps = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
            except ValueError:
                sys.exit("%s:%d: not a JSON line" % (path, n))
            s = steps.setdefault(r["step"], {"world": r["world"], "restart": r["restart"],
                                             "loss": r["loss"], "time": None,
                                             "ranks": [], "indices": []})
            if (r["world"], r["restart"]) != (s["world"], s["restart"]):
                sys.exit("step %d trained twice: by %d ranks in run %d and by %d in run %d" % (
                    r["step"], s["world"], s["restart"], r["world"], r["restart"]))
            if r["rank"] in s["ranks"]:
                sys.exit("step %d trained twice by rank %d" % (r["step"], r["rank"]))
            s["ranks"].append(r["rank"])
            s["indices"].extend(r["indices"])
            if r["rank"] == 0:
                s["time"] = r["time"]
    return steps


def check(steps, batch, seed, samples):
    last = max(steps) if steps else 0
    missing = [s for s in range(1, last + 1) if s not in steps]
    if not steps or missing:
        sys.exit("steps skipped: %s" % (missing[:10] or "no step at all"))
    sampler = dpt.ElasticSampler(samples, global_batch_size=batch, seed=seed)
    per_epoch = sampler.steps_per_epoch
    for step in sorted(steps):
        s = steps[step]
        if sorted(s["ranks"]) != list(range(s["world"])):
            sys.exit("step %d: ranks %s of a world of %d" % (step, sorted(s["ranks"]), s["world"]))
        epoch, k = divmod(step - 1, per_epoch)
        want = sampler.permutation(epoch)[k * batch:(k + 1) * batch].tolist()
        if sorted(s["indices"]) != sorted(want):
            sys.exit("step %d: trained on other samples than the sampler's global batch" % step)
    return last


def runs(steps):
    """[(restart, world, first step)] in step order."""
    out = []
    for step in sorted(steps):
        s = steps[step]
        if not out or out[-1][0] != s["restart"]:
            out.append((s["restart"], s["world"], step))
    return out


def plot(steps, batch, png):
    """Loss and samples/s (over 20 steps of one run) against the step."""
    if not shutil.which("gnuplot"):
        sys.exit("gnuplot is not installed (apt-get install gnuplot-nox)")
    order = sorted(steps)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "steps.tsv")
        with open(data, "w") as f:
            for i, step in enumerate(order):
                s, rate = steps[step], "NaN"
                j = i - 20
                if j >= 0 and steps[order[j]]["restart"] == s["restart"]:
                    dt = s["time"] - steps[order[j]]["time"]
                    if dt > 0:
                        rate = "%.1f" % ((step - order[j]) * batch / dt)
                f.write("%d\t%.5f\t%s\n" % (step, s["loss"], rate))
        marks = "".join(
            'set arrow from %d, graph 0 to %d, graph 1 nohead dt 2 lc rgb "gray40"\n'
            'set label "run %d: %d ranks" at %d, graph 0.97 offset 0.5,0 font ",9"\n'
            % (first, first, restart + 1, world, first)
            for restart, world, first in runs(steps))
        script = os.path.join(tmp, "plot.gp")
        with open(script, "w") as f:
            f.write("""set terminal pngcairo size 1000,600 noenhanced
set output "%s"
set title "dptrain demo: Fashion-MNIST across requeues and world sizes"
set xlabel "global step"
set ylabel "training loss (mean over the ranks)"
set y2label "samples per second"
set ytics nomirror
set y2tics
set key center right
set grid
%splot "%s" using 1:2 with lines lw 1 lc rgb "#1f77b4" title "loss", \\
     "" using 1:3 axes x1y2 with lines lw 2 lc rgb "#d62728" title "samples/s"
""" % (png, marks, data))
        res = subprocess.run(["gnuplot", script], capture_output=True, text=True)
        if res.returncode != 0:
            sys.exit("gnuplot failed: %s" % res.stderr.strip())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--png", required=True, help="where to write the plot")
    ap.add_argument("--batch", type=int, default=48, help="the run's global batch")
    ap.add_argument("--seed", type=int, default=7, help="the run's sampler seed")
    ap.add_argument("--samples", type=int, default=60000, help="the dataset's length")
    args = ap.parse_args()
    steps = read_steps(args.trace)
    last = check(steps, args.batch, args.seed, args.samples)
    plot(steps, args.batch, args.png)
    r = runs(steps)
    print("restarts=%d world_sizes=%s final_step=%d" % (
        r[-1][0], ",".join(str(w) for _, w, _ in r), last))


if __name__ == "__main__":
    main()

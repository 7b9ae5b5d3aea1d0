"""Checks a live-shrink run against an uninterrupted one (doc/shrink.md).

    check.py CHECK LIVE REFERENCE [--rtol R]

LIVE and REFERENCE are the outputs of contrib/examples/shrink.c or
fmnist_shrink.py (both print the same lines): "trained step=S gen=G
rank=R world=W loss=L idx=I,...", "adopted step=S gen=G rank=R world=W",
"final step=S gen=G rank=R world=W params=P,...". REFERENCE ran without a
fault at the world size LIVE shrank to. CHECK is one of:

  history  the steps the survivors kept are 1..N, each once: generation
           G's kept steps run from the step adopted at its start to the
           one adopted at the next, every rank of a generation adopted the
           same step, and no rank got more than one step past it
  loss     each kept step's global loss is the same on every rank that
           trained it, and equals the reference's within RTOL
  batch    every step of the last generation trained its global batch,
           split across its ranks without overlap, the same samples as
           the reference's step
  final    rank 0's final parameters equal the reference's within RTOL

It prints what it found and exits 0 when the check holds, 1 otherwise.
"""
import re
import sys

LINE = re.compile(r"^(trained|adopted|final) step=(\d+) gen=(\d+) rank=(\d+) "
                  r"world=(\d+)(?: loss=(\S+) idx=(\S*)| params=(\S+)(?: sha256=[0-9a-f]+)?)?$")


class Run:
    def __init__(self, path):
        self.trained, self.adopted, self.final = [], [], []
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.match(line.strip())
                if not m:
                    continue
                kind, step, gen, rank, world = m.group(1), *map(int, m.groups()[1:5])
                rec = {"step": step, "gen": gen, "rank": rank, "world": world}
                if kind == "trained":
                    rec["loss"] = float(m.group(6))
                    rec["idx"] = [int(i) for i in m.group(7).split(",") if i]
                    self.trained.append(rec)
                elif kind == "adopted":
                    self.adopted.append(rec)
                else:
                    rec["params"] = [float(p) for p in m.group(8).split(",")]
                    self.final.append(rec)
        self.gens = sorted({r["gen"] for r in self.trained})

    def adopted_at(self, gen):
        """The step every rank of GEN adopted (None: GEN was not a
        recovery), or raise when they disagree."""
        steps = {r["step"] for r in self.adopted if r["gen"] == gen}
        if len(steps) > 1:
            raise ValueError("generation %d: ranks adopted different steps %s"
                             % (gen, sorted(steps)))
        return steps.pop() if steps else None

    def kept(self):
        """[(gen, first, last)]: the steps each generation's state kept."""
        gens = self.gens
        if not gens:
            raise ValueError("no trained step at all")
        start = min(r["step"] for r in self.trained if r["gen"] == gens[0]) - 1
        out = []
        for i, g in enumerate(gens):
            if i:
                start = self.adopted_at(g)
                if start is None:
                    raise ValueError("generation %d trained without adopting a step" % g)
            if i + 1 < len(gens):
                end = self.adopted_at(gens[i + 1])
                if end is None:
                    raise ValueError("generation %d trained without adopting a step"
                                     % gens[i + 1])
            else:
                end = max(r["step"] for r in self.trained if r["gen"] == g)
            out.append((g, start + 1, end))
        return out

    def lines(self, gen, step):
        return [r for r in self.trained if r["gen"] == gen and r["step"] == step]


def close(a, b, rtol):
    return abs(a - b) <= rtol * max(abs(a), abs(b)) + 1e-300


def check_history(live, ref, rtol):
    problems, prev_end = [], 0
    for gen, first, last in live.kept():
        if first != prev_end + 1:
            problems.append("generation %d kept steps from %d, after step %d: %s"
                            % (gen, first, prev_end,
                               "a step skipped" if first > prev_end + 1 else
                               "steps trained twice"))
        for s in range(first, last + 1):
            if not live.lines(gen, s):
                problems.append("generation %d kept step %d, which none of its ranks "
                                "trained" % (gen, s))
        beyond = max((r["step"] for r in live.trained if r["gen"] == gen), default=last)
        if beyond > last + 1:
            problems.append("generation %d: a rank trained step %d, %d past the step "
                            "adopted after it" % (gen, beyond, beyond - last))
        prev_end = last
    want = max(r["step"] for r in ref.trained)
    if prev_end != want:
        problems.append("the kept steps end at %d, the reference's at %d" % (prev_end, want))
    return problems, "kept %s" % ", ".join(
        "gen %d: steps %d-%d" % k for k in live.kept())


def check_loss(live, ref, rtol):
    problems = []
    ref_loss = {r["step"]: r["loss"] for r in ref.trained}
    n = 0
    for gen, first, last in live.kept():
        for s in range(first, last + 1):
            losses = {r["loss"] for r in live.lines(gen, s)}
            if len(losses) != 1:
                problems.append("step %d of generation %d: the ranks' losses differ: %s"
                                % (s, gen, sorted(losses)))
                continue
            loss = losses.pop()
            if s not in ref_loss:
                problems.append("step %d is not in the reference" % s)
            elif not close(loss, ref_loss[s], rtol):
                problems.append("step %d: loss %.17g, the reference's %.17g"
                                % (s, loss, ref_loss[s]))
            n += 1
    return problems, "%d steps' losses compared" % n


def check_batch(live, ref, rtol):
    problems = []
    gen, first, last = live.kept()[-1]
    world = {r["world"] for r in live.trained if r["gen"] == gen}
    for s in range(first, last + 1):
        lines = live.lines(gen, s)
        ranks = sorted(r["rank"] for r in lines)
        idx = [i for r in lines for i in r["idx"]]
        want = sorted(i for r in ref.trained if r["step"] == s for i in r["idx"])
        if len(world) != 1 or ranks != list(range(next(iter(world)))):
            problems.append("step %d of generation %d: lines from ranks %s of world %s"
                            % (s, gen, ranks, sorted(world)))
        elif len(idx) != len(set(idx)):
            problems.append("step %d: two ranks trained the same sample" % s)
        elif sorted(idx) != want:
            problems.append("step %d: the samples differ from the reference's" % s)
    return problems, "generation %d, world %s, steps %d-%d" % (
        gen, sorted(world), first, last)


def check_final(live, ref, rtol):
    mine = [r for r in live.final if r["rank"] == 0]
    theirs = [r for r in ref.final if r["rank"] == 0]
    if not mine or not theirs:
        return ["no final line of rank 0 in %s" % ("the live run" if not mine
                                                   else "the reference")], ""
    a, b = mine[-1]["params"], theirs[-1]["params"]
    worst = max(abs(x - y) / max(abs(x), abs(y), 1e-300) for x, y in zip(a, b))
    problems = []
    if len(a) != len(b) or mine[-1]["step"] != theirs[-1]["step"]:
        problems.append("the final lines differ in step or size")
    elif worst > rtol:
        problems.append("largest relative difference %.3g > %.3g" % (worst, rtol))
    return problems, "step %d, %d parameters, largest relative difference %.3g" % (
        mine[-1]["step"], len(a), worst)


CHECKS = {"history": check_history, "loss": check_loss,
          "batch": check_batch, "final": check_final}


def main(argv):
    rtol = 1e-6
    if "--rtol" in argv:
        i = argv.index("--rtol")
        rtol = float(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) != 4 or argv[1] not in CHECKS:
        sys.stderr.write("usage: check.py {%s} LIVE REFERENCE [--rtol R]\n"
                         % ",".join(CHECKS))
        return 2
    try:
        problems, summary = CHECKS[argv[1]](Run(argv[2]), Run(argv[3]), rtol)
    except ValueError as e:
        problems, summary = [str(e)], ""
    print(summary)
    for p in problems[:20]:
        print("FAIL " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Compares the --trace files of two runs of contrib/examples/fmnist_dptrain.py
(one JSON line per step and rank: step, world, loss, indices).

    fmnist_check.py samples REF RUN      every global step of REF trained on
                                         the same set of samples in RUN, each
                                         step exactly once in both
    fmnist_check.py loss REF RUN TOL     the global loss of every step within
                                         TOL of REF's (prints the largest gap)
    fmnist_check.py worlds RUN           the world sizes, in step order

Prints what differs and exits 1 when the check fails.
"""
import json
import sys


def steps(path):
    """step -> (world, loss, set of indices, the ranks that wrote it)."""
    out = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            world, loss, idx, ranks = out.setdefault(r["step"], (r["world"], r["loss"], set(), []))
            if r["world"] != world:
                sys.exit("%s: step %d written by world sizes %d and %d" % (
                    path, r["step"], world, r["world"]))
            if r["rank"] in ranks:
                sys.exit("%s: step %d trained twice by rank %d" % (path, r["step"], r["rank"]))
            ranks.append(r["rank"])
            idx.update(r["indices"])
    for step, (world, _, _, ranks) in out.items():
        if sorted(ranks) != list(range(world)):
            sys.exit("%s: step %d has ranks %s of a world of %d" % (path, step, ranks, world))
    return out


def main():
    what = sys.argv[1]
    if what == "worlds":
        run = steps(sys.argv[2])
        seq = [run[s][0] for s in sorted(run)]
        print(",".join(str(w) for i, w in enumerate(seq) if i == 0 or seq[i - 1] != w))
        return
    ref, run = steps(sys.argv[2]), steps(sys.argv[3])
    if sorted(ref) != sorted(run):
        missing = sorted(set(ref) - set(run))[:5]
        extra = sorted(set(run) - set(ref))[:5]
        sys.exit("the runs trained other steps: missing %s, extra %s" % (missing, extra))
    if sorted(ref) != list(range(1, len(ref) + 1)):
        sys.exit("steps are not 1..%d" % len(ref))
    if what == "samples":
        for s in sorted(ref):
            if ref[s][2] != run[s][2]:
                sys.exit("step %d: %d samples differ" % (s, len(ref[s][2] ^ run[s][2])))
        print("%d steps, the same samples at each" % len(ref))
    elif what == "loss":
        tol = float(sys.argv[4])
        gap, at = max((abs(ref[s][1] - run[s][1]), s) for s in ref)
        print("largest loss gap %.5f at step %d (loss %.4f against %.4f)" % (
            gap, at, run[at][1], ref[at][1]))
        if gap > tol:
            sys.exit(1)
    else:
        sys.exit("unknown check %r" % what)


if __name__ == "__main__":
    main()

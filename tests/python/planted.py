"""A worker of tests/python/planted.sh: dptrain.torch loading a step
whose manifest another user may have rewritten (a shared checkpoint
root). Every rank prints what it did:

    planted.py save   saves steps 1 and 2 of a model and Adam, then loads
                      the newest into a fresh model and optimizer:
                      "rank=R loaded STEP stored=BYTES"
    planted.py load   loads the newest into a fresh model and optimizer:
                      "rank=R loaded ..." or "rank=R refused NAME: MESSAGE"

then "rank=R maxrss_mib=N", its peak memory.
"""
import resource
import sys

import torch

import dptrain
import dptrain.torch as dpt


def fresh(seed):
    torch.manual_seed(seed)
    model = torch.nn.Linear(64, 64)
    return model, torch.optim.Adam(model.parameters(), lr=0.1)


with dpt.Checkpoint(signals=()) as ck:
    if sys.argv[1] == "save":
        model, opt = fresh(1)
        for step in (1, 2):
            model(torch.ones(3, 64)).sum().backward()
            opt.step()
            ck.save(step, {"model": model, "opt": opt})
            ck.wait()
    model, opt = fresh(2)  # Adam's state is created by the load
    try:
        step = ck.load({"model": model, "opt": opt})
        print("rank=%d loaded %s stored=%d" % (ck.rank, step, ck.inspect(step).stored_bytes))
    except dptrain.DptrainError as e:
        print("rank=%d refused %s: %s" % (ck.rank, e.name, e))
    print("rank=%d maxrss_mib=%d" % (
        ck.rank, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024), flush=True)

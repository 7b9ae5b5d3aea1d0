"""A worker of tests/python/log.sh: dptrain.torch's Checkpoint.log,
total_steps and global_batch (which load() declares from the state's
ElasticSampler, and a repeated declaration does not send). Every rank logs every step; rank 1 logs values that must not
reach the events. Prints "bad name: ..." for the refused call, then
"done rank=R"."""
import sys

import torch

import dptrain
import dptrain.torch as dpt

steps = int(sys.argv[1])
w = torch.zeros(4)
with dpt.Checkpoint(signals=()) as ck:
    ck.total_steps = steps
    ck.total_steps = steps  # the same again: nothing sent
    sampler = dpt.ElasticSampler(960, global_batch_size=48)
    assert ck.load({"w": w, "sampler": sampler}) is None and ck.global_batch == 48
    ck.global_batch = 48  # the same again: nothing sent
    try:
        ck.log(0, **{"bad name": 1.0})
    except dptrain.DptrainError as e:
        print("bad name:", e.name)
    for step in range(1, steps + 1):
        w += 1
        loss = torch.tensor(1.0 / step)  # a one-element tensor
        if ck.rank == 0:
            ck.log(step, loss=loss, samples_per_s=100.0 * step, lr=float("nan"))
        else:
            ck.log(step, loss=-1.0, samples_per_s=-1.0)
        if step == steps // 2:
            ck.save(step, {"w": w})
    ck.wait()
    print("done rank=%d" % ck.rank, flush=True)

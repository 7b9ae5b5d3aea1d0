"""A PyTorch training job that outlives its walltime, with dptrain's binding.

Submit it with a time limit shorter than the training needs:

    sbatch -N 2 -n 4 --time=1 --requeue --open-mode=append -o train.out --wrap \\
        "srun --dp-train=fit --dp-ckpt=file:///scratch/$USER/ckpt --dp-grace=45s \\
              --dp-ckpt-every=5s python3 train_walltime.py 300"

It fits y = 3x - 2 on data each rank draws for itself, averaging the
gradients with ctx.allreduce; each step also sleeps 0.1 s, standing in for
a real model's compute. After every step it calls ck.step(): that saves
the model and the optimizer's momentum every --dp-ckpt-every, and once the
job's end is within --dp-grace it saves, waits for the commit and returns
True on every rank at the same step; the program exits, the job is
requeued, and the next run resumes from that checkpoint. A rank's data at step S depends only on (rank, S), so a
resumed run learns exactly what an uninterrupted one would have.
"""
import os
import sys
import time

import torch

import dptrain

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300

with dptrain.init() as ctx:
    rank, world = ctx.rank, ctx.world_size
    model = torch.nn.Linear(1, 1)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
    # Momentum buffers created up front, so that they can be registered.
    moments = [torch.zeros_like(p) for p in model.parameters()]
    for p, m in zip(model.parameters(), moments):
        opt.state[p]["momentum_buffer"] = m

    ck = dptrain.Checkpoint(ctx)
    ck.register("weight", model.weight.data)
    ck.register("bias", model.bias.data)
    for i, m in enumerate(moments):
        ck.register("momentum.%d" % i, m)
    info = ck.load()
    start = info.step if info else 0
    if rank == 0:
        print("run %s: %s on %d ranks" % (
            os.environ.get("SLURM_RESTART_COUNT", "0"),
            "resumed at step %d" % start if info else "fresh start", world),
            flush=True)

    step, stop = start, False
    while step < steps and not stop:
        step += 1
        g = torch.Generator().manual_seed(1000003 * step + rank)
        x = torch.rand(64, 1, generator=g) * 2 - 1
        y = 3 * x - 2 + 0.01 * torch.randn(64, 1, generator=g)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            ctx.allreduce(p.grad, op="avg")
        opt.step()
        time.sleep(0.1)
        if rank == 0 and step % 50 == 0:
            print("step %4d loss %.5f" % (step, loss.item()), flush=True)
        # Saves when --dp-ckpt-every says so, and at the walltime, where
        # it also waits for the commit and returns True.
        stop = ck.step(step)

    if step > start and ck.last_saved != step:
        ck.save(step)
    ck.wait()
    if rank == 0:
        w, b = model.weight.item(), model.bias.item()
        if stop:
            print("stopped at step %d for the walltime: checkpoint committed, "
                  "the job is requeued" % step, flush=True)
        else:
            print("finished step %d: learned y = %.3f x %+.3f (true: y = 3x - 2)"
                  % (step, w, b), flush=True)
    ck.close()

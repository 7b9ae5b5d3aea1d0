"""Fashion-MNIST with PyTorch DDP, made elastic by dptrain: the script of
fmnist_ddp.py with the dptrain lines (doc/python.md, dptrain(8)).

    srun --dp-train=fmnist --dp-ckpt=file:///scratch/$USER/ckpt \\
        python3 fmnist_dptrain.py --steps 2000

It checkpoints every --dp-ckpt-every, logs each step's loss and samples/s
to the run's events (`dptrain plot RUN` draws them, `dptrain status` shows
the progress toward --steps), stops in time for the walltime or a
preemption signal with a committed checkpoint, and resumes from it on any
number of ranks that divides the global batch (48: 1, 2, 3, 4, 6, 8, ...):
the samples of every global step are the same whatever the world size.

Data: the IDX files of Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist), or --data DIR.
"""
import collections
import time

import torch
import torch.distributed as dist

import dptrain.torch as dpt

# The examples' options, data, model, training step and output (fmnist_common.py):
from fmnist_common import (Net, arguments, fashion_mnist, init_ddp, open_trace, print_done,
                           print_step, trace_step, train_step)


def main():
    args = arguments(__doc__, trace_help="append one JSON line per step and rank: step, "
                     "world size, the rank's sample indices, the global loss, "
                     "the job's restart count, the wall time").parse_args()
    # dptrain's: fails at once where a task of the step died before the rendezvous.
    rank, world, device = init_ddp(args.seed, dpt.init_process_group)

    train = fashion_mnist(args.data, "train")
    sampler = dpt.ElasticSampler(train, global_batch_size=args.batch, seed=args.seed)
    loader = torch.utils.data.DataLoader(train, batch_sampler=sampler)
    model = Net().to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    ck = dpt.Checkpoint()
    state = {"model": model, "optim": optimizer, "sampler": sampler}
    step = ck.load(state) or 0
    ck.total_steps = args.steps  # dptrain status: the progress toward it
    if rank == 0:
        print("fmnist: %s at step %d on %d ranks (restart %d)" % (
            "resumed" if step else "starting", step, world, ck.restart_count), flush=True)

    trace = open_trace(args.trace)
    t0, seen = time.time(), 0
    recent = collections.deque([t0], maxlen=11)  # the last 10 steps' end times
    stop = False
    while step < args.steps and not stop:
        for x, y, index in loader:
            loss = train_step(ddp, optimizer, x, y, device)
            if args.step_delay:
                time.sleep(args.step_delay)
            step += 1
            seen += args.batch
            trace_step(trace, step, rank, world, loss, index,
                       restart=ck.restart_count, time=round(time.time(), 3))
            # Into the run's events, buffered: no round trip per step;
            # samples/s over the last 10 steps of this run.
            recent.append(time.time())
            ck.log(step, loss=loss, samples_per_s=args.batch * (len(recent) - 1) /
                   max(recent[-1] - recent[0], 1e-9))
            print_step(args, rank, step, loss, seen / (time.time() - t0))
            stop = ck.step(step, state)
            if stop or step >= args.steps:
                break
    ck.finish(step, state)
    if trace:
        trace.close()
    ck.close()
    if stop and step < args.steps:
        if rank == 0:
            print("fmnist: stopped at step %d: checkpoint committed, the job is "
                  "requeued" % step, flush=True)
        dist.destroy_process_group()
        return
    print_done(model, args, step, rank, world, device)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

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
import argparse
import collections
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import dptrain.torch as dpt

from fmnist_common import Net, fashion_mnist, params_sha256, test_accuracy  # the examples' data and model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1000, help="global steps to train to")
    ap.add_argument("--batch", type=int, default=48, help="global batch size")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--log-every", type=int, default=20)
    ap.add_argument("--trace", help="append one JSON line per step and rank: step, "
                    "world size, the rank's sample indices, the global loss, "
                    "the job's restart count, the wall time")
    args = ap.parse_args()

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

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

    # Line-buffered: each line is one append, whole, beside the other ranks'.
    trace = open(args.trace, "a", buffering=1) if args.trace else None
    t0, seen = time.time(), 0
    recent = collections.deque([t0], maxlen=11)  # the last 10 steps' end times
    stop = False
    while step < args.steps and not stop:
        for x, y, index in loader:
            x, y = x.to(device), y.to(device)
            loss = F.cross_entropy(ddp(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            seen += args.batch
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            mean = mean.item() / world
            if trace:
                trace.write(json.dumps({"step": step, "rank": rank, "world": world,
                                        "loss": mean, "indices": index.tolist(),
                                        "restart": ck.restart_count,
                                        "time": round(time.time(), 3)}) + "\n")
            # Into the run's events, buffered: no round trip per step;
            # samples/s over the last 10 steps of this run.
            recent.append(time.time())
            ck.log(step, loss=mean, samples_per_s=args.batch * (len(recent) - 1) /
                   max(recent[-1] - recent[0], 1e-9))
            if rank == 0 and step % args.log_every == 0:
                print("step %d loss %.4f samples/s %.0f" % (
                    step, mean, seen / (time.time() - t0)), flush=True)
            stop = ck.step(step, state)
            if stop or step >= args.steps:
                break
    if ck.last_saved != step:
        ck.save(step, state)
    ck.wait()
    if trace:
        trace.close()
    ck.close()
    if stop and step < args.steps:
        if rank == 0:
            print("fmnist: stopped at step %d: checkpoint committed, the job is "
                  "requeued" % step, flush=True)
        dist.destroy_process_group()
        return
    accuracy = test_accuracy(model, args.data, rank, world, device)
    if rank == 0:
        print("fmnist: done at step %d test_accuracy=%.4f params_sha256=%s" % (
            step, accuracy, params_sha256(model)), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Fashion-MNIST with PyTorch DDP, as PyTorch users write it: started by
torchrun, or by srun with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
set (srun --dp-train sets them). fmnist_dptrain.py is the same script
made elastic by dptrain (the README shows the difference).

Data: the IDX files of Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist), or --data DIR.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

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
                    "world size, the rank's sample indices, the global loss")
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
    sampler = torch.utils.data.DistributedSampler(train, seed=args.seed, drop_last=True)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch // world,
                                         sampler=sampler, drop_last=True)
    model = Net().to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    step = 0
    if rank == 0:
        print("fmnist: starting on %d ranks" % world, flush=True)

    trace = open(args.trace, "a") if args.trace else None
    t0, seen = time.time(), 0
    while step < args.steps:
        sampler.set_epoch(step // len(loader))
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
                                        "loss": mean, "indices": index.tolist()}) + "\n")
            if rank == 0 and step % args.log_every == 0:
                print("step %d loss %.4f samples/s %.0f" % (
                    step, mean, seen / (time.time() - t0)), flush=True)
            if step >= args.steps:
                break
    if trace:
        trace.close()
    accuracy = test_accuracy(model, args.data, rank, world, device)
    if rank == 0:
        print("fmnist: done at step %d test_accuracy=%.4f params_sha256=%s" % (
            step, accuracy, params_sha256(model)), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

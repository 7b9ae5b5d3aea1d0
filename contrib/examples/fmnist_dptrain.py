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
import gzip
import hashlib
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import dptrain.torch as dpt


def read_idx(path):
    """An IDX file (gzip): uint8 images [N, 28, 28] or labels [N]."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def fashion_mnist(root, split):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(root, prefix + "-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(root, prefix + "-labels-idx1-ubyte.gz"))
    x = (x.float().div(255) - 0.2860) / 0.3530  # the training set's mean and std
    # The sample's index comes with it, for --trace.
    return torch.utils.data.TensorDataset(x.unsqueeze(1), y.long(), torch.arange(len(y)))


def test_accuracy(model, args, rank, world, device):
    """Each rank tests its share of the 10000 test images."""
    x, y, _ = fashion_mnist(args.data, "test")[rank::world]
    with torch.no_grad():
        correct = (model(x.to(device)).argmax(1) == y.to(device)).sum()
    dist.all_reduce(correct)
    return correct.item() / 10000


def params_sha256(model):
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().numpy().tobytes())
    return digest.hexdigest()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 16, 5, stride=2)  # 16 x 12 x 12
        self.fc1 = torch.nn.Linear(16 * 12 * 12, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv(x)).flatten(1)
        return self.fc2(F.relu(self.fc1(x)))


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
    accuracy = test_accuracy(model, args, rank, world, device)
    if rank == 0:
        print("fmnist: done at step %d test_accuracy=%.4f params_sha256=%s" % (
            step, accuracy, params_sha256(model)), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""What the Fashion-MNIST examples share: their options, the data (the
IDX files of Debian's dataset-fashion-mnist), the model, the DDP set-up
and training step, the lines they print and trace, the test accuracy and
the digest of the parameters that the tests compare. The examples differ
only in how they train (fmnist_ddp.py: torchrun's DDP; fmnist_dptrain.py:
the same made elastic by dptrain; fmnist_lightning.py: Lightning;
fmnist_shrink.py: a run that shrinks)."""
import argparse
import gzip
import hashlib
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


def arguments(doc, trace_help):
    """The parser of the options every Fashion-MNIST training example
    takes; DOC: the example's docstring (its first line describes it)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1000, help="global steps to train to")
    ap.add_argument("--batch", type=int, default=48, help="global batch size")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--log-every", type=int, default=20, help="print the loss every N steps")
    ap.add_argument("--trace", help=trace_help)
    ap.add_argument("--step-delay", type=float, default=0.0,
                    help="seconds to sleep after each step: a stand-in for a larger model")
    return ap


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
    # The training set's mean and std, in place: a rank starts without three
    # temporary copies of the 60000 images (the same values, bit for bit).
    x = x.float().div_(255).sub_(0.2860).div_(0.3530)
    # The sample's index comes with it, for --trace.
    return torch.utils.data.TensorDataset(x.unsqueeze(1), y.long(), torch.arange(len(y)))


def test_accuracy(model, root, rank, world, device):
    """Each rank tests its share of the 10000 test images (a collective:
    every rank calls it)."""
    x, y, _ = fashion_mnist(root, "test")[rank::world]
    with torch.no_grad():
        correct = (model(x.to(device)).argmax(1) == y.to(device)).sum()
    dist.all_reduce(correct)
    return correct.item() / 10000


def torch_init_process_group(backend):
    dist.init_process_group(backend, init_method="env://")


def init_ddp(seed, init_process_group=torch_init_process_group):
    """torch.distributed from torchrun's variables (srun --dp-train sets
    them), by INIT_PROCESS_GROUP(backend) (default: torch's, from the
    environment): NCCL on the local rank's GPU where there is one, else
    gloo on the CPU. Returns the rank, the world size and the device."""
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    init_process_group(backend)
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    return dist.get_rank(), dist.get_world_size(), device


def train_step(ddp, optimizer, x, y, device):
    """One step of the DDP model on this rank's batch; returns the global
    mean loss (a collective: every rank calls it)."""
    loss = F.cross_entropy(ddp(x.to(device)), y.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    return mean.item() / dist.get_world_size()


def open_trace(path):
    """--trace PATH, or None. Line-buffered: each line is one append, whole,
    beside the other ranks'."""
    return open(path, "a", buffering=1) if path else None


def trace_step(trace, step, rank, world, loss, index, **more):
    """--trace's JSON line of STEP on this rank: the world size, the global
    mean loss, the rank's sample indices, and MORE."""
    if trace:
        trace.write(json.dumps(dict(step=step, rank=rank, world=world, loss=loss,
                                    indices=index.tolist(), **more)) + "\n")


def print_step(args, rank, step, loss, samples_per_s):
    """Rank 0's line every --log-every steps."""
    if rank == 0 and step % args.log_every == 0:
        print("step %d loss %.4f samples/s %.0f" % (step, loss, samples_per_s), flush=True)


def print_done(model, args, step, rank, world, device):
    """The test accuracy and the parameters' digest at the end (a
    collective: every rank calls it)."""
    accuracy = test_accuracy(model, args.data, rank, world, device)
    if rank == 0:
        print("fmnist: done at step %d test_accuracy=%.4f params_sha256=%s" % (
            step, accuracy, params_sha256(model)), flush=True)


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

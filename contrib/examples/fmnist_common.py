"""What the Fashion-MNIST examples share: the data (the IDX files of
Debian's dataset-fashion-mnist), the model, the test accuracy and the
digest of the parameters that the tests compare. The examples differ
only in how they train (fmnist_ddp.py: torchrun's DDP; fmnist_dptrain.py:
the same made elastic by dptrain; fmnist_lightning.py: Lightning;
fmnist_shrink.py: a run that shrinks)."""
import gzip
import hashlib
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F


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


def test_accuracy(model, root, rank, world, device):
    """Each rank tests its share of the 10000 test images (a collective:
    every rank calls it)."""
    x, y, _ = fashion_mnist(root, "test")[rank::world]
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

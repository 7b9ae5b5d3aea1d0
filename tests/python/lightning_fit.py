"""A tiny Lightning fit with dptrain.lightning's environment and callback,
for tests/python/lightning_modes.sh (under srun --dp-train) and tests/gpu
(one rank on the GPU, 16-mixed: the GradScaler's state is saved): trains
to TOTAL steps, resuming from the run's checkpoint, and prints
"start=S end=E stopped=B global_step=G params_sum=X scale=F params_sha256=H"
(F: the GradScaler's scale, or none).

    lightning_fit.py TOTAL [ACCELERATOR [PRECISION]] [--accumulate K]
        [--manual] [--raise-at STEP] [--devices N] [--num-nodes N] [--pl]
        [--strategy NAME]

--strategy: the Trainer's (default ddp; auto on one task a device is a
single-device strategy, which DptrainCallback refuses under more tasks).

--pl: the script is written against pytorch_lightning, not lightning.pytorch.
A stateful callback counts the batches ("batches=N"), restored on resume;
"handlers=kept" when SIGTERM's and SIGUSR1's handlers after fit() are those
before it.
"""
import argparse
import hashlib
import os
import signal
import sys

import torch

if "--pl" in sys.argv:
    import pytorch_lightning as pl
else:
    try:
        import lightning.pytorch as pl
    except ImportError:
        import pytorch_lightning as pl

import dptrain.torch as dpt
from dptrain.lightning import DptrainCallback, DptrainEnvironment


class Fit(pl.LightningModule):
    """y = 3x - 2 by a linear layer; --raise-at fails training_step there."""

    def __init__(self, raise_at=None):
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)
        self.raise_at = raise_at

    def training_step(self, batch, batch_idx):
        if self.raise_at is not None and self.trainer.global_step + 1 == self.raise_at:
            raise RuntimeError("lightning_fit: failing at step %d as asked" % self.raise_at)
        x, y = batch
        return torch.nn.functional.mse_loss(self.lin(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.05)


class ManualFit(pl.LightningModule):
    """Manual optimization with two optimizers, each for its own layer; one
    backward a step (what DDP reduces)."""

    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.a = torch.nn.Linear(1, 1)
        self.b = torch.nn.Linear(1, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        opts = self.optimizers()
        loss = sum(torch.nn.functional.mse_loss(layer(x), y) for layer in (self.a, self.b))
        for opt in opts:
            opt.zero_grad()
        self.manual_backward(loss)
        for opt in opts:
            opt.step()

    def configure_optimizers(self):
        return [torch.optim.Adam(self.a.parameters(), lr=0.05),
                torch.optim.SGD(self.b.parameters(), lr=0.1, momentum=0.9)]


class Counter(pl.Callback):
    """The batches trained, in the callback's state_dict()."""

    def __init__(self):
        self.batches = 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.batches += 1

    def state_dict(self):
        return {"batches": self.batches}

    def load_state_dict(self, state_dict):
        self.batches = state_dict["batches"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("total", type=int)
    ap.add_argument("accelerator", nargs="?", default="cpu")
    ap.add_argument("precision", nargs="?", default="32-true")
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--manual", action="store_true")
    ap.add_argument("--raise-at", type=int)
    ap.add_argument("--devices", type=int)
    ap.add_argument("--num-nodes", type=int)
    ap.add_argument("--pl", action="store_true")
    ap.add_argument("--strategy", default="ddp")
    args = ap.parse_args()
    # One thread, as the examples: the tests compare final parameters bit
    # for bit between runs. OMP_NUM_THREADS, or Lightning's DDP sets the
    # node's CPUs over its ranks (contrib/examples/fmnist_lightning.py).
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.linspace(-1, 1, 960).unsqueeze(1)
    data = torch.utils.data.TensorDataset(x, 3 * x - 2)
    sampler = dpt.ElasticSampler(data, global_batch_size=32, seed=1)
    loader = torch.utils.data.DataLoader(data, batch_sampler=sampler)
    cb, counter = DptrainCallback(sampler=sampler), Counter()
    counts = {k: v for k, v in (("devices", args.devices), ("num_nodes", args.num_nodes))
              if v is not None}
    trainer = pl.Trainer(max_steps=args.total * (2 if args.manual else 1),
                         strategy=args.strategy, accelerator=args.accelerator, precision=args.precision,
                         accumulate_grad_batches=args.accumulate, callbacks=[cb, counter],
                         plugins=[DptrainEnvironment()], use_distributed_sampler=False,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, **counts)
    model = ManualFit() if args.manual else Fit(args.raise_at)
    signals = (signal.SIGTERM, signal.SIGUSR1)
    signal.signal(signal.SIGUSR1, lambda *_: None)  # a handler of the script's own
    before = [signal.getsignal(s) for s in signals]
    trainer.fit(model, loader)
    kept = [signal.getsignal(s) for s in signals] == before
    scaler = getattr(trainer.precision_plugin, "scaler", None)
    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().float().numpy().tobytes())
    print("start=%d end=%d stopped=%s global_step=%d params_sum=%.6f scale=%s handlers=%s "
          "batches=%d params_sha256=%s" % (
              cb.start, cb.step, cb.stopped, trainer.global_step,
              sum(p.sum().item() for p in model.parameters()),
              "none" if scaler is None else scaler.get_scale(), "kept" if kept else "changed",
              counter.batches, digest.hexdigest()), flush=True)


if __name__ == "__main__":
    main()

"""Fashion-MNIST with PyTorch Lightning's DDP, made elastic by dptrain: a
LightningModule as Lightning users write it, plus the lines that add
dptrain (the ones marked "dptrain"; doc/python.md, "Lightning").

    srun --dp-train=fmnist --dp-ckpt=file:///scratch/$USER/ckpt \\
        python3 fmnist_lightning.py --steps 2000

The job may have any size whose world size divides the global batch (48:
1, 2, 3, 4, 6, 8, ...): the Trainer names neither devices nor num_nodes.
It saves every --dp-ckpt-every, stops in time for the walltime or a
preemption with a committed checkpoint, and a requeued job resumes there,
on however many ranks it gets: trainer.global_step, the epoch, the
optimizer and the samples of every global step go on as if it had not
stopped.

Data: the IDX files of Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist), or --data DIR.
"""
import os
import time

import torch
import torch.nn.functional as F

try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl

import dptrain.torch as dpt  # dptrain
from dptrain.lightning import DptrainCallback, DptrainEnvironment  # dptrain

# The examples' options, data, model and trace (fmnist_common.py):
from fmnist_common import (Net, arguments, fashion_mnist, open_trace, params_sha256,
                           test_accuracy, trace_step)


class FashionNet(pl.LightningModule):
    def __init__(self, lr):
        super().__init__()
        self.lr = lr
        self.net = Net()  # the model of every Fashion-MNIST example

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y, _ = batch
        loss = F.cross_entropy(self(x), y)
        self.log("loss", loss, sync_dist=True, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


class Report(pl.Callback):
    """Rank 0 says where the run starts and, every LOG_EVERY steps, the
    global loss (as contrib/examples/fmnist_dptrain.py does)."""

    def __init__(self, log_every):
        self.log_every = log_every

    def on_train_start(self, trainer, pl_module):
        if trainer.global_rank == 0:
            print("fmnist: %s at step %d on %d ranks (restart %s)" % (
                "resumed" if trainer.global_step else "starting", trainer.global_step,
                trainer.world_size, os.environ.get("SLURM_RESTART_COUNT") or 0), flush=True)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if trainer.global_rank == 0 and self.log_every and step % self.log_every == 0:
            print("step %d loss %.4f" % (step, trainer.callback_metrics["loss"]), flush=True)


class Trace(pl.Callback):
    """--trace: one JSON line per global step and rank (the step, the world
    size, the rank's sample indices, the global mean loss, the job's
    restart count), as contrib/examples/fmnist_dptrain.py writes them."""

    def __init__(self, path):
        self.file = open_trace(path)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        loss = outputs["loss"].detach().clone()
        torch.distributed.all_reduce(loss)
        trace_step(self.file, trainer.global_step, trainer.global_rank, trainer.world_size,
                   loss.item() / trainer.world_size, batch[2],
                   restart=int(os.environ.get("SLURM_RESTART_COUNT") or 0),
                   time=round(time.time(), 3))


def main():
    ap = arguments(__doc__, trace_help="append one JSON line per step and rank")
    ap.add_argument("--min-steps", type=int, help="Trainer(min_steps=...)")
    ap.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    ap.add_argument("--train-size", type=int, help="train on the first N images only "
                    "(short epochs)")
    ap.add_argument("--precision", default="32-true", help="Trainer(precision=...)")
    args = ap.parse_args()

    # One thread a rank, as the other examples. Lightning's DDP sets torch's
    # thread count to the node's CPUs over its ranks unless OMP_NUM_THREADS
    # is set: a rank alone on its node would spin a thread a CPU.
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    pl.seed_everything(args.seed, verbose=False)
    train = fashion_mnist(args.data, "train")
    if args.train_size:
        train = torch.utils.data.TensorDataset(*(t[:args.train_size] for t in train.tensors))
    sampler = dpt.ElasticSampler(train, global_batch_size=args.batch, seed=args.seed)  # dptrain
    loader = torch.utils.data.DataLoader(train, batch_sampler=sampler,  # dptrain: batch_sampler
                                         num_workers=args.workers)
    dptrain_cb = DptrainCallback(sampler=sampler)  # dptrain
    callbacks = [dptrain_cb, Report(args.log_every)] + ([Trace(args.trace)] if args.trace else [])
    if args.step_delay:
        callbacks.append(pl.callbacks.LambdaCallback(
            on_train_batch_end=lambda *_: time.sleep(args.step_delay)))
    trainer = pl.Trainer(strategy="ddp", max_steps=args.steps, min_steps=args.min_steps,
                         precision=args.precision,
                         use_distributed_sampler=False,  # dptrain
                         plugins=[DptrainEnvironment()],  # dptrain
                         callbacks=callbacks, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False)
    model = FashionNet(args.lr)
    trainer.fit(model, loader)

    rank, world = trainer.global_rank, trainer.world_size
    if dptrain_cb.stopped:
        if rank == 0:
            print("fmnist: stopped at step %d: checkpoint committed, the job is requeued"
                  % trainer.global_step, flush=True)
        return
    accuracy = test_accuracy(model, args.data, rank, world, model.device)
    if rank == 0:
        print("fmnist: done at step %d (from %d) on %d ranks test_accuracy=%.4f "
              "params_sha256=%s" % (trainer.global_step, dptrain_cb.start, world, accuracy,
                                    params_sha256(model)), flush=True)


if __name__ == "__main__":
    main()

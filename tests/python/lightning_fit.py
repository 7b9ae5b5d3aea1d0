"""A tiny Lightning fit with dptrain.lightning.DptrainCallback, for
tests/python/lightning.sh: trains to TOTAL global steps, resuming from the
run's checkpoint; prints "start=S end=E stopped=B params_sum=X".

    lightning_fit.py TOTAL [ACCELERATOR]    (default cpu; tests/gpu: gpu)"""
import sys

import torch

try:
    import lightning.pytorch as pl
    from lightning.pytorch.plugins.environments import SLURMEnvironment
except ImportError:
    import pytorch_lightning as pl
    from pytorch_lightning.plugins.environments import SLURMEnvironment

import dptrain.torch as dpt
from dptrain.lightning import DptrainCallback


class Fit(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.lin(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.05)


def main():
    total = int(sys.argv[1])
    accelerator = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    torch.manual_seed(0)
    x = torch.linspace(-1, 1, 960).unsqueeze(1)
    data = torch.utils.data.TensorDataset(x, 3 * x - 2)
    sampler = dpt.ElasticSampler(data, global_batch_size=32, seed=1)
    loader = torch.utils.data.DataLoader(data, batch_sampler=sampler)
    cb = DptrainCallback(sampler=sampler, total_steps=total)
    trainer = pl.Trainer(max_steps=total, accelerator=accelerator, devices=1, callbacks=[cb],
                         plugins=[SLURMEnvironment(auto_requeue=False)],
                         use_distributed_sampler=False, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    model = Fit()
    trainer.fit(model, loader)
    print("start=%d end=%d stopped=%s params_sum=%.6f" % (
        cb.start, cb.step(trainer), cb.stopped, sum(p.sum().item() for p in model.parameters())),
        flush=True)


if __name__ == "__main__":
    main()

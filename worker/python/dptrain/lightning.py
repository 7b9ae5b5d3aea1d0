"""dptrain for Lightning: a callback that checkpoints with dptrain.torch,
stops the Trainer at the walltime or a preemption with a committed
checkpoint, and resumes from it on any number of ranks (doc/python.md)::

    from dptrain.lightning import DptrainCallback

    sampler = dptrain.torch.ElasticSampler(dataset, global_batch_size=48, seed=7)
    loader = DataLoader(dataset, batch_sampler=sampler)
    trainer = Trainer(callbacks=[DptrainCallback(sampler=sampler)],
                      plugins=[SLURMEnvironment(auto_requeue=False)],
                      use_distributed_sampler=False, max_steps=10000)
    trainer.fit(model, loader)

Lightning's own requeue must be off (dptrain requeues) and the job needs no
``#SBATCH --signal``. The state is the LightningModule, the Trainer's
optimizers and LR schedulers, and the sampler; ``max_steps`` counts the
steps of this run, so the callback stops at ``total_steps`` when given.
"""

try:
    import lightning.pytorch as pl
except ImportError:
    try:
        import pytorch_lightning as pl
    except ImportError as e:
        raise ImportError("dptrain.lightning needs Lightning (import lightning.pytorch and "
                          "pytorch_lightning failed: %s)" % e) from None

import dptrain.torch as dpt

__all__ = ["DptrainCallback"]


class DptrainCallback(pl.Callback):
    """Calls Checkpoint.step after every training batch (global step =
    the step loaded + the Trainer's global_step) and sets
    ``trainer.should_stop`` at the stop; saves the last step at the end of
    training. CHECKPOINT: a dptrain.torch.Checkpoint (default: one made
    with CKPT_OPTS when training starts). SAMPLER: the ElasticSampler to
    keep in step. TOTAL_STEPS: the run's length across restarts."""

    def __init__(self, checkpoint=None, sampler=None, total_steps=None, **ckpt_opts):
        self.ck = checkpoint
        self.sampler = sampler
        self.total_steps = total_steps
        self._opts = ckpt_opts
        self._own = checkpoint is None
        self.start = 0
        self.stopped = False

    def state(self, trainer, pl_module):
        state = {"model": pl_module, "optimizers": list(trainer.optimizers),
                 "schedulers": [c.scheduler for c in trainer.lr_scheduler_configs]}
        if self.sampler is not None:
            state["sampler"] = self.sampler
        return state

    def step(self, trainer):
        return self.start + trainer.global_step

    def on_train_start(self, trainer, pl_module):
        if self.ck is None:
            self.ck = dpt.Checkpoint(**self._opts)
        self.start = self.ck.load(self.state(trainer, pl_module)) or 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = self.step(trainer)
        if self.ck.step(step, self.state(trainer, pl_module)):
            self.stopped = True
            trainer.should_stop = True
        elif self.total_steps is not None and step >= self.total_steps:
            trainer.should_stop = True

    def on_train_end(self, trainer, pl_module):
        step = self.step(trainer)
        if step > self.start and self.ck.last_saved != step:
            self.ck.save(step, self.state(trainer, pl_module))
        self.ck.wait()

    def teardown(self, trainer, pl_module, stage):
        if self._own and self.ck is not None:
            self.ck.close()
            self.ck = None

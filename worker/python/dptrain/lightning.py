"""dptrain for PyTorch Lightning (doc/python.md, "Lightning")::

    import dptrain.torch as dpt
    from dptrain.lightning import DptrainEnvironment, DptrainCallback

    sampler = dpt.ElasticSampler(dataset, global_batch_size=48, seed=7)
    loader = DataLoader(dataset, batch_sampler=sampler, num_workers=4)
    trainer = pl.Trainer(strategy="ddp", max_steps=100_000, use_distributed_sampler=False,
                         plugins=[DptrainEnvironment()],
                         callbacks=[DptrainCallback(sampler=sampler)])
    trainer.fit(model, loader)

DptrainEnvironment gives Lightning the ranks, the nodes and the rendezvous
of ``srun --dp-train``, whatever the job's size, and keeps Lightning's own
SLURM requeue out. DptrainCallback saves and restores what Lightning's
``ckpt_path=`` resume does, stops every rank at the agreed step (walltime,
preemption, ``scancel --signal``) and resumes on any number of ranks.
Works under ``lightning.pytorch`` and ``pytorch_lightning``: import the one
the script uses before this module.
"""

import importlib
import os
import signal
import sys
import warnings


def _lightning():
    """(Callback, ClusterEnvironment) of the Lightning the script uses: its
    two packages, lightning.pytorch and pytorch_lightning, have classes of
    their own, and a Trainer takes only its own package's. The one already
    imported wins (lightning.pytorch when both are), else the one that
    imports."""
    names = [("lightning.pytorch", "lightning.fabric.plugins.environments"),
             ("pytorch_lightning", "lightning_fabric.plugins.environments")]
    if "pytorch_lightning" in sys.modules and "lightning" not in sys.modules:
        names.reverse()
    errors = []
    for trainer, fabric in names:
        try:
            return (importlib.import_module(trainer).Callback,
                    importlib.import_module(fabric).ClusterEnvironment)
        except ImportError as e:
            errors.append(str(e))
    raise ImportError("dptrain.lightning needs Lightning (pip install lightning): "
                      "%s" % "; ".join(errors))


_Callback, _ClusterEnvironment = _lightning()

import torch

import dptrain.torch as dpt

__all__ = ["DptrainCallback", "DptrainEnvironment"]

# What srun --dp-train sets in every task (dptrain(8), ENVIRONMENT).
_JOB_VARS = ("DPTRAIN_COORDINATOR", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
             "NODE_RANK", "NUM_NODES", "MASTER_ADDR", "MASTER_PORT")


def _job_var(name):
    value = os.environ.get(name)
    if value is None:
        raise RuntimeError("DptrainEnvironment: %s is not set: start the script with "
                           "srun --dp-train" % name)
    return value


class DptrainEnvironment(_ClusterEnvironment):
    """The job step of ``srun --dp-train`` as Lightning's cluster: ranks,
    nodes and the rendezvous address come from the job, so that one script
    runs at whatever size the job has. A Trainer that names neither
    ``devices`` nor ``num_nodes`` takes the job's counts; counts that
    contradict the job are an error naming both. Just before torch's
    rendezvous it joins the step's coordinator, and raises where tasks of
    the step exited before they joined. Outside ``srun --dp-train``,
    ``detect()`` is False and the constructor says which variable is
    missing."""

    def __init__(self):
        super().__init__()
        missing = [v for v in _JOB_VARS if v not in os.environ]
        if missing:
            raise RuntimeError("DptrainEnvironment: not in a task of srun --dp-train (%s "
                               "unset): start the script with srun --dp-train, or leave "
                               "the plugin out" % ", ".join(missing))

    @staticmethod
    def detect():
        return all(v in os.environ for v in _JOB_VARS)

    @property
    def creates_processes_externally(self):
        return True  # srun starts one process a rank

    @property
    def main_address(self):
        # Lightning reads it just before torch's rendezvous, which every
        # task of the step must reach.
        dpt._check_tasks()
        return _job_var("MASTER_ADDR")

    @property
    def main_port(self):
        return int(_job_var("MASTER_PORT"))

    def world_size(self):
        return int(_job_var("WORLD_SIZE"))

    def global_rank(self):
        return int(_job_var("RANK"))

    def local_rank(self):
        return int(_job_var("LOCAL_RANK"))

    def node_rank(self):
        return int(_job_var("NODE_RANK"))

    def local_world_size(self):
        """The tasks of the job step on this node."""
        return int(_job_var("LOCAL_WORLD_SIZE"))

    def num_nodes(self):
        return int(_job_var("NUM_NODES"))

    def set_global_rank(self, rank):
        pass  # the job's, whatever Lightning computes from its own counts

    def set_world_size(self, size):
        # Lightning calls this from its strategy's set_world_ranks() when
        # the Trainer is made, before the launcher, the devices or the
        # process group are used: the moment to give the strategy the job's
        # counts where the script left them to Lightning.
        strategy = self._calling_strategy()
        if strategy is not None:
            self._adopt_job_size(strategy)

    def _calling_strategy(self):
        frame = sys._getframe(1)
        while frame is not None:
            obj = frame.f_locals.get("self")
            if getattr(obj, "cluster_environment", None) is self and \
                    hasattr(obj, "parallel_devices"):
                return obj
            frame = frame.f_back
        return None

    def _adopt_job_size(self, strategy):
        """The job's tasks per node and nodes, where the strategy has what
        Lightning chose by itself (devices="auto", num_nodes=1)."""
        devices = list(strategy.parallel_devices or [])
        nlocal, nnodes = self.local_world_size(), self.num_nodes()
        auto = strategy.accelerator.auto_device_count() if strategy.accelerator else 1
        if len(devices) != nlocal and len(devices) == auto:
            kind = devices[0].type if devices else "cpu"
            strategy.parallel_devices = self._devices(kind, nlocal)
        if strategy.num_nodes != nnodes and strategy.num_nodes == 1:
            strategy.num_nodes = nnodes

    @staticmethod
    def _devices(kind, nlocal):
        if kind != "cuda":
            return [torch.device(kind)] * nlocal
        visible = torch.cuda.device_count()
        if visible >= nlocal:  # every task sees the node's GPUs
            return [torch.device("cuda", i) for i in range(nlocal)]
        if visible == 1:  # each task sees its own (--dp-gpu-bind, --gpus-per-task)
            return [torch.device("cuda", 0)] * nlocal
        raise RuntimeError("DptrainEnvironment: %d tasks on this node see %d GPUs each: "
                           "give each task one GPU or all of the node's" % (nlocal, visible))

    def validate_settings(self, num_devices, num_nodes):
        nlocal, nnodes = self.local_world_size(), self.num_nodes()
        if num_devices != nlocal or num_nodes != nnodes:
            raise ValueError(
                "Trainer(devices=%d, num_nodes=%d) contradicts the job step: srun --dp-train "
                "started %d task%s on this node and %d node%s. Leave devices and num_nodes "
                "out (DptrainEnvironment takes them from the job) or set devices=%d, "
                "num_nodes=%d" % (num_devices, num_nodes, nlocal, "" if nlocal == 1 else "s",
                                  nnodes, "" if nnodes == 1 else "s", nlocal, nnodes))


def _check_world(trainer):
    """Every task of the job step in one Trainer. Lightning's strategy
    "auto" with one device a task (devices="auto" on CPUs, one GPU a task)
    is a single-device strategy that trains each task alone on its share
    of the batches, with no error: refuse it, naming the fix."""
    tasks = int(os.environ.get("WORLD_SIZE", "1"))
    if trainer.world_size == tasks:
        return
    raise RuntimeError(
        "DptrainCallback: the Trainer's %s runs %d process%s, but srun --dp-train started %d "
        "tasks: each would train alone on its share of the batches. Make the Trainer with "
        "strategy=\"ddp\" and plugins=[DptrainEnvironment()] (it takes the job's counts)" % (
            type(trainer.strategy).__name__, trainer.world_size,
            "" if trainer.world_size == 1 else "es", tasks))


class _Adapter:
    """A part of the Trainer's state as an object with state_dict() and
    load_state_dict(), for dptrain.torch.Checkpoint."""

    def __init__(self, get, put):
        self.state_dict, self.load_state_dict = get, put


def _callbacks_state(trainer, me):
    states = ((cb.state_key, cb.state_dict()) for cb in trainer.callbacks if cb is not me)
    return {key: sd for key, sd in states if sd}


def _load_callbacks_state(trainer, me, sd):
    for cb in trainer.callbacks:
        if cb is not me and cb.state_key in sd:
            cb.load_state_dict(sd[cb.state_key])


class DptrainCallback(_Callback):
    """Saves, stops and resumes a Trainer's fit with dptrain.torch.

    SAMPLER: the ElasticSampler of the training DataLoader (its
    ``batch_sampler``). CHECKPOINT: a dptrain.torch.Checkpoint to use
    (default: one made when the fit starts, with CKPT_OPTS, and closed when
    it ends). The state is what Lightning's ``ckpt_path=`` resume restores:
    the module, the optimizers, the LR schedulers, the precision plugin
    (GradScaler), the loops' progress (``trainer.global_step``, the epoch),
    the other callbacks' and the datamodule's state, and the sampler. One
    dptrain step is one training step: one optimizer step
    (``accumulate_grad_batches`` batches), or one batch under manual
    optimization."""

    def __init__(self, sampler=None, checkpoint=None, **ckpt_opts):
        if sampler is not None and not isinstance(sampler, dpt.ElasticSampler):
            raise TypeError("DptrainCallback: sampler must be a dptrain.torch.ElasticSampler, "
                            "not %s" % type(sampler).__name__)
        self.sampler = sampler
        self.ck = checkpoint
        self._own = checkpoint is None
        self._signals = tuple(ckpt_opts.pop("signals", (signal.SIGUSR1, signal.SIGTERM)))
        self._opts = ckpt_opts
        self._state = None
        self._mask = None  # the main thread's signal mask before the fit
        self.start = 0  # the step loaded (0: a new run)
        self.step = 0  # the last step trained
        self.stopped = False  # stopped at an agreed stop (walltime, preemption)

    # ---------------------------------------------------------------- state

    def _make_state(self, trainer, pl_module):
        state = {
            "model": pl_module,
            "optimizers": list(trainer.optimizers),
            "schedulers": [c.scheduler for c in trainer.lr_scheduler_configs],
            "precision": trainer.precision_plugin,
            "loops": trainer.fit_loop,
            "callbacks": _Adapter(lambda: _callbacks_state(trainer, self),
                                  lambda sd: _load_callbacks_state(trainer, self, sd)),
        }
        if trainer.datamodule is not None:
            state["datamodule"] = trainer.datamodule
        if self.sampler is not None:
            state["sampler"] = self.sampler
        return state

    def _check(self, trainer, pl_module):
        if self.sampler is None:
            return
        if getattr(trainer._accelerator_connector, "use_distributed_sampler", False):
            raise ValueError("DptrainCallback: the ElasticSampler shares the batches among "
                             "the ranks itself: make the Trainer with "
                             "use_distributed_sampler=False")
        if trainer.limit_train_batches not in (1.0, None):
            raise ValueError("DptrainCallback: limit_train_batches=%r ends Lightning's epochs "
                             "before the ElasticSampler's: leave it at 1.0" % (
                                 trainer.limit_train_batches,))
        k = 1 if not pl_module.automatic_optimization else trainer.accumulate_grad_batches
        if self.sampler.steps_per_epoch % k:
            raise ValueError(
                "DptrainCallback: accumulate_grad_batches=%d does not divide the epoch's %d "
                "batches: Lightning would step the optimizer on a shorter accumulation at "
                "the epoch's end. Choose a divisor of %d" % (
                    k, self.sampler.steps_per_epoch, self.sampler.steps_per_epoch))
        self.sampler.batches_per_step = k
        self.sampler.full_epoch_len = True  # Lightning counts an epoch's batches from 0
        # The DataLoader resumes mid-epoch through its ElasticSampler, which
        # Lightning does not see: its warning that it cannot is wrong here.
        warnings.filterwarnings("ignore", message="You're resuming from a checkpoint that "
                                "ended before the epoch ended")

    # ---------------------------------------------------------------- hooks

    def setup(self, trainer, pl_module, stage):
        if stage != "fit":
            return
        _check_world(trainer)
        if self.ck is None:
            # No signal handler of its own: on_train_start installs them
            # over Lightning's, which puts the previous ones back.
            self.ck = dpt.Checkpoint(signals=(), **self._opts)
        # Slurm signals every process of the step, DataLoader workers too,
        # and torch's workers die of SIGTERM, which ends the training with
        # them. Blocked in this (the main) thread, the stop signals are
        # blocked in every worker forked from it; the process still takes
        # them through its other threads (the coordinator's, gloo's), and
        # its handler runs in the main thread as ever.
        if self._mask is None:
            self._mask = signal.pthread_sigmask(signal.SIG_BLOCK, self._signals)

    def on_fit_start(self, trainer, pl_module):
        # Before Lightning makes the data iterator (its workers fetch ahead
        # with the sampler's position as it is then).
        self._check(trainer, pl_module)
        self._state = self._make_state(trainer, pl_module)
        self.start = self.step = self.ck.load(self._state) or 0
        if self.start and self.sampler is not None:
            self._finish_epoch(trainer)
        if trainer.max_steps and trainer.max_steps > 0:
            self.ck.total_steps = trainer.max_steps

    def _finish_epoch(self, trainer):
        """The loops' progress as loaded, made right for a restart. A step
        that ends an epoch is saved either within Lightning's last
        batch (a stop, a periodic save) or after the epoch's end (the save
        at the end of the fit). Lightning's restart finishes neither right:
        it trains one more batch in that epoch, or counts the next epoch's
        batches from the last one's end. The loops become what they are at
        the next epoch's start in a run that did not stop: the rest of the
        batch and of the epoch done (the epoch's LR schedulers step as they
        did after the save in the run that stopped), nothing to restart."""
        loop = trainer.fit_loop
        epoch_loop = loop.epoch_loop
        batches, epochs = epoch_loop.batch_progress, loop.epoch_progress
        if batches.current.ready < self.sampler.steps_per_epoch:
            # Within an epoch: Lightning's own restart, from the state of a
            # save within the batch. The fit's end (max_steps) also ends
            # the epoch in Lightning's count: not when its batches go on.
            if epochs.current.processed == epochs.current.ready:
                for counts in (epochs.total, epochs.current):
                    counts.processed -= 1
                    counts.completed -= 1
            return
        if batches.total.completed < batches.total.processed:
            batches.increment_completed()
            epoch_loop._batches_that_stepped += 1
        if epochs.total.processed < epochs.total.ready:
            epochs.increment_processed()
            epoch_loop.update_lr_schedulers("epoch", update_plateau_schedulers=False)
            epochs.increment_completed()
        batches.reset_on_run()
        epoch_loop.scheduler_progress.reset_on_run()
        epoch_loop.automatic_optimization.optim_progress.reset_on_run()
        # The loop base class's setter: FitLoop's keeps max_steps runs
        # restarting.
        base = next(k for k in type(loop).__mro__[1:] if "restarting" in vars(k))
        vars(base)["restarting"].fset(loop, False)

    def on_train_start(self, trainer, pl_module):
        # Lightning's SIGTERM handler broadcasts from within the handler and
        # makes every rank leave at its next step, before an agreed stop
        # can commit: this callback's request to stop at an agreed step
        # replaces it until Lightning's teardown puts the old ones back.
        handler = self.ck._on_signal
        for sig in self._signals:
            signal.signal(sig, handler)

    def on_train_epoch_start(self, trainer, pl_module):
        # Lightning may make a new data iterator for this epoch (and drop
        # what the last one fetched ahead), and its set_epoch() follows its
        # own count of epochs: the sampler goes on after the last step
        # trained, whatever they did.
        if self.sampler is not None:
            self.sampler.seek_step(self.step)

    def _step_boundary(self, trainer, pl_module):
        if not pl_module.automatic_optimization:
            return True
        return not trainer.fit_loop.epoch_loop._should_accumulate()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not self._step_boundary(trainer, pl_module):
            return
        self.step += 1
        if self.ck.step(self.step, self._state):
            self.stopped = True
            # Stop even where min_steps/min_epochs are not met: the step is
            # committed and the job is being stopped; the next run goes on.
            trainer.fit_loop.epoch_loop.min_steps = None
            trainer.fit_loop.min_epochs = None
            trainer.should_stop = True

    def on_train_end(self, trainer, pl_module):
        if self.step > self.start and self.ck.last_saved != self.step:
            self.ck.save(self.step, self._state)
        self.ck.wait()

    def teardown(self, trainer, pl_module, stage):
        if stage == "fit":
            self._close()

    def on_exception(self, trainer, pl_module, exception):
        # Lightning calls no teardown hook after an exception: nothing is
        # saved, the save in flight (if any) finishes, the run is left.
        self._close()

    def _close(self):
        try:
            if self._own and self.ck is not None:
                self.ck.close()
                self.ck = None
        finally:
            self._state = None
            if self._mask is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, self._mask)
                self._mask = None

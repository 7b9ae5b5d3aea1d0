"""bench/torch_ckpt.py: dptrain.torch's checkpoints of a PyTorch state
(a model and Adam's moments, about --gib GiB, held by every rank as
under DDP) against what PyTorch and Lightning users do today, in the
same run, on the same file system. The peers:

- torch.save of the whole state by rank 0 into one file, fsync'd (what
  most DDP scripts do: every rank waits for it at the next collective),
  and torch.load of it on every rank;
- Lightning's own Trainer.save_checkpoint (rank 0 torch.saves the
  whole state, every rank waits at its barrier), inside a real
  Trainer.fit with DDP over gloo; Lightning does not fsync, so its
  durable time adds rank 0's fsync of the file;
- torch.distributed.checkpoint (DCP): async_save with the fastest
  staging torch 2 offers on this machine (a checkpoint process per rank,
  AsyncCheckpointerType.PROCESS, fed through shared memory by one
  DefaultStager kept across saves so that its staging buffers are
  reused; pinned memory where CUDA is), each rank writing a share of
  the replicated state, fsync'd; staged in the call and staged in a
  thread, the better of the two the peer's figure; and DCP's load at
  another world size: saved by --ranks processes, loaded by
  --load-ranks.

dptrain.torch is measured the same way: Checkpoint.save (the stall),
save and wait (committed: durable), Checkpoint.load at the same world
size and at --load-ranks, and the cost of Checkpoint.step when no save
is due, both per call and in a synthetic training loop of 20 ms steps.
The DCP and dptrain saves alternate, so that both see the same load.

Run from the build tree (it starts a coordinator and the ranks for each
world size itself):

    /opt/dptrain-torch2/bin/python bench/torch_ckpt.py [--ranks 4] [--load-ranks 2] [--gib 1]

With a torch without DCP's async_save (Debian's torch 1.13) or without
Lightning, those peers are skipped and the summary says why. It prints
one summary line, every figure and every ratio:

    torch_ckpt ranks=4 state_gib=1.00 torch_save_s=... dcp_stall_s=... dcp_stall_ratio=...

then one line per target, met or not.
"""
import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.dirname(here)

# (ratio, its target, what it compares): the targets of issue 23 and of
# the first torch_ckpt figures (doc/PERFORMANCE.md, "torch_ckpt").
TARGETS = [
    ("stall_ratio", 0.1, "dptrain's stall / torch.save's"),
    ("dcp_stall_ratio", 1.0, "dptrain's stall / DCP async_save's"),
    ("dcp_durable_ratio", 1.0, "dptrain's commit / DCP's durable save"),
    ("dcp_reload_ratio", 1.0, "dptrain's load / DCP's, at --load-ranks, page cache warm"),
    ("dcp_reload_cold_ratio", 1.0, "dptrain's load / DCP's, at --load-ranks, "
     "page cache dropped"),
    ("step_cost_pct", 1.0, "Checkpoint.step's share of a 20 ms step, %"),
]


def run_world(args, work, nranks, phase):
    """Starts a coordinator for NRANKS and the ranks of PHASE; returns
    rank 0's results."""
    secret = secrets.token_hex(32)
    coord = subprocess.Popen(
        [os.path.join(top, "coordinator", "dptrain-coordinator"), "--world-size", str(nranks),
         "--bind", "tcp://127.0.0.1:*", "--log-level", "warn"],
        env=dict(os.environ, DPTRAIN_SECRET=secret), stdout=subprocess.PIPE, text=True)
    endpoint = coord.stdout.readline().strip()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, DPTRAIN_COORDINATOR=endpoint, DPTRAIN_SECRET=secret,
               DPTRAIN_CKPT_URI="file://" + work, DPTRAIN_RUN="bench",
               DPTRAIN_LIBRARY=os.environ.get("DPTRAIN_LIBRARY",
                                              os.path.join(top, "worker", ".libs", "libdptrain.so")),
               PYTHONPATH=os.path.join(top, "worker", "python"),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(nranks),
               LOCAL_WORLD_SIZE=str(nranks), OMP_NUM_THREADS="1")
    # No periodic save may fall into the timed steps.
    env.pop("DPTRAIN_CKPT_EVERY", None)
    ranks = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--work", work,
                               "--phase", phase] + sys.argv[1:],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r), SLURM_PROCID=str(r),
                                       SLURM_LOCALID=str(r)),
                              stdout=subprocess.PIPE, text=True)
             for r in range(nranks)]
    outs = [p.communicate()[0] for p in ranks]
    coord.wait(timeout=30)
    if any(p.returncode for p in ranks):
        shutil.rmtree(work, ignore_errors=True)
        sys.exit("a rank of the %s phase failed:\n%s" % (phase, "\n".join(outs)))
    return json.loads(outs[0].strip().splitlines()[-1])


def ratio(res, name, num, den):
    if num in res and den in res:
        res[name] = res[num] / res[den]


def launch(args):
    """Saves at --ranks, loads at --load-ranks; prints the summary."""
    work = tempfile.mkdtemp(prefix="torch_ckpt.", dir=args.dir)
    res = run_world(args, work, args.ranks, "save")
    res.update(run_world(args, work, args.load_ranks, "load"))
    shutil.rmtree(work, ignore_errors=True)
    ratio(res, "stall_ratio", "dpt_stall_s", "torch_save_s")
    ratio(res, "commit_ratio", "dpt_commit_s", "torch_save_s")
    ratio(res, "load_ratio", "dpt_load_s", "torch_load_s")
    ratio(res, "dcp_stall_ratio", "dpt_stall_s", "dcp_stall_s")
    ratio(res, "dcp_durable_ratio", "dpt_commit_s", "dcp_durable_s")
    ratio(res, "dcp_reload_ratio", "dpt_reload_s", "dcp_reload_s")
    ratio(res, "dcp_reload_cold_ratio", "dpt_reload_cold_s", "dcp_reload_cold_s")
    ratio(res, "lightning_stall_ratio", "dpt_stall_s", "lightning_stall_s")
    ratio(res, "lightning_durable_ratio", "dpt_commit_s", "lightning_durable_s")
    skipped = {k: res.pop(k) for k in list(res) if k.endswith("_skipped")}
    print("torch_ckpt " + " ".join(
        "%s=%s" % (k, ("%.4g" % v) if isinstance(v, float) else v) for k, v in res.items()))
    for k, why in skipped.items():
        print("torch_ckpt: %s skipped: %s" % (k[:-len("_skipped")], why))
    for name, target, what in TARGETS:
        if name in res:
            print("torch_ckpt: %s = %.3g, target <= %g (%s): %s" % (
                name, res[name], target, what, "met" if res[name] <= target else "NOT met"))
        else:
            print("torch_ckpt: %s: not measured (%s)" % (name, what))


# ------------------------------------------------------------------ ranks

def build_state(args, seed):
    """The model and Adam with its moments; square layers, so that the
    parameters are a third of the state and the moments the rest."""
    import torch

    width = args.width
    layers = max(1, round(args.gib * 2**30 / 12 / (width * width + width)))
    torch.manual_seed(seed)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()  # creates the moments
    return model, opt


def state_tensors(model, opt):
    """Every tensor of the state under a name that does not depend on
    how it was saved."""
    import torch

    out = dict(("model." + k, t) for k, t in model.state_dict().items())
    for i, s in opt.state_dict()["state"].items():
        for k, t in s.items():
            if torch.is_tensor(t):
                out["optim.%d.%s" % (i, k)] = t
    return out


def sums(model, opt):
    import torch

    return {k: t.sum(dtype=torch.float64).item() for k, t in state_tensors(model, opt).items()}


def slowest(best):
    """The slowest rank's value of each (a rank's best of its tries)."""
    import torch
    import torch.distributed as dist

    t = torch.tensor(best, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.tolist()


def dcp_missing():
    """Why DCP's process-based async_save cannot be measured with this
    torch, or None."""
    import torch

    try:
        import torch.distributed.checkpoint as dcp  # noqa: F401
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions  # noqa: F401
        from torch.distributed.checkpoint.state_dict import get_state_dict  # noqa: F401
        from torch.distributed.checkpoint.state_dict_saver import (  # noqa: F401
            AsyncCheckpointerType, AsyncSaveResponse)
    except ImportError as e:
        return ("torch %s has no DCP async_save with a process and a DefaultStager (%s); "
                "run it with the torch 2 environment, /opt/dptrain-torch2/bin/python"
                % (torch.__version__, e))
    return None


def lightning_module():
    """Lightning's pytorch package, or the reason it is missing."""
    try:
        import lightning.pytorch as pl
        return pl, None
    except ImportError as e:
        first = e
    try:
        import pytorch_lightning as pl
        return pl, None
    except ImportError:
        return None, ("neither lightning nor pytorch_lightning imports in this Python "
                      "(%s); run it with /opt/dptrain-torch2/bin/python" % first)


def torch_save_peer(args, model, opt, res):
    """What users do today: rank 0 saves everything, every rank waits;
    then every rank loads that file."""
    import torch
    import torch.distributed as dist

    rank = dist.get_rank()
    path = os.path.join(args.work, "torch.pt")
    best = None
    for _ in range(args.saves):
        dist.barrier()
        t0 = time.perf_counter()
        if rank == 0:
            with open(path, "wb") as f:
                torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, f)
                f.flush()
                os.fsync(f.fileno())
        dist.barrier()
        best = min(best or 1e9, time.perf_counter() - t0)
    res["torch_save_s"] = best
    dist.barrier()
    t0 = time.perf_counter()
    sd = torch.load(path)
    model.load_state_dict(sd["model"])
    opt.load_state_dict(sd["optim"])
    del sd
    dist.barrier()
    res["torch_load_s"] = time.perf_counter() - t0
    if rank == 0:
        os.unlink(path)


class DcpSaver:
    """DCP's async_save as its documentation recommends for the least
    stall: one stager for every save (its shared-memory copies are made
    once and reused), a checkpoint process per rank writing while the
    training goes on."""

    def __init__(self, use_async_staging):
        from torch.distributed.checkpoint.staging import DefaultStager, StagingOptions

        # Pinned memory needs CUDA (the stager drops it with a warning
        # otherwise); non-blocking copies need an accelerator.
        import torch
        cuda = torch.cuda.is_available()
        self.stager = DefaultStager(StagingOptions(
            use_pinned_memory=cuda, use_shared_memory=True,
            use_async_staging=use_async_staging, use_non_blocking_copy=cuda))

    def save(self, model, opt, path):
        """Returns (the stall, a future of the write)."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict
        from torch.distributed.checkpoint.state_dict_saver import (
            AsyncCheckpointerType, AsyncSaveResponse)

        t0 = time.perf_counter()
        msd, osd = get_state_dict(model, opt)
        got = dcp.async_save({"model": msd, "optim": osd}, checkpoint_id=path,
                             async_checkpointer_type=AsyncCheckpointerType.PROCESS,
                             async_stager=self.stager)
        if isinstance(got, AsyncSaveResponse):
            # Staged in a thread: the optimizer may change the state only
            # once the copy is done, which is the training's stall.
            got.staging_completion.result()
            got = got.upload_completion
        return time.perf_counter() - t0, got

    def close(self):
        self.stager.close()


def dcp_and_dpt_saves(args, model, opt, state, ck, res):
    """DCP's async_save and dptrain's save, alternately, for each of
    DCP's two stagings in turn (one stager's memory at a time: two would
    add the whole state again in shared memory on every rank): the stall,
    and the time until the step is durable, best of --saves after a first
    save that sets up (DCP's process and staging memory, dptrain's
    snapshot buffers)."""
    import torch.distributed as dist

    rank = dist.get_rank()
    why = dcp_missing()
    variants = {None: None}
    if why:
        res["dcp_skipped"] = why
    else:
        variants = {"dcp_sync_staging": False, "dcp_thread_staging": True}
    times = {k: ([], []) for k in variants if k}
    times["dpt"] = ([], [])
    step, last = 0, None
    for name, use_async_staging in variants.items():
        saver = DcpSaver(use_async_staging) if name else None
        for i in range(args.saves + 1):
            if saver:
                path = os.path.join(args.work, "%s.%d" % (name, i))
                dist.barrier()
                t0 = time.perf_counter()
                stall, fut = saver.save(model, opt, path)
                fut.result()
                dist.barrier()
                if i:
                    times[name][0].append(stall)
                    times[name][1].append(time.perf_counter() - t0)
                if rank == 0 and last:
                    shutil.rmtree(last, ignore_errors=True)
                last = path
            # dptrain.torch: the stall is the time in save(); durable,
            # save() and wait(): the step is committed.
            step += 1
            dist.barrier()
            t0 = time.perf_counter()
            ck.save(step, state)
            t1 = time.perf_counter()
            ck.wait()
            dist.barrier()
            if i:
                times["dpt"][0].append(t1 - t0)
                times["dpt"][1].append(time.perf_counter() - t0)
        if saver:
            saver.close()
    for name, (stall, durable) in times.items():
        s, d = slowest([min(stall), min(durable)])
        if name == "dpt":
            res["dpt_stall_s"], res["dpt_commit_s"] = s, d
        else:
            res[name + "_stall_s"], res[name + "_durable_s"] = s, d
    if not why:  # the peer: the better staging of the two, for each figure
        res["dcp_stall_s"] = min(res[k + "_stall_s"] for k in variants)
        res["dcp_durable_s"] = min(res[k + "_durable_s"] for k in variants)
    if last and rank == 0:
        os.rename(last, os.path.join(args.work, "dcp"))


def lightning_peer(args, model, opt, res):
    """Trainer.save_checkpoint from a callback at the end of each step of
    a real Trainer.fit (DDP over gloo, as ModelCheckpoint saves): the
    stall is the call (rank 0 writes, every rank waits at its barrier);
    durable adds rank 0's fsync, which Lightning does not do."""
    import torch
    import torch.distributed as dist

    pl, why = lightning_module()
    if why:
        res["lightning_skipped"] = why
        return
    from importlib import import_module
    envs = import_module(pl.__name__ + ".plugins.environments")
    strategies = import_module(pl.__name__ + ".strategies")
    rank = dist.get_rank()
    path = os.path.join(args.work, "lightning.ckpt")
    stall, durable = [], []

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = model
            # The saves are what is measured: no forward, backward or
            # gradient all-reduce in the steps.
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            return None

        def configure_optimizers(self):
            return opt

    class Saves(pl.Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            dist.barrier()
            t0 = time.perf_counter()
            trainer.save_checkpoint(path, weights_only=False)
            t1 = time.perf_counter()
            if rank == 0:
                fd = os.open(path, os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
            dist.barrier()
            if batch_idx:  # the first save is the setup's
                stall.append(t1 - t0)
                durable.append(time.perf_counter() - t0)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(args.saves + 1)),
                                       batch_size=1)
    trainer = pl.Trainer(
        accelerator="cpu", devices=dist.get_world_size(), num_nodes=1,
        strategy=strategies.DDPStrategy(process_group_backend="gloo"),
        # Manual optimization without optimizer steps never counts a
        # global step: one epoch of --saves + 1 batches bounds the fit.
        plugins=[envs.LightningEnvironment()], max_epochs=1,
        use_distributed_sampler=False, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
        callbacks=[Saves()])
    trainer.fit(Module(), data)
    res["lightning_stall_s"], res["lightning_durable_s"] = slowest([min(stall), min(durable)])
    dist.barrier()
    if rank == 0:
        os.unlink(path)


def step_cost(args, ck, state, res):
    """Checkpoint.step with no save due: per call, back to back, and in a
    training loop of synthetic 20 ms steps (the host waits 20 ms, as it
    does while an accelerator computes, then a small gloo all-reduce, as
    DDP's, keeps the ranks in step), in alternating blocks: plain, with
    the call, and with what a script without dptrain does to agree on a
    stop at every step (an all-reduce of one flag); the median of the
    blocks' means, and the call's own time inside the loop."""
    import torch
    import torch.distributed as dist

    step = 1000
    saved = ck.last_saved
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(args.steps):
        ck.step(step + i, state)
    res["step_us"] = (time.perf_counter() - t0) / args.steps * 1e6
    step += args.steps
    grad, flag = torch.zeros(4096), torch.zeros(1, dtype=torch.int32)
    modes = ["plain", "dpt", "allreduce"]
    per = {m: [] for m in modes}
    calls = []
    for b in range(args.step_blocks):
        for mode in modes[b % 3:] + modes[:b % 3]:
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(args.block_steps):
                time.sleep(args.step_ms / 1e3)
                dist.all_reduce(grad)
                if mode == "dpt":
                    t1 = time.perf_counter()
                    ck.step(step, state)
                    calls.append(time.perf_counter() - t1)
                elif mode == "allreduce":
                    dist.all_reduce(flag)
                step += 1
            per[mode].append((time.perf_counter() - t0) / args.block_steps)
    if ck.last_saved != saved:
        raise RuntimeError("a save fell into the timed steps (DPTRAIN_CKPT_EVERY?)")
    # Each call waits for the last rank to vote: its time on the rank
    # that arrives last is the round trip alone, the rest is the ranks'
    # skew, which the next all-reduce would wait for without the call.
    mine = torch.tensor(calls, dtype=torch.float64)
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(every, mine)
    last = sorted(torch.stack(every).min(dim=0).values.tolist())
    calls.sort()
    plain, dpt, flagged, call50, call90 = slowest(
        [statistics.median(per[m]) for m in modes] +
        [calls[len(calls) // 2], calls[len(calls) * 9 // 10]])
    res["loop_call_last_p50_us"] = last[len(last) // 2] * 1e6
    res["step_ms"] = args.step_ms
    res["loop_step_ms"] = plain * 1e3
    res["loop_step_dpt_ms"] = dpt * 1e3
    res["loop_step_allreduce_ms"] = flagged * 1e3
    res["loop_call_p50_us"] = call50 * 1e6
    res["loop_call_p90_us"] = call90 * 1e6
    res["step_cost_pct"] = (dpt - plain) / plain * 100
    res["allreduce_cost_pct"] = (flagged - plain) / plain * 100


def save_phase(args):
    import torch
    import torch.distributed as dist

    import dptrain.torch as dpt

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    model, opt = build_state(args, seed=0)
    state = {"model": model, "optim": opt}
    nbytes = sum(t.numel() * t.element_size() for t in state_tensors(model, opt).values())
    res = {"torch": torch.__version__, "ranks": world, "state_gib": nbytes / 2**30}
    if rank == 0:  # what the load phase must find
        with open(os.path.join(args.work, "sums.json"), "w") as f:
            json.dump(sums(model, opt), f)

    torch_save_peer(args, model, opt, res)
    ck = dpt.Checkpoint(signals=())
    dcp_and_dpt_saves(args, model, opt, state, ck, res)
    dist.barrier()
    t0 = time.perf_counter()
    ck.load(state)
    dist.barrier()
    res["dpt_load_s"] = time.perf_counter() - t0
    lightning_peer(args, model, opt, res)
    step_cost(args, ck, state, res)
    ck.close()
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(res), flush=True)


def load_phase(args):
    """Both checkpoints, saved by --ranks processes, loaded by this
    world's: every rank gets the whole state (DDP), checked against the
    saved state's sums; the state is zeroed between loads."""
    import torch
    import torch.distributed as dist

    import dptrain.torch as dpt

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    model, opt = build_state(args, seed=1)
    state = {"model": model, "optim": opt}
    with open(os.path.join(args.work, "sums.json")) as f:
        want = json.load(f)
    dcp_dir = os.path.join(args.work, "dcp")
    have_dcp = os.path.isdir(dcp_dir)
    ck = dpt.Checkpoint(signals=())
    res = {"load_ranks": world}

    def dcp_load():
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        msd, osd = get_state_dict(model, opt)
        sd = {"model": msd, "optim": osd}
        dcp.load(sd, checkpoint_id=dcp_dir)
        set_state_dict(model, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])

    def timed(key, mode, load):
        with torch.no_grad():
            for t in state_tensors(model, opt).values():
                t.zero_()
        dist.barrier()
        if mode == "cold" and rank == 0:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3\n")
        dist.barrier()
        t0 = time.perf_counter()
        load()
        dist.barrier()
        best[key] = min(best.get(key, 1e9), time.perf_counter() - t0)
        got = sums(model, opt)
        if got != want:
            bad = [k for k in want if got.get(k) != want[k]]
            raise RuntimeError("%s: %d tensors differ from the saved state, %s first"
                               % (key, len(bad), bad[:1]))

    loaders = {"dpt": lambda: ck.load(state)}
    if have_dcp:
        loaders["dcp"] = dcp_load
    # Warm: what the page cache holds of the files (DCP writes through
    # it, dptrain with O_DIRECT); cold: the cache dropped first, as on a
    # node that did not write them (a requeue elsewhere), root only.
    modes = ["warm"]
    if os.access("/proc/sys/vm/drop_caches", os.W_OK):
        modes.append("cold")
    else:
        res["cold_load_skipped"] = "only root can drop the page cache"
    best = {}
    for mode in modes:  # the warm ones while DCP's files are cached
        for _ in range(args.loads):
            for name, load in loaders.items():
                key = "%s_reload%s_s" % (name, "_cold" if mode == "cold" else "")
                timed(key, mode, load)
    names = list(best)
    for name, v in zip(names, slowest([best[k] for k in names])):
        res[name] = v
    ck.close()
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(res), flush=True)


def main():
    ap = argparse.ArgumentParser(description="dptrain.torch checkpoints against torch.save, "
                                 "Lightning's save_checkpoint and DCP's async_save")
    ap.add_argument("--ranks", type=int, default=4, help="the world that saves")
    ap.add_argument("--load-ranks", type=int, default=2, help="the world that loads (resharded)")
    ap.add_argument("--gib", type=float, default=1.0, help="state size (model + Adam)")
    ap.add_argument("--width", type=int, default=4096, help="the layers' width (smaller: "
                    "a smaller state for a quick try)")
    ap.add_argument("--saves", type=int, default=3, help="timed saves of each kind (best kept)")
    ap.add_argument("--loads", type=int, default=2, help="timed loads of each kind at "
                    "--load-ranks (best kept)")
    ap.add_argument("--steps", type=int, default=2000, help="Checkpoint.step calls timed")
    ap.add_argument("--step-ms", type=float, default=20.0, help="the synthetic step's time")
    ap.add_argument("--step-blocks", type=int, default=10, help="blocks of synthetic steps "
                    "of each kind, alternating")
    ap.add_argument("--block-steps", type=int, default=25, help="synthetic steps per block")
    ap.add_argument("--dir", default=None, help="where the checkpoints go (default $TMPDIR)")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank is None:
        launch(args)
    elif args.phase == "save":
        save_phase(args)
    else:
        load_phase(args)


if __name__ == "__main__":
    main()

"""PyTorch on a real GPU through dptrain (one case per run, for
tests/gpu/torch.sh, which starts the coordinator and sets the environment
that `srun --dp-train` sets for one task).

    python3 torch_cuda.py CASE

Cases:
  binding     CUDA tensors through the ctypes binding: allreduce (sum, avg),
              broadcast and allgather of every dtype on the NCCL backend,
              and a CPU tensor staged through the device, against results
              computed with torch on the host
  checkpoint  a model and Adam's state on the GPU (Adam's step counters
              on the CPU: host and device tensors in one snapshot) saved
              through dptrain.Checkpoint, overwritten, loaded back: every
              byte equal
  torch       the same through dptrain.torch (issue 12's API), Adam's state
              rebuilt from the checkpoint by a fresh optimizer
  ddp         torch.distributed with nccl, env://, DDP on cuda:LOCAL_RANK,
              beside a dptrain context on the NCCL backend in the same
              process
  lightning   a tiny Lightning Trainer on the GPU with the callback of
              dptrain.lightning

Exit status 0: passed; 77: cannot run here (the last line says why); any
other: failed (the output says what differed).
"""
import os
import sys

import torch

SKIP = 77


def skip(reason):
    print(reason)
    sys.exit(SKIP)


def fail(msg):
    print("FAIL " + msg)
    sys.exit(1)


def small_ints(n, rank, key, dtype, device):
    """Exact in every dtype: [0, 15] for uint8, [-8, 7] otherwise."""
    g = torch.Generator().manual_seed(key * 1000 + rank)
    lo = 0 if dtype == torch.uint8 else -8
    return torch.randint(lo, lo + 16, (n,), generator=g).to(dtype).to(device)


DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16,
          torch.int32, torch.int64, torch.uint8]


def case_binding():
    import dptrain

    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    checks = 0
    with dptrain.init() as ctx:
        if ctx.backend != "nccl":
            fail("backend is %s, not nccl" % ctx.backend)
        r, w = ctx.rank, ctx.world_size
        for k, dt in enumerate(DTYPES):
            for n in (1, 1001, 1 << 20):
                key = k * 10 + n % 7
                x = small_ints(n, r, key, dt, dev)
                want = sum(small_ints(n, q, key, dt, "cpu").to(torch.float64)
                           for q in range(w))
                y = torch.empty_like(x)
                ctx.allreduce(x, y)
                torch.cuda.synchronize()
                if not torch.equal(y.cpu(), want.to(dt)):
                    fail("allreduce sum %s %d" % (dt, n))
                if dt.is_floating_point:
                    ctx.allreduce(x, op="avg")  # in place
                    tol = 1e-2 if dt in (torch.bfloat16, torch.float16) else 1e-6
                    if not torch.allclose(x.cpu().to(torch.float64), want / w,
                                          atol=tol, rtol=tol):
                        fail("allreduce avg %s %d" % (dt, n))
                b = small_ints(n, r, key + 1, dt, dev)
                ctx.broadcast(b, root=w - 1)
                if not torch.equal(b.cpu(), small_ints(n, w - 1, key + 1, dt, "cpu")):
                    fail("broadcast %s %d" % (dt, n))
                g = torch.empty(n * w, dtype=dt, device=dev)
                ctx.allgather(small_ints(n, r, key + 2, dt, dev), g)
                want_g = torch.cat([small_ints(n, q, key + 2, dt, "cpu")
                                    for q in range(w)])
                if not torch.equal(g.cpu(), want_g):
                    fail("allgather %s %d" % (dt, n))
                checks += 4 if dt.is_floating_point else 3
        # A CPU tensor: staged through device memory by the backend.
        h = torch.arange(4099, dtype=torch.float32)
        ctx.allreduce(h)
        if not torch.equal(h, torch.arange(4099, dtype=torch.float32) * w):
            fail("allreduce of a CPU tensor (staged)")
        checks += 1
    print("binding ok checks=%d rank=%d world=%d" % (checks, r, w))


def model_and_adam(dev, seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    return model, opt


def train(model, opt, dev, steps):
    g = torch.Generator(device="cpu").manual_seed(5)
    for _ in range(steps):
        x = torch.randn(32, 64, generator=g).to(dev)
        y = torch.randint(0, 10, (32,), generator=g).to(dev)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    torch.cuda.synchronize()


def flat_state(model, opt):
    """Every tensor of the model and of Adam's state, by name."""
    out = {"model." + k: v for k, v in model.state_dict().items()}
    for i, st in opt.state_dict()["state"].items():
        for k, v in st.items():
            if torch.is_tensor(v):
                out["adam.%d.%s" % (i, k)] = v
    return out


def case_checkpoint():
    import dptrain

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    model, opt = model_and_adam(dev, 1)
    train(model, opt, dev, 3)
    state = flat_state(model, opt)
    where = sorted({str(v.device) for v in state.values()})
    saved = {k: v.detach().clone().cpu() for k, v in state.items()}
    with dptrain.init() as ctx:
        with dptrain.Checkpoint(ctx) as ck:
            for k, v in state.items():
                ck.register(k, v)
            ck.save(3, sample_cursor=96, user=b"gpu")
            ck.wait()
            with torch.no_grad():
                for v in state.values():
                    v.zero_()
            torch.cuda.synchronize()
            info = ck.load()
            torch.cuda.synchronize()
    if info is None or info.step != 3 or info.sample_cursor != 96:
        fail("load found %r, want step 3 cursor 96" % (info,))
    for k, v in state.items():
        if not torch.equal(v.cpu(), saved[k]):
            fail("%s differs after the load" % k)
    # Training goes on from the loaded state exactly as from the saved one.
    ref_model, ref_opt = model_and_adam(dev, 1)
    train(ref_model, ref_opt, dev, 3)
    train(ref_model, ref_opt, dev, 2)
    train(model, opt, dev, 2)
    for (k, a), b in zip(ref_model.state_dict().items(), model.state_dict().values()):
        if not torch.equal(a, b):
            fail("%s differs two steps after the load" % k)
    print("checkpoint ok tensors=%d devices=%s" % (len(state), ",".join(where)))


def case_torch():
    try:
        import dptrain.torch as dpt
    except ImportError as e:
        skip("dptrain.torch has not landed (import dptrain.torch: %s)" % e)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    model, opt = model_and_adam(dev, 2)
    train(model, opt, dev, 3)
    want_model = {k: v.clone().cpu() for k, v in model.state_dict().items()}
    want_opt = flat_state(model, opt)
    want_opt = {k: v.clone().cpu() for k, v in want_opt.items() if k.startswith("adam.")}
    ck = dpt.Checkpoint()
    ck.save(3, {"model": model, "optim": opt})
    ck.wait()
    # A fresh model and an optimizer without state: the load builds it.
    model2, opt2 = model_and_adam(dev, 99)
    step = ck.load({"model": model2, "optim": opt2})
    ck.close()
    if step != 3:
        fail("dptrain.torch load returned %r, want 3" % (step,))
    for k, v in model2.state_dict().items():
        if v.device != dev or not torch.equal(v.cpu(), want_model[k]):
            fail("model %s differs after the load (device %s)" % (k, v.device))
    got_opt = {k: v.cpu() for k, v in flat_state(model2, opt2).items()
               if k.startswith("adam.")}
    if sorted(got_opt) != sorted(want_opt):
        fail("Adam's state has %s, want %s" % (sorted(got_opt), sorted(want_opt)))
    for k, v in got_opt.items():
        if not torch.equal(v, want_opt[k]):
            fail("%s differs after the load" % k)
    print("torch ok step=%d tensors=%d" % (step, len(want_model) + len(want_opt)))


def case_ddp():
    import torch.distributed as dist

    import dptrain

    local = int(os.environ["LOCAL_RANK"])
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    if (rank, world) != (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])):
        fail("process group rank %d of %d, environment says %s of %s"
             % (rank, world, os.environ["RANK"], os.environ["WORLD_SIZE"]))
    t = torch.full((8,), float(rank + 1), device=dev)
    dist.all_reduce(t)
    if t[0].item() != world * (world + 1) / 2:
        fail("all_reduce gave %s" % t[0].item())
    torch.manual_seed(0)
    ref = torch.nn.Linear(16, 4).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Linear(16, 4).to(dev), device_ids=[local])
    ddp.module.load_state_dict(ref.state_dict())
    x = torch.randn(8, 16, device=dev)
    ddp(x).square().sum().backward()
    ref(x).square().sum().backward()
    if not torch.allclose(ddp.module.weight.grad, ref.weight.grad):
        fail("DDP's gradient differs from the plain module's")
    # dptrain's own NCCL communicator beside torch's, in one process.
    with dptrain.init() as ctx:
        y = torch.ones(1024, device=dev)
        ctx.allreduce(y)
        if not torch.equal(y, torch.full_like(y, float(ctx.world_size))):
            fail("dptrain allreduce beside torch.distributed")
        backend = ctx.backend
    dist.destroy_process_group()
    print("ddp ok rank=%d world=%d device=%s dptrain=%s"
          % (rank, world, torch.cuda.get_device_name(dev), backend))


def case_lightning():
    try:
        import dptrain.lightning as dl
    except ImportError as e:
        skip("dptrain.lightning has not landed (import dptrain.lightning: %s)" % e)
    try:
        import lightning.pytorch as pl
    except ImportError:
        try:
            import pytorch_lightning as pl
        except ImportError as e:
            skip("Lightning is not importable: %s" % e)
    callbacks = [v for v in vars(dl).values()
                 if isinstance(v, type) and issubclass(v, pl.Callback)
                 and v.__module__.startswith("dptrain")]
    if not callbacks:
        fail("dptrain.lightning defines no Lightning Callback")

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Linear(8, 1)

        def training_step(self, batch, _):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-2)

    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 8, generator=g),
                                          torch.randn(64, 1, generator=g))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    trainer = pl.Trainer(accelerator="gpu", devices=1, max_steps=6,
                         callbacks=[callbacks[0]()], logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(Tiny(), loader)
    if trainer.global_step != 6:
        fail("the Trainer stopped at step %d, want 6" % trainer.global_step)
    print("lightning ok callback=%s steps=%d" % (callbacks[0].__name__,
                                                  trainer.global_step))


CASES = {"binding": case_binding, "checkpoint": case_checkpoint,
         "torch": case_torch, "ddp": case_ddp, "lightning": case_lightning}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: torch_cuda.py %s" % "|".join(CASES), file=sys.stderr)
        sys.exit(2)
    if not torch.cuda.is_available():
        skip("torch %s sees no CUDA device" % torch.__version__)
    CASES[sys.argv[1]]()

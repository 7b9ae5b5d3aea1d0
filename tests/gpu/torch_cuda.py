"""PyTorch on a real GPU through dptrain (one case per run, for
tests/gpu/torch.sh, which starts the coordinator and sets the environment
that `srun --dp-train` sets for one task).

    python3 torch_cuda.py CASE

Cases:
  binding     CUDA tensors through the ctypes binding: allreduce (sum; avg
              of float and complex), broadcast and allgather of every torch
              dtype dptrain has but the unsigned 16 to 64-bit ones (torch's
              support of those is partial; gpu_coll covers them) on the
              NCCL backend, int16 reductions refused with DPT_ENOTSUP, and
              a CPU tensor staged through the device, against results
              computed with torch on the host
  checkpoint  a model and Adam's state on the GPU (Adam's step counters
              on the CPU: host and device tensors in one snapshot) saved
              through dptrain.Checkpoint, overwritten, loaded back: every
              byte equal
  torch       a model and Adam on the GPU saved with dptrain.torch.Checkpoint
              and loaded into a fresh model and optimizer: every tensor
              equal, and the model and Adam's moments back on the GPU
  streams     the order of dptrain's GPU work after the training's stream:
              allreduce and allgather (out of place), a checkpoint save and
              a load right after a
              kernel that is still writing their tensor (queued behind
              torch.cuda._sleep), on torch's default stream and on a side
              stream (torch.cuda.stream): each must see the kernel's result
  ddp         torch.distributed with nccl, env://, DDP on cuda:LOCAL_RANK,
              beside a dptrain context on the NCCL backend in the same
              process
  lightning   tests/python/lightning_fit.py (a tiny Trainer, 16-mixed, with
              dptrain.lightning.DptrainCallback) fitted on the GPU to step 6

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
    """Exact in every dtype: [0, 15] for uint8, [-8, 7] otherwise; 5 in 16
    true for bool."""
    g = torch.Generator().manual_seed(key * 1000 + rank)
    v = torch.randint(0, 16, (n,), generator=g)
    if dtype == torch.bool:
        v = v >= 11
    elif dtype != torch.uint8:
        v = v - 8
    return v.to(dtype).to(device)


DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16,
          torch.int32, torch.int64, torch.uint8, torch.bool, torch.int8,
          torch.int16, torch.complex64, torch.complex128]


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
                # Exact sums; to(bool) of a count is the OR dptrain.h says.
                acc = torch.complex128 if dt.is_complex else torch.float64
                want = sum(small_ints(n, q, key, dt, "cpu").to(acc)
                           for q in range(w))
                y = torch.empty_like(x)
                if dt == torch.int16:
                    # NCCL has no 16-bit integer: refused, nothing sent.
                    try:
                        ctx.allreduce(x, y)
                        fail("allreduce of int16 on nccl was not refused")
                    except dptrain.DptrainError as e:
                        if e.name != "DPT_ENOTSUP":
                            fail("allreduce of int16: %s, want DPT_ENOTSUP" % e)
                else:
                    ctx.allreduce(x, y)
                    torch.cuda.synchronize()
                    if not torch.equal(y.cpu(), want.to(dt)):
                        fail("allreduce sum %s %d" % (dt, n))
                if dt.is_floating_point or dt.is_complex:
                    ctx.allreduce(x, op="avg")  # in place
                    tol = 1e-2 if dt in (torch.bfloat16, torch.float16) else 1e-6
                    if not torch.allclose(x.cpu().to(acc), want / w,
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
                checks += 4 if dt.is_floating_point or dt.is_complex else 3
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
    import dptrain.torch as dpt

    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    model, opt = model_and_adam(dev, 2)
    train(model, opt, dev, 3)
    want = {k: v.detach().clone().cpu() for k, v in flat_state(model, opt).items()}
    with dpt.Checkpoint(rng=False) as ck:
        ck.save(3, {"model": model, "optim": opt})
        ck.wait()
        # A fresh model and an optimizer without state: load fills both.
        model2, opt2 = model_and_adam(dev, 99)
        step = ck.load({"model": model2, "optim": opt2})
    if step != 3:
        fail("dptrain.torch load returned %r, want 3" % (step,))
    got = flat_state(model2, opt2)
    if sorted(got) != sorted(want):
        fail("the loaded state has %s, want %s" % (sorted(got), sorted(want)))
    for k, v in got.items():
        # Adam's step counters live on the CPU (capturable=False), its
        # moments on the parameters' GPU, as a fresh optimizer puts them.
        where = torch.device("cpu") if k.endswith(".step") else dev
        if v.device != where:
            fail("%s is on %s after the load, want %s" % (k, v.device, where))
        if not torch.equal(v.cpu(), want[k]):
            fail("%s differs after the load" % k)
    print("torch ok step=%d tensors=%d" % (step, len(got)))


# About half a second of GPU time at 2 GHz: dptrain's work, if it did not
# wait for the stream, would run long before the kernels queued after it.
SLEEP_CYCLES = 1 << 30


def case_streams():
    import dptrain

    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    side = torch.cuda.Stream(dev)  # non-blocking, as torch makes its streams
    n = 1 << 20
    x = torch.zeros(n, device=dev)
    y = torch.zeros(n, device=dev)
    v = torch.zeros(n, device=dev)
    checks = 0
    with dptrain.init() as ctx:
        w = ctx.world_size
        for name, stream in (("default", torch.cuda.default_stream(dev)), ("side", side)):
            # Out of place: on one rank NCCL copies SEND to RECV on its own
            # stream, which is what must wait (an in-place broadcast of one
            # rank moves nothing).
            for k, what in enumerate(("allreduce", "allgather")):
                val = float(10 * k + (1 if name == "default" else 2))
                torch.cuda.synchronize()
                with torch.cuda.stream(stream):
                    y.zero_()
                    torch.cuda._sleep(SLEEP_CYCLES)
                    x.fill_(val)
                    if what == "allreduce":
                        ctx.allreduce(x, y)
                        want = val * w
                    else:
                        g = torch.zeros(n * w, device=dev)
                        ctx.allgather(x, g)
                        y.copy_(g[:n])
                        want = val
                torch.cuda.synchronize()
                if not torch.equal(y, torch.full_like(y, want)):
                    fail("%s on the %s stream after a pending kernel: got %s..., want %s "
                         "(the collective did not wait for the stream)"
                         % (what, name, y[:4].tolist(), want))
                checks += 1
        with dptrain.Checkpoint(ctx) as ck:
            ck.register("v", v)
            step = 0
            for name, stream in (("default", torch.cuda.default_stream(dev)), ("side", side)):
                step += 1
                val = float(100 + step)
                torch.cuda.synchronize()
                # The save copies v on the training's stream, after the
                # kernel that writes it.
                with torch.cuda.stream(stream):
                    torch.cuda._sleep(SLEEP_CYCLES)
                    v.fill_(val)
                    ck.save(step)
                ck.wait()
                torch.cuda.synchronize()
                v.zero_()
                torch.cuda.synchronize()
                if ck.load(step).step != step or not torch.equal(v, torch.full_like(v, val)):
                    fail("save on the %s stream after a pending kernel: step %d holds %s..., "
                         "want %s (the save did not wait for the stream)"
                         % (name, step, v[:4].tolist(), val))
                checks += 1
                # The load's copies come after a kernel still zeroing v.
                with torch.cuda.stream(stream):
                    torch.cuda._sleep(SLEEP_CYCLES)
                    v.zero_()
                    ck.load(step)
                torch.cuda.synchronize()
                if not torch.equal(v, torch.full_like(v, val)):
                    fail("load on the %s stream after a pending kernel: v holds %s..., want %s "
                         "(the load's copies did not wait for the stream: the kernel "
                         "overwrote them)" % (name, v[:4].tolist(), val))
                checks += 1
    print("streams ok checks=%d world=%d" % (checks, w))


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
    import subprocess

    try:
        import lightning.pytorch  # noqa: F401
    except ImportError:
        try:
            import pytorch_lightning  # noqa: F401
        except ImportError as e:
            skip("Lightning is not importable: %s" % e)
    # The fit of tests/python/lightning.sh, on the GPU, in a process of its
    # own as there (its resume needs a second job step: lightning.sh has
    # it, under Slurm).
    fit = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                       "python", "lightning_fit.py")
    p = subprocess.run([sys.executable, fit, "6", "gpu", "16-mixed", "--strategy", "auto"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    if p.returncode != 0:
        fail("lightning_fit.py 6 gpu 16-mixed: exit status %d\n%s"
             % (p.returncode, p.stdout[-4000:]))
    if not last.startswith("start=0 end=6 stopped=False global_step=6 ") or \
            " scale=none " in last:
        fail("lightning_fit.py 6 gpu 16-mixed printed %r, want start=0 end=6 "
             "global_step=6 and a GradScaler's scale" % last)
    print("lightning ok " + last)


CASES = {"binding": case_binding, "checkpoint": case_checkpoint,
         "torch": case_torch, "streams": case_streams, "ddp": case_ddp, "lightning": case_lightning}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: torch_cuda.py %s" % "|".join(CASES), file=sys.stderr)
        sys.exit(2)
    if not torch.cuda.is_available():
        skip("torch %s sees no CUDA device" % torch.__version__)
    CASES[sys.argv[1]]()

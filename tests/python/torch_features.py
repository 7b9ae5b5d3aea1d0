"""What torch 2 adds, through dptrain.torch, for tests/python/torch.sh:

    torch_features.py URI RUN

under srun --dp-train. Each feature prints "rank=R world=W NAME ok",
"rank=R NAME skip: REASON" where this torch lacks it, or "FAIL what":

    uint      uint16/32/64 saved and loaded exactly (above 2**63 too)
    float8    float8 and float4 tensors saved and loaded bit for bit
    sched     OneCycleLR and CyclicLR (with momentum) restored
    compile   a torch.compile'd model and a plain one load each other's steps
    device    a meta tensor and a DTensor: TypeError naming the tensor
    rng       another torch's RNG states in a checkpoint: warnings, then on
"""
import os
import random
import sys
import warnings

import torch

import dptrain
import dptrain.torch as dpt
import torch_worker as tw  # check, expect, same, failures

FEATURES = ("uint", "float8", "sched", "compile", "device", "rng")


class Skip(Exception):
    pass


def uint(ck, step):
    if not hasattr(torch, "uint64"):
        raise Skip("torch %s has no uint16/32/64 (torch >= 2.3)" % torch.__version__)
    g = torch.Generator().manual_seed(3)
    big = [0, 1, 2**63 - 1, 2**63, 2**63 + 12345, 2**64 - 1]
    want = {"u16": torch.randint(0, 2**16, (7, 3), generator=g, dtype=torch.int32).to(torch.uint16),
            "u32": torch.tensor([2**32 - 1 - v for v in torch.randint(0, 2**32, (11,), generator=g).tolist()],
                                dtype=torch.uint32),
            "u64": torch.tensor(big, dtype=torch.uint64)}
    ck.save(step, want)
    ck.wait()
    got = {k: torch.zeros_like(v) for k, v in want.items()}
    tw.check(ck.load(got) == step, "uint: loaded step %d" % step)
    for k in want:
        tw.check(got[k].dtype == want[k].dtype and got[k].tolist() == want[k].tolist(),
                 "uint: %s equal after the load: %s" % (k, got[k].tolist()[:6]))
    tw.check(got["u64"].tolist() == big, "uint: uint64 values above 2**63 exact")
    tw.check(ck.inspect(step).tensors["u64"] == ("uint64", [6]), "uint: the manifest says uint64")


def float8(ck, step):
    names = sorted(str(d).replace("torch.", "") for d in dpt._RAW_DTYPES)
    if not names:
        raise Skip("torch %s has no float8 dtypes (torch >= 2.1)" % torch.__version__)
    g = torch.Generator().manual_seed(8)
    bits = {n: torch.randint(0, 256, (5, 3), generator=g, dtype=torch.int32).to(torch.uint8)
            for n in names}
    want = {"f8": {n: bits[n].clone().view(getattr(torch, n)) for n in names},
            "lazy": {"one": bits[names[0]].clone().view(getattr(torch, names[0]))}}
    ck.save(step, want)
    ck.wait()
    got = {"f8": {n: torch.zeros(5, 3, dtype=torch.uint8).view(getattr(torch, n)) for n in names},
           "lazy": {}}  # created by the load
    tw.check(ck.load(got) == step, "float8: loaded step %d" % step)
    for n in names:
        t = got["f8"][n]
        tw.check(t.dtype == getattr(torch, n) and torch.equal(t.view(torch.uint8), bits[n]),
                 "float8: %s bit for bit" % n)
    lazy = got["lazy"].get("one")
    tw.check(lazy is not None and lazy.dtype == getattr(torch, names[0])
             and torch.equal(lazy.view(torch.uint8), bits[names[0]]),
             "float8: a tensor the state lacked created with its dtype")
    tw.expect(dpt.CheckpointMismatch, ["f8.%s: stored dtype %s, expected float32" % (names[0], names[0])],
              lambda: ck.load({"f8": dict(got["f8"], **{names[0]: torch.zeros(5, 3)}),
                               "lazy": got["lazy"]}),
              "float8 into float32")


def schedulers(seed):
    torch.manual_seed(seed)
    model = torch.nn.Linear(4, 2)
    opts = [torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9) for _ in range(2)]
    scheds = [torch.optim.lr_scheduler.OneCycleLR(opts[0], max_lr=1.0, total_steps=20),
              torch.optim.lr_scheduler.CyclicLR(opts[1], base_lr=0.01, max_lr=0.1, step_size_up=3)]
    return model, opts, scheds


def advance(opts, scheds, n):
    for _ in range(n):
        for o, s in zip(opts, scheds):
            o.step()
            s.step()


def sched(ck, step):
    model, opts, scheds = schedulers(1)
    advance(opts, scheds, 7)
    ck.save(step, {"model": model, "opt": opts, "sched": scheds})
    ck.wait()
    fmodel, fopts, fscheds = schedulers(2)
    tw.check(ck.load({"model": fmodel, "opt": fopts, "sched": fscheds}) == step,
             "sched: loaded step %d" % step)
    for i, (a, b) in enumerate(zip(scheds, fscheds)):
        name = type(a).__name__
        tw.check(a.get_last_lr() == b.get_last_lr() and a.last_epoch == b.last_epoch,
                 "sched: %s's last lr %s, loaded %s" % (name, a.get_last_lr(), b.get_last_lr()))
    advance(opts, scheds, 9)
    advance(fopts, fscheds, 9)
    for a, b in zip(opts, fopts):
        ga, gb = a.param_groups[0], b.param_groups[0]
        tw.check((ga["lr"], ga["momentum"]) == (gb["lr"], gb["momentum"]),
                 "sched: lr and momentum 9 steps on: %s, loaded %s" % (
                     (ga["lr"], ga["momentum"]), (gb["lr"], gb["momentum"])))


def compiled(ck, step):
    if not hasattr(torch, "compile"):
        raise Skip("torch %s has no torch.compile (torch >= 2.0)" % torch.__version__)

    def net(seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    # The eager backend: the same module wrapper and names as inductor,
    # without a C compiler.
    plain, comp = net(1), torch.compile(net(2), backend="eager")
    comp(torch.zeros(1, 3))
    tw.check(any(k.startswith("_orig_mod.") for k in comp.state_dict()),
             "compile: the compiled model's names start with _orig_mod.")
    ck.save(step, {"model": comp})
    ck.wait()
    tw.check(sorted(ck.inspect(step).tensors) == ["model.0.bias", "model.0.weight",
                                                  "model.2.bias", "model.2.weight"],
             "compile: saved under the plain names: %s" % sorted(ck.inspect(step).tensors))
    tw.check(ck.load({"model": plain}) == step, "compile: a plain model loads the compiled one's")
    tw.check(tw.same(plain.state_dict(), comp._orig_mod.state_dict()), "compile: equal after that")
    ck.save(step + 1, {"model": net(3)})
    ck.wait()
    tw.check(ck.load({"model": comp}) == step + 1, "compile: a compiled model loads a plain one's")
    tw.check(tw.same(comp._orig_mod.state_dict(), net(3).state_dict()), "compile: equal after that")


def device(ck, step):
    # A skeleton (a checkpoint's manifest) reaches torch's dtypes, nothing
    # else of torch.
    tw.expect(ValueError, ["'load' as a dtype"], lambda: dpt._build({"y": "load"}, {}),
              "a skeleton that names torch.load as a dtype")
    tw.expect(ValueError, ["'__class__' as a dtype"],
              lambda: dpt._build({"r": ["t", "__class__"]}, {"t": torch.zeros(2)}),
              "a raw tensor's view as torch.__class__")
    tw.check(dpt._build({"y": "float32"}, {}) is torch.float32, "a skeleton's dtype float32")
    meta = torch.empty(4, 3, device="meta")
    tw.expect(TypeError, ["state['opt']['m']", "device 'meta'"],
              lambda: ck.save(step, {"opt": {"m": meta}}), "a meta tensor")
    tw.expect(TypeError, ["register 'm'", "device 'meta'"],
              lambda: ck._ck.register("m", meta), "a meta tensor in dptrain.Checkpoint")
    try:
        from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh
    except ImportError as e:
        print("rank=%d device: no DTensor in torch %s (%s): the meta tensor only" % (
            ck.rank, torch.__version__, e), flush=True)
        return
    dist = torch.distributed
    dist.init_process_group("gloo")
    try:
        mesh = init_device_mesh("cpu", (ck.world_size,))
        dt = distribute_tensor(torch.arange(8.0 * ck.world_size), mesh, [Shard(0)])
        tw.expect(TypeError, ["state['w']", "DTensor"],
                  lambda: ck.save(step, {"w": dt}), "a DTensor")
        tw.expect(TypeError, ["register 'w'", "DTensor"],
                  lambda: ck._ck.register("w", dt), "a DTensor in dptrain.Checkpoint")
    finally:
        dist.destroy_process_group()
    ck.save(step, {"x": torch.ones(2)})  # the object works after them
    ck.wait()


def cuda_stand_in():
    """On a machine without CUDA, the calls of torch.cuda that the load
    makes, answering as one GPU with a generator state of 16 bytes."""
    cuda = torch.cuda
    cuda.is_available = lambda: True
    cuda.device_count = lambda: 1
    cuda.get_rng_state = lambda i=0: torch.zeros(16, dtype=torch.uint8)
    cuda.set_rng_state_all = lambda states: None
    print("rng: CUDA stood in by one device of a 16-byte generator state "
          "(torch %s sees no GPU)" % torch.__version__, flush=True)


def rng(ck, step):
    real = dpt._rng_states

    def doctored():  # as another torch would have saved them
        states = dpt._build(real(), {})["rng"]
        states["torch_version"] = "1.0.0-other"
        states["cuda"] = [bytes(range(24))]
        states["torch"] = states["torch"][:100]
        return dpt._Flat({"rng": states}).skeleton
    dpt._rng_states = doctored
    random.seed(5)
    ck.save(step, {"x": torch.ones(2)})
    ck.wait()
    want = random.random()
    dpt._rng_states = real
    if not torch.cuda.is_available():
        cuda_stand_in()
    random.seed(0)
    x = torch.zeros(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tw.check(ck.load({"x": x}) == step, "rng: loaded step %d" % step)
    msgs = sorted(str(w.message) for w in caught)
    for m in msgs:
        print("rng warning: %s" % m, flush=True)
    for what in ("CPU", "CUDA"):
        tw.check(any(m.startswith("dptrain: the checkpoint's %s random state (torch 1.0.0-other) "
                                  "cannot be restored by torch %s" % (what, torch.__version__))
                     for m in msgs), "rng: a warning names the %s state and both versions" % what)
    tw.check(random.random() == want and torch.equal(x, torch.ones(2)),
             "rng: the rest of the step loaded, Python's random state too")


def main():
    uri, run = sys.argv[1], sys.argv[2]
    ck = dpt.Checkpoint(uri=uri, run=run)
    step = 0
    for name, fn in zip(FEATURES, (uint, float8, sched, compiled, device, rng)):
        step += 10
        before = len(tw.failures)
        try:
            fn(ck, step)
        except Skip as e:
            print("rank=%d %s skip: %s" % (ck.rank, name, e), flush=True)
            continue
        except Exception as e:  # noqa: BLE001 - reported as the feature's failure
            tw.check(False, "%s: %s: %s" % (name, type(e).__name__, e))
        if len(tw.failures) == before:
            print("rank=%d world=%d %s ok" % (ck.rank, ck.world_size, name), flush=True)
    ck.close()
    sys.exit(1 if tw.failures else 0)


if __name__ == "__main__":
    main()

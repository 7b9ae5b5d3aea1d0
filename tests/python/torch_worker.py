"""dptrain.torch under srun --dp-train, for tests/python/torch.sh.

    torch_worker.py dtypes save|load URI RUN   a state of every dtype, nested
    torch_worker.py adam save|load URI RUN     a model and Adam after 3 steps;
                                               loaded into a fresh optimizer
    torch_worker.py bad URI RUN                bad calls raise clear errors
    torch_worker.py c2py FROM TO               load what tests/ckpt/ckpt_worker
                                               saved under URI FROM (its run
                                               "run"), save it under URI TO
    torch_worker.py cuda URI RUN               a model and Adam on the GPU (LOCAL_RANK)
                                               saved, loaded into a fresh one
    torch_worker.py sampler                    ElasticSampler = dpt_sampler_*
                                               (no coordinator)

Prints "rank=R world=W MODE ok" when every check passed, "FAIL what"
otherwise, and exits 1 on a failure.
"""
import ctypes
import os
import random
import sys

import torch

import dptrain
import dptrain.torch as dpt

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL %s" % what, flush=True)


def every_dtype(seed):
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.rand(*shape, generator=g)  # noqa: E731
    return {
        "f32": r(5, 7),
        "f64": r(3, 2, 4).double(),
        "bf16": r(33).bfloat16(),
        "f16": r(9, 3).half(),
        "i64": torch.randint(-2**62, 2**62, (11,), generator=g),
        "i32": torch.randint(-2**31, 2**31 - 1, (4, 4), generator=g, dtype=torch.int32),
        "i16": torch.randint(-2**15, 2**15 - 1, (17,), generator=g, dtype=torch.int16),
        "i8": torch.randint(-128, 127, (2, 3, 5), generator=g, dtype=torch.int8),
        "u8": torch.randint(0, 255, (7,), generator=g, dtype=torch.uint8),
        "bool": r(10, 3) > 0.5,
        "c64": torch.complex(r(6), r(6)),
        "c128": torch.complex(r(2, 2).double(), r(2, 2).double()),
        "scalar": torch.tensor(3.25),
        "nested": {"list": [r(4), {"deep": r(2, 2)}], 7: r(3)},
        "plain": {"epoch": 4, "name": "fmnist", "lr": 1e-3, "none": None,
                  "tuple": (1, "a"), "bytes": b"\x00\xff", "flag": True},
    }


def same(a, b, path="state"):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and torch.equal(a, b)) or (print("differs: %s" % path) and False)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], "%s[%r]" % (path, k)) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(
            same(x, y, "%s[%d]" % (path, i)) for i, (x, y) in enumerate(zip(a, b)))
    return a == b or (print("differs: %s: %r != %r" % (path, a, b)) and False)


def zeros_like_state(s):
    if isinstance(s, torch.Tensor):
        return torch.zeros_like(s)
    if isinstance(s, dict):
        return {k: zeros_like_state(v) for k, v in s.items()}
    if isinstance(s, list):
        return [zeros_like_state(v) for v in s]
    return s


def model_and_adam(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    opt = torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.8, 0.9))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    return model, opt, sched


def train(model, opt, sched, steps):
    g = torch.Generator().manual_seed(99)
    for _ in range(steps):
        loss = model(torch.rand(4, 6, generator=g)).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()


def expect(exc, words, fn, what):
    try:
        fn()
    except exc as e:
        msg = str(e)
        check(all(w in msg for w in words), "%s: the message %r lacks %r" % (what, msg, words))
        print("bad %s: %s" % (what, msg.splitlines()[0]), flush=True)
        return
    except Exception as e:  # noqa: BLE001 - the test reports what came instead
        check(False, "%s: raised %s: %s, not %s" % (what, type(e).__name__, e, exc.__name__))
        return
    check(False, "%s: no exception" % what)


def bad(ck, uri, run):
    model, opt, sched = model_and_adam(1)
    train(model, opt, sched, 2)
    ck.save(1, {"model": model, "optim": opt})
    ck.wait()
    # Another model under the same run name: one error naming each
    # difference, with both shapes; not retried on older steps.
    other = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    expect(dpt.CheckpointMismatch, ["step 1 of", "model.0.weight: stored shape [8, 6], expected [16, 6]",
                                    "model.2.weight: stored shape [3, 8], expected [3, 16]",
                                    "another model"],
           lambda: ck.load({"model": other, "optim": torch.optim.Adam(other.parameters())}),
           "load into another model")
    expect(dpt.CheckpointMismatch, ["model.0.weight: stored dtype float32, expected float64"],
           lambda: ck.load({"model": model_and_adam(1)[0].double()}), "load into another dtype")
    expect(dpt.CheckpointMismatch, ["extra: in the state, not in the checkpoint"],
           lambda: ck.load({"model": model, "extra": torch.zeros(3)}), "a key the checkpoint lacks")
    expect(dpt.CheckpointMismatch, ["optim.state.0.exp_avg: in the checkpoint, not in the state"],
           lambda: ck.load({"model": model}), "a key the state lacks")
    expect(ValueError, ["state['w']: the tensor is not contiguous"],
           lambda: ck.save(2, {"w": torch.zeros(4, 3).t()}), "a non-contiguous tensor")
    expect(TypeError, ["state['x']['f']: a set cannot be checkpointed"],
           lambda: ck.save(2, {"x": {"f": {1, 2}}}), "a value that is not state")
    expect(ValueError, ["same checkpoint name 'a.b'"],
           lambda: ck.save(2, {"a.b": torch.zeros(1), "a": {"b": torch.zeros(1)}}), "two keys, one name")
    sampler = dpt.ElasticSampler(100, global_batch_size=10, rank=0, world_size=3)
    expect(ValueError, ["world size 3 does not divide the global batch size 10"],
           lambda: next(iter(sampler)), "a world size that does not divide the batch")
    expect(ValueError, ["fewer than one global batch"],
           lambda: dpt.ElasticSampler(5, global_batch_size=10), "a dataset smaller than a batch")
    # After all that the object still works: the state loads.
    fresh, fopt, _ = model_and_adam(2)
    check(ck.load({"model": fresh, "optim": fopt}) == 1, "the good load after the bad calls")
    check(same(fresh.state_dict(), model.state_dict()), "parameters after the bad calls")


def c2py(ck, dst):
    contents = ck.inspect()
    check(contents is not None, "the C program's run has a committed step")
    state = {}
    for name, (dtype, shape) in contents.tensors.items():
        if not hasattr(torch, dtype):  # uint16/32/64 before torch 2.3
            print("rank=%d skipped %s: torch %s has no %s" % (ck.rank, name, torch.__version__, dtype))
            continue
        *parents, leaf = name.split(".")
        d = state
        for p in parents:
            d = d.setdefault(p, {})
        d[leaf] = torch.full(shape, 0, dtype=getattr(torch, dtype))
    step = ck.load(state, strict=False)
    check(step == contents.step, "loaded the C program's step %s" % contents.step)
    out = dpt.Checkpoint(ctx=ck._ctx, uri=dst, run="run", signals=())
    out.save(step, state)
    out.wait()
    out.close()
    return step


def sampler_vs_c():
    lib = dptrain._lib
    lib.dpt_sampler_new.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64,
                                    ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int]
    lib.dpt_sampler_set_world.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.dpt_sampler_next.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]
    lib.dpt_sampler_destroy.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    n, batch, seed = 1003, 24, 12345
    for world in (1, 2, 3, 4, 6, 8):
        for rank in sorted({0, world - 1}):
            py = dpt.ElasticSampler(n, global_batch_size=batch, seed=seed, rank=rank,
                                    world_size=world)
            s = ctypes.c_void_p()
            check(lib.dpt_sampler_new(ctypes.byref(s), n, batch, seed, 1) == 0, "dpt_sampler_new")
            check(lib.dpt_sampler_set_world(s, rank, world) == 0, "dpt_sampler_set_world")
            share = batch // world
            buf = (ctypes.c_uint64 * share)()
            steps = 0
            for _epoch in range(3):  # a pass per epoch; the C one goes on
                for got in py:
                    check(lib.dpt_sampler_next(s, buf) == 0, "dpt_sampler_next")
                    if list(buf) != got:
                        check(False, "world %d rank %d step %d: Python %s, C %s" % (
                            world, rank, steps, got[:4], list(buf)[:4]))
                        break
                    steps += 1
            check(steps == 3 * (n // batch), "3 epochs of %d steps, not %d" % (n // batch, steps))
            lib.dpt_sampler_destroy(ctypes.byref(s))
    # The first global batch is the same whatever the world size.
    first = sorted(next(iter(dpt.ElasticSampler(n, batch, seed, rank=0, world_size=1))))
    union = sorted(i for r in range(4) for i in next(iter(dpt.ElasticSampler(n, batch, seed, rank=r,
                                                                            world_size=4))))
    check(first == union, "the 4 ranks' shares make up the 1-rank batch")


def main():
    mode = sys.argv[1]
    if mode == "sampler":
        sampler_vs_c()
        print("sampler %s" % ("ok" if not failures else "FAILED"), flush=True)
        sys.exit(1 if failures else 0)
    action = sys.argv[2] if mode in ("dtypes", "adam") else None
    args = sys.argv[3:] if action else sys.argv[2:]
    uri, run = args[0], "run" if mode == "c2py" else args[1]
    ck = dpt.Checkpoint(uri=uri, run=run)
    rank, world = ck.rank, ck.world_size
    if mode == "dtypes":
        want = every_dtype(5)
        if action == "save":
            random.seed(11)
            ck.save(3, want)
            ck.wait()
            print("rank=%d next_random=%r" % (rank, random.random()), flush=True)
        else:
            got = zeros_like_state(want)
            got["plain"] = {}
            del got["nested"][7]  # created by the load
            random.seed(0)
            check(ck.load(got) == 3, "loaded step 3")
            check(same(want, got), "every dtype and value equal after the load")
            print("rank=%d next_random=%r" % (rank, random.random()), flush=True)
    elif mode == "adam":
        model, opt, sched = model_and_adam(1)
        if action == "save":
            train(model, opt, sched, 3)
            ck.save(3, {"model": model, "optim": opt, "sched": sched})
            ck.wait()
            train(model, opt, sched, 2)
        else:
            ref, ref_opt, ref_sched = model_and_adam(1)
            train(ref, ref_opt, ref_sched, 3)
            fresh, fopt, fsched = model_and_adam(7)  # other weights, no Adam state
            check(len(fopt.state) == 0, "no optimizer state before the load")
            check(ck.load({"model": fresh, "optim": fopt, "sched": fsched}) == 3, "loaded step 3")
            check(same(ref.state_dict(), fresh.state_dict()), "parameters restored")
            check(same(ref_opt.state_dict(), fopt.state_dict()), "Adam's moments, steps and param_groups restored")
            check(ref_sched.state_dict() == fsched.state_dict(), "the LR scheduler restored")
            # A run resumed at its last step saves that step again: a
            # no-op (it is committed), not DPT_EEXIST.
            check(ck.last_saved == 3, "last_saved is the step loaded")
            ck.save(3, {"model": fresh, "optim": fopt, "sched": fsched})
            ck.wait()
            train(ref, ref_opt, ref_sched, 2)
            train(fresh, fopt, fsched, 2)
            check(same(ref.state_dict(), fresh.state_dict()), "two more steps bitwise equal")
    elif mode == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
        model, opt, sched = model_and_adam(1)
        model.to(device)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(3)
        for _ in range(3):
            loss = model(torch.rand(4, 6, generator=g).to(device)).pow(2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        ck.save(3, {"model": model, "optim": opt})
        ck.wait()
        fresh = model_and_adam(7)[0].to(device)
        fopt = torch.optim.Adam(fresh.parameters(), lr=0.01)
        check(ck.load({"model": fresh, "optim": fopt}) == 3, "loaded step 3")
        check(same(model.state_dict(), fresh.state_dict()), "CUDA parameters restored")
        check(same(opt.state_dict(), fopt.state_dict()), "Adam's moments restored on the GPU")
        check(all(t.is_cuda for s in fopt.state.values() for k, t in s.items() if k != "step"),
              "Adam's moments back on the GPU")
    elif mode == "bad":
        bad(ck, uri, run)
    elif mode == "c2py":
        c2py(ck, args[1])
    ck.close()
    print("rank=%d world=%d %s %s" % (rank, world, mode, "ok" if not failures else "FAILED"), flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

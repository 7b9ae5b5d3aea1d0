"""A task of tests/python/binding.sh: the dptrain Python binding with
Debian's python3-torch, under srun --dp-train.

    worker.py collectives   allreduce (sum, avg), broadcast, allgather of
                            torch tensors of every float dtype and of numpy
                            arrays, checked exactly; bad arguments raise
    worker.py save STEP     a replicated tensor and two sharded ones, split
                            by this world size, saved as STEP
    worker.py load          the same names, split by this world size, loaded
                            from the newest step and checked element by element
    worker.py fresh         load() of a run without a committed step: None
    worker.py stop          should_stop() until it says True (srun --time and
                            --dp-grace make that happen), then once more;
                            then Checkpoint.step() saves and commits
Each prints one line "rank=R world=W <what> ok" on success.
"""
import sys
import time

import numpy
import torch

import dptrain

P, M = 1000, 100003  # parameters (replicated), moments (sharded)


def box(n, rank, world):
    """The slice [lo, hi) of n elements that rank holds."""
    return n * rank // world, n * (rank + 1) // world


def collectives(ctx):
    w, r = ctx.world_size, ctx.rank
    assert ctx.should_stop() is False  # no time limit: never
    for dt in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        for n in (1, 5, 4099, 65537):
            t = torch.full((n,), float(r + 1), dtype=dt)
            ctx.allreduce(t)
            assert torch.equal(t, torch.full((n,), w * (w + 1) / 2, dtype=dt)), (dt, n, t[:4])
            out = torch.empty(n, dtype=dt)
            ctx.allreduce(torch.full((n,), float(r + 1), dtype=dt), out, op="avg")
            assert torch.equal(out, torch.full((n,), (w + 1) / 2, dtype=dt)), (dt, n, out[:4])
            b = torch.arange(n, dtype=dt) if r == w - 1 else torch.zeros(n, dtype=dt)
            ctx.broadcast(b, root=w - 1)
            assert torch.equal(b, torch.arange(n, dtype=dt)), (dt, n)
            g = torch.empty(w * n, dtype=dt)
            ctx.allgather(torch.full((n,), float(r), dtype=dt), g)
            assert torch.equal(g, torch.arange(w, dtype=dt).repeat_interleave(n)), (dt, n)
    # The integer, boolean and complex dtypes: sums wrap in their width,
    # a boolean sum is an OR (include/dptrain/dptrain.h).
    for dt in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8):
        t = torch.full((77,), r + 1, dtype=dt)
        ctx.allreduce(t)
        assert torch.equal(t, torch.full((77,), w * (w + 1) // 2, dtype=dt)), (dt, t[:4])
    t = torch.tensor([r == 0, False, True])
    ctx.allreduce(t)
    assert torch.equal(t, torch.tensor([True, False, True])), t
    t = torch.full((9,), complex(r, -1), dtype=torch.complex64)
    ctx.allreduce(t)
    assert torch.equal(t, torch.full((9,), complex(w * (w - 1) / 2, -w), dtype=torch.complex64)), t
    a = numpy.full(333, r + 1, dtype=numpy.float64)
    ctx.allreduce(a)
    assert (a == w * (w + 1) / 2).all()
    for bad, exc in ((torch.zeros(4, 4).t(), ValueError),
                     (torch.zeros(4, dtype=torch.complex32), TypeError),
                     ([1.0, 2.0], TypeError)):
        try:
            ctx.allreduce(bad)
        except exc:
            pass
        else:
            raise AssertionError("allreduce(%r) did not raise %s" % (bad, exc.__name__))
    try:
        ctx.allreduce(torch.zeros(4), op="max")
    except ValueError:
        pass
    else:
        raise AssertionError("op='max' did not raise")
    ctx.barrier()
    return "collectives"


def state(ctx, fill):
    """The registered tensors of this world size: params replicated, m
    (float64) and v (bfloat16) sharded; FILL: their values, or zeros."""
    lo, hi = box(M, ctx.rank, ctx.world_size)
    if fill:
        params = torch.arange(P, dtype=torch.float32) * 0.5
        m = torch.arange(lo, hi, dtype=torch.float64) + 0.25
        v = (torch.arange(lo, hi) % 256).to(torch.bfloat16)
    else:
        params = torch.zeros(P)
        m = torch.zeros(hi - lo, dtype=torch.float64)
        v = torch.zeros(hi - lo, dtype=torch.bfloat16)
    ck = dptrain.Checkpoint(ctx, keep_last=2)
    ck.register("params", params)
    ck.register("adam.m", m, shape=[M], offset=[lo])
    ck.register("adam.v", v, shape=[M], offset=[lo])
    return ck, (params, m, v), (lo, hi)


def save(ctx, step):
    ck, _, _ = state(ctx, True)
    ck.save(step, sample_cursor=step * 1000, rng=b"rng-state", user=b"user \x00 blob")
    ck.wait()
    st = ck.stats()
    assert st["saves"] == 1 and st["bytes_written"] > 0, st
    ck.close()
    return "saved step=%d" % step


def load(ctx):
    ck, (params, m, v), (lo, hi) = state(ctx, False)
    info = ck.load()
    assert info is not None
    assert torch.equal(params, torch.arange(P, dtype=torch.float32) * 0.5)
    assert torch.equal(m, torch.arange(lo, hi, dtype=torch.float64) + 0.25)
    assert torch.equal(v, (torch.arange(lo, hi) % 256).to(torch.bfloat16))
    assert (info.rng, info.user) == (b"rng-state", b"user \x00 blob"), info
    assert info.sample_cursor == info.step * 1000
    st = ck.stats()
    ck.close()
    return "loaded step=%d written_by=%d needed=%d read=%d" % (
        info.step, info.world_size, st["bytes_needed"], st["bytes_read"])


def fresh(ctx):
    ck, _, _ = state(ctx, False)
    assert ck.load() is None
    return "fresh"


def stop(ctx):
    ck, _, _ = state(ctx, True)
    asked = 1
    while not ctx.should_stop():
        asked += 1
        time.sleep(0.05)
    assert ctx.should_stop(), "a stop is never taken back"
    assert ck.step(asked) is True and ck.last_saved == asked
    ck.close()
    return "stop asked=%d" % asked


def main():
    with dptrain.init() as ctx:
        what = {"collectives": lambda: collectives(ctx),
                "save": lambda: save(ctx, int(sys.argv[2])),
                "load": lambda: load(ctx),
                "fresh": lambda: fresh(ctx),
                "stop": lambda: stop(ctx)}[sys.argv[1]]()
        print("rank=%d world=%d %s ok" % (ctx.rank, ctx.world_size, what), flush=True)


if __name__ == "__main__":
    main()

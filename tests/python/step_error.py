"""A worker of tests/python/step_error.sh: dptrain.torch's step() and the
binding take the library's rule for a failed save (dpt_ckpt_step_error),
not a copy of it. One rank with DPTRAIN_CKPT_EVERY=1steps: every step is
due. Prints one line per check, "ok NAME" or "FAILED NAME: WHY":

    pending    step 1 under an address-space limit that leaves no room for
               the snapshot: the save fails on this rank and stays pending
               as failed; step() returns False and raises nothing
    rule       the binding's step_error for that error: None for a
               periodic save, the error for the save of a stop
    given-up   step 2 without the limit: the failed save is given up at
               the commit, step 2 is saved and committed
    not-pending  an error with no save pending (nothing was started):
               the error, periodic or not
    stop       a stop requested, step 3 of a state 4 times as large under
               the limit: step() raises
"""
import resource
import sys

import torch

import dptrain
import dptrain.torch as dpt


def check(name, cond, why=""):
    print("%s %s%s" % ("ok" if cond else "FAILED", name, "" if cond else ": " + why),
          flush=True)


def vm_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def limited(fn):
    """FN() with 16 MiB of address space to spare: no room for a 64 MiB
    snapshot."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm_bytes() + (16 << 20), hard))
    try:
        return fn()
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


ENOMEM = -2  # DPT_ENOMEM (include/dptrain/error.h)
state = {"w": torch.ones(16 << 20)}  # 64 MiB of float32
with dpt.Checkpoint(signals=()) as ck:
    raised = [None]

    def step(n):
        try:
            return ck.step(n, state)
        except dptrain.DptrainError as e:
            raised[0] = e
            return None

    # step() asks the library: every answer it got is recorded.
    asked = []
    rule = ck._ck.step_error

    def recorded(e, at_stop):
        asked.append((e.name, at_stop, rule(e, at_stop)))
        return asked[-1][2]

    ck._ck.step_error = recorded
    stop = limited(lambda: step(1))
    check("pending", stop is False and raised[0] is None and
          [(n, s, r is None) for n, s, r in asked] == [("DPT_ENOMEM", False, True)],
          "step(1) returned %r, raised %r, asked %r" % (stop, raised[0], asked))
    ck._ck.step_error = rule
    err = dptrain.DptrainError(ENOMEM, "the snapshot of step 1", "")
    check("rule", ck._ck.step_error(err, False) is None and
          ck._ck.step_error(err, True) is err)
    stop = step(2)
    ck.wait()
    info = ck.inspect()
    check("given-up", stop is False and info is not None and info.step == 2,
          "step(2) returned %r, raised %r, newest committed %r"
          % (stop, raised[0], info and info.step))
    check("not-pending", ck._ck.step_error(err, False) is err and
          ck._ck.step_error(err, True) is err)
    # Four times the state: what step 3 frees (the old tensor and the
    # snapshot of step 2) and the limit's spare room do not hold it.
    state = {"w": torch.ones(64 << 20)}
    ck._ctx.request_stop()
    stop = limited(lambda: step(3))
    check("stop", stop is None and raised[0] is not None and
          raised[0].name in ("DPT_ENOMEM", "DPT_ESYS"),
          "step(3) at the stop returned %r, raised %r" % (stop, raised[0]))
sys.exit(0)

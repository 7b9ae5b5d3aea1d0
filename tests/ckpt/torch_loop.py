"""A PyTorch training loop for tests/ckpt/enospc.sh: dptrain.torch's
Checkpoint.step() after every step (saves when DPTRAIN_CKPT_EVERY says),
resuming from the newest committed step.

    torch_loop.py STEPS STEP_SECONDS

Output: "step S" after each step, then "finished step=S rank=R
committed", or "FAIL what: error".
"""
import sys
import time

import torch

import dptrain
import dptrain.torch as dpt


def main(steps, step_s):
    model = torch.nn.Linear(32, 32)
    state = {"model": model}
    with dpt.Checkpoint() as ck:
        step = ck.load(state) or 0
        while step < steps:
            step += 1
            with torch.no_grad():
                model.weight.add_(1.0)
            time.sleep(step_s)
            print("step %d" % step, flush=True)
            try:
                if ck.step(step, state):
                    break
            except dptrain.DptrainError as e:
                print("FAIL step: %s" % e, flush=True)
                return 1
        ck.finish(step, state)
        print("finished step=%d rank=%d committed" % (step, ck.rank), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), float(sys.argv[2])))

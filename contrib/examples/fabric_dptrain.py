"""Lightning Fabric made elastic by dptrain: srun --dp-train starts the
processes, DptrainEnvironment gives Fabric the job's ranks and nodes, and
dptrain.torch saves, stops and resumes as in a plain PyTorch loop
(doc/python.md, "Lightning", Fabric).

    srun --dp-train=fabric --dp-ckpt=file:///scratch/$USER/ckpt \\
        python3 fabric_dptrain.py --steps 1000

A linear model learns y = 3x - 2 from 960 points with Adam, 32 points a
global step. It resumes on any number of ranks that divides 32, with the
same samples at every step; at the end rank 0 prints the step it started
from and a digest of the parameters.
"""
import argparse
import hashlib

import lightning as L
import torch

import dptrain.torch as dpt
from dptrain.lightning import DptrainEnvironment


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1000, help="global steps to train to")
    ap.add_argument("--accelerator", default="cpu")
    args = ap.parse_args()

    fabric = L.Fabric(accelerator=args.accelerator, strategy="ddp",
                      plugins=[DptrainEnvironment()])
    fabric.launch()  # srun started every process: nothing to launch
    fabric.seed_everything(0)
    x = torch.linspace(-1, 1, 960).unsqueeze(1)
    data = torch.utils.data.TensorDataset(x, 3 * x - 2)
    sampler = dpt.ElasticSampler(data, global_batch_size=32, seed=1)
    loader = fabric.setup_dataloaders(
        torch.utils.data.DataLoader(data, batch_sampler=sampler), use_distributed_sampler=False)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    model, optimizer = fabric.setup(model, optimizer)

    ck = dpt.Checkpoint()
    state = {"model": model, "optim": optimizer, "sampler": sampler}
    start = step = ck.load(state) or 0
    stop = False
    while step < args.steps and not stop:
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            fabric.backward(loss)
            optimizer.step()
            step += 1
            stop = ck.step(step, state)
            if stop or step >= args.steps:
                break
    ck.finish(step, state)
    ck.close()
    if fabric.global_rank == 0:
        digest = hashlib.sha256()
        for p in model.parameters():
            digest.update(p.detach().cpu().numpy().tobytes())
        print("fabric: %s at step %d (from %d) on %d ranks params_sha256=%s" % (
            "stopped" if stop else "done", step, start, fabric.world_size, digest.hexdigest()),
            flush=True)


if __name__ == "__main__":
    main()

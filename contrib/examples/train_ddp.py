"""A small PyTorch DDP training job, unchanged for dptrain.

Run it with `srun -N 2 -n 4 --dp-train python3 train_ddp.py`: the plugin
exports RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, so
init_method="env://" needs nothing else. It fits y = 3x - 2 with noise on
data that each rank draws for itself, and prints the loss every 20 steps.
"""
import os
import sys

import torch
import torch.distributed as dist

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
backend = "nccl" if torch.cuda.is_available() else "gloo"
dist.init_process_group(backend, init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
if rank == 0:
    print(f"world={world} backend={backend} master="
          f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} "
          f"run={os.environ.get('DPTRAIN_RUN', '?')}", flush=True)

torch.manual_seed(1234 + rank)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(1, steps + 1):
    x = torch.rand(64, 1) * 2 - 1
    y = 3 * x - 2 + 0.01 * torch.randn_like(x)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 20 == 0:
        avg = loss.detach().clone()
        dist.all_reduce(avg)
        if rank == 0:
            print(f"step {step:4d} loss {avg.item() / world:.5f}", flush=True)

w, b = model.module.weight.item(), model.module.bias.item()
if rank == 0:
    print(f"learned y = {w:.3f} x {b:+.3f} (true: y = 3x - 2)", flush=True)
dist.destroy_process_group()

"""A small PyTorch DDP training job, unchanged for dptrain.

Run it with `srun -N 2 -n 4 --dp-train python3 train_ddp.py`: the plugin
exports RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, so
init_method="env://" needs nothing else. It fits y = 3x - 2 with noise on
data that each rank draws for itself, and prints the loss every 20 steps.

With GPUs (`--gres=gpu:N`, one task per GPU) it uses NCCL, and each rank
takes the GPU of its LOCAL_RANK among the node's GPUs, which every task
sees, as under torchrun.
"""
import os
import sys

import torch
import torch.distributed as dist

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
backend = "nccl" if torch.cuda.is_available() else "gloo"
if backend == "nccl":
    # Every GPU of the node is visible and LOCAL_RANK picks one; modulo
    # the visible devices, so that one GPU per task (srun --dp-gpu-bind=rank)
    # works too. Set before the process group: NCCL binds to it.
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
else:
    device = torch.device("cpu")
dist.init_process_group(backend, init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
if rank == 0:
    print(f"world={world} backend={backend} master="
          f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} "
          f"run={os.environ.get('DPTRAIN_RUN', '?')}", flush=True)

torch.manual_seed(1234 + rank)
model = torch.nn.Linear(1, 1).to(device)
model = torch.nn.parallel.DistributedDataParallel(
    model, device_ids=[device] if device.type == "cuda" else None)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for step in range(1, steps + 1):
    x = torch.rand(64, 1, device=device) * 2 - 1
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

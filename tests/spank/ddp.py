"""A plain PyTorch DDP program, unchanged for dptrain: env:// reads RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT that `srun --dp-train` exports."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 1))
loss = model(torch.ones(2, 3)).sum()
loss.backward()
print(f"rank={rank} world={world} local={os.environ['LOCAL_RANK']} "
      f"sum={int(t[0].item())} grad_ok={model.module.weight.grad is not None}",
      flush=True)
dist.destroy_process_group()

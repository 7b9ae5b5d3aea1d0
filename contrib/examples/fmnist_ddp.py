"""Fashion-MNIST with PyTorch DDP, as PyTorch users write it: started by
torchrun, or by srun with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
set (srun --dp-train sets them). fmnist_dptrain.py is the same script
made elastic by dptrain (the README shows the difference).

Data: the IDX files of Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist), or --data DIR.
"""
import time

import torch
import torch.distributed as dist

# The examples' options, data, model, training step and output (fmnist_common.py):
from fmnist_common import (Net, arguments, fashion_mnist, init_ddp, open_trace, print_done,
                           print_step, trace_step, train_step)


def main():
    args = arguments(__doc__, trace_help="append one JSON line per step and rank: step, "
                     "world size, the rank's sample indices, the global loss").parse_args()
    rank, world, device = init_ddp(args.seed)

    train = fashion_mnist(args.data, "train")
    sampler = torch.utils.data.DistributedSampler(train, seed=args.seed, drop_last=True)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch // world,
                                         sampler=sampler, drop_last=True)
    model = Net().to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    step = 0
    if rank == 0:
        print("fmnist: starting on %d ranks" % world, flush=True)

    trace = open_trace(args.trace)
    t0, seen = time.time(), 0
    while step < args.steps:
        sampler.set_epoch(step // len(loader))
        for x, y, index in loader:
            loss = train_step(ddp, optimizer, x, y, device)
            step += 1
            seen += args.batch
            trace_step(trace, step, rank, world, loss, index)
            print_step(args, rank, step, loss, seen / (time.time() - t0))
            if step >= args.steps:
                break
    if trace:
        trace.close()
    print_done(model, args, step, rank, world, device)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Fashion-MNIST that keeps training when ranks or a node die (doc/shrink.md).

    srun --dp-train=fmnist --dp-ckpt=file:///scratch/$USER/ckpt \\
        --dp-ckpt-every=50steps python3 fmnist_shrink.py --steps 2000

The model and data of fmnist_dptrain.py, but the gradients are averaged
with dptrain's own allreduce (ctx.allreduce) instead of DDP, because
dptrain's collectives know generations: when a rank dies, the survivors'
collective raises DptrainError with ``restartable`` true. They then
rejoin (ctx.rejoin()), take the state of the new rank 0 (parameters,
momentum, step) by ctx.broadcast, give the sampler its new place, and
repeat the step after the one adopted, from memory, without a requeue.
The global batch (48) must divide by every world size the job may shrink
to (1, 2, 3, 4, 6, 8...): the samples of each global step are then the same
whatever the world size, and the run learns what an uninterrupted one
would have, but for the order of the floating-point additions.

Checkpoints (--dp-ckpt-every, the walltime) are written by whatever world
size is current, and a start resumes from the newest, on any world size.

Output, one line each (tests/shrink/check.py reads them): "trained step=S
gen=G rank=R world=W loss=L idx=I,..." after each step's update (L: the
global mean loss; I: the rank's sample indices), "adopted step=S gen=G
rank=R world=W" after a recovery, and at the end "final step=S gen=G
rank=R world=W params=N,... sha256=H": each parameter tensor's L2 norm and
a digest of all their bytes.
"""
import argparse
import hashlib
import os
import sys
import time

import torch
import torch.nn.functional as F

import dptrain
import dptrain.torch as dpt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmnist_common import Net, fashion_mnist  # noqa: E402  (the examples' model and data)


def flat(tensors):
    return torch.cat([t.reshape(-1) for t in tensors])


def unflat(buf, tensors):
    at = 0
    for t in tensors:
        t.copy_(buf[at:at + t.numel()].view_as(t))
        at += t.numel()


def train_step(ctx, model, optimizer, batch, global_batch):
    """One global step on this rank's share BATCH: the loss summed over
    the share and divided by the global batch, so that the allreduce's sum
    is the global mean whatever the world size. The optimizer steps only
    when the allreduce succeeded: a rank that fails keeps its state."""
    x, y, _ = batch
    loss = F.cross_entropy(model(x), y, reduction="sum") / global_batch
    optimizer.zero_grad()
    loss.backward()
    params = list(model.parameters())
    buf = torch.cat([flat(p.grad for p in params), loss.detach().reshape(1)])
    ctx.allreduce(buf)  # raises DptrainError (restartable) when a peer died
    unflat(buf[:-1], [p.grad for p in params])
    optimizer.step()
    return buf[-1].item()


def recover(ctx, ck, model, optimizer, step):
    """Rejoin and take the new rank 0's state; returns the adopted step.
    Raises DptrainError when too few ranks are left (--dp-min-workers)."""
    try:
        ck.wait()  # a save in flight is not committed: its error is expected
    except dptrain.DptrainError:
        pass
    tensors = list(model.parameters()) + [
        optimizer.state[p]["momentum_buffer"] for p in model.parameters()]
    while True:
        ctx.rejoin()
        try:
            at = torch.tensor([step], dtype=torch.int64)
            ctx.broadcast(at, root=0)
            buf = flat(t.detach() for t in tensors)
            ctx.broadcast(buf, root=0)
            break
        except dptrain.DptrainError as e:  # one more rank died meanwhile
            if not e.restartable:
                raise
    with torch.no_grad():
        unflat(buf, [t.detach() for t in tensors])
    return int(at.item())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1000, help="global steps to train to")
    ap.add_argument("--batch", type=int, default=48, help="global batch size")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--step-ms", type=float, default=0,
                    help="sleep per step, standing in for a larger model's compute")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    train = fashion_mnist(args.data, "train")
    with dptrain.init(backend="cpu") as ctx:
        sampler = dpt.ElasticSampler(train, global_batch_size=args.batch, seed=args.seed,
                                     rank=ctx.rank, world_size=ctx.world_size)
        loader = torch.utils.data.DataLoader(train, batch_sampler=sampler)
        model = Net()
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
        for p in model.parameters():  # created up front: the same on every rank
            optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p)
        ck = dpt.Checkpoint(ctx)
        state = {"model": model, "optim": optimizer, "sampler": sampler}
        step = ck.load(state) or 0
        print("%s step=%d rank=%d world=%d" % ("resumed" if step else "fresh", step,
                                                ctx.rank, ctx.world_size), flush=True)
        batches, stop = iter(loader), False
        while step < args.steps and not stop:
            try:
                batch = next(batches, None)
                if batch is None:  # the epoch's end
                    batches = iter(loader)
                    continue
                loss = train_step(ctx, model, optimizer, batch, args.batch)
                step += 1  # the update is applied: the step counts
                print("trained step=%d gen=%d rank=%d world=%d loss=%.17g idx=%s" % (
                    step, ctx.generation, ctx.rank, ctx.world_size, loss,
                    ",".join(str(i) for i in batch[2].tolist())), flush=True)
                time.sleep(args.step_ms / 1000)
                stop = ck.step(step, state)
            except dptrain.DptrainError as e:
                if not e.restartable:
                    raise
                step = recover(ctx, ck, model, optimizer, step)
                sampler.load_state_dict(sampler.state_at(step))
                sampler.set_world(ctx.rank, ctx.world_size)
                batches = iter(loader)
                print("adopted step=%d gen=%d rank=%d world=%d" % (
                    step, ctx.generation, ctx.rank, ctx.world_size), flush=True)
        ck.finish(step, state)
        ck.close()
        params = [p.detach() for p in model.parameters()]
        digest = hashlib.sha256(b"".join(p.numpy().tobytes() for p in params))
        print("final step=%d gen=%d rank=%d world=%d params=%s sha256=%s" % (
            step, ctx.generation, ctx.rank, ctx.world_size,
            ",".join("%.9g" % p.double().norm().item() for p in params),
            digest.hexdigest()), flush=True)


if __name__ == "__main__":
    main()

"""bench/torch_ckpt.py: dptrain.torch's checkpoints of a PyTorch state
(a model and Adam's moments, about --gib GiB) against what PyTorch users
do today, in the same run, on the same file system:

- torch.save of the whole state by rank 0 into one file, fsync'd (what
  Lightning and most DDP scripts do: every rank waits for it at the next
  collective), and torch.load of it on every rank;
- dptrain.torch: Checkpoint.save (the training stalls only for the
  snapshot copy; the shards are written in the background by every rank,
  a share each), its commit (save + wait: what a stop at the walltime or
  a preemption needs of the GraceTime), and Checkpoint.load on every rank;
- the cost of Checkpoint.step per call when no save is due.

Run from the build tree (it starts the coordinator and the ranks itself):

    /usr/bin/python3 bench/torch_ckpt.py [--ranks 4] [--gib 1] [--saves 3] [--dir DIR] [--steps 2000]

and it prints one summary line with the ratios:

    torch_ckpt ranks=4 state_gib=1.00 torch_save_s=... dpt_stall_s=... stall_ratio=...
"""
import argparse
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.dirname(here)


def launch(args):
    """Starts the coordinator and the ranks; prints the summary."""
    work = tempfile.mkdtemp(prefix="torch_ckpt.", dir=args.dir)
    secret = secrets.token_hex(32)
    coord = subprocess.Popen(
        [os.path.join(top, "coordinator", "dptrain-coordinator"), "--world-size", str(args.ranks),
         "--bind", "tcp://127.0.0.1:*", "--log-level", "warn"],
        env=dict(os.environ, DPTRAIN_SECRET=secret), stdout=subprocess.PIPE, text=True)
    endpoint = coord.stdout.readline().strip()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, DPTRAIN_COORDINATOR=endpoint, DPTRAIN_SECRET=secret,
               DPTRAIN_CKPT_URI="file://" + work, DPTRAIN_RUN="bench",
               DPTRAIN_LIBRARY=os.environ.get("DPTRAIN_LIBRARY",
                                              os.path.join(top, "worker", ".libs", "libdptrain.so")),
               PYTHONPATH=os.path.join(top, "worker", "python"),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(args.ranks),
               LOCAL_WORLD_SIZE=str(args.ranks), OMP_NUM_THREADS="1")
    ranks = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--work", work] + sys.argv[1:],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r), SLURM_PROCID=str(r),
                                       SLURM_LOCALID=str(r)),
                              stdout=subprocess.PIPE, text=True)
             for r in range(args.ranks)]
    outs = [p.communicate()[0] for p in ranks]
    coord.wait(timeout=30)
    shutil.rmtree(work, ignore_errors=True)
    if any(p.returncode for p in ranks):
        sys.exit("a rank failed:\n" + "\n".join(outs))
    res = json.loads(outs[0].strip().splitlines()[-1])
    res["stall_ratio"] = res["dpt_stall_s"] / res["torch_save_s"]
    res["commit_ratio"] = res["dpt_commit_s"] / res["torch_save_s"]
    res["load_ratio"] = res["dpt_load_s"] / res["torch_load_s"]
    print("torch_ckpt " + " ".join(
        "%s=%s" % (k, ("%.4g" % v) if isinstance(v, float) else v) for k, v in res.items()))


def rank_main(args):
    import torch
    import torch.distributed as dist

    import dptrain.torch as dpt

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    # Square layers: the parameters are a third of the state, Adam's two
    # moments the rest.
    width = 4096
    layers = max(1, round(args.gib * 2**30 / 12 / (width * width + width)))
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()  # creates the moments
    state = {"model": model, "optim": opt}
    nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    nbytes += sum(t.numel() * t.element_size() for s in opt.state.values()
                  for t in s.values() if torch.is_tensor(t))
    res = {"ranks": world, "state_gib": nbytes / 2**30}

    # What users do today: rank 0 saves everything, every rank waits.
    path = os.path.join(args.work, "torch.pt")
    best = None
    for _ in range(args.saves):
        dist.barrier()
        t0 = time.perf_counter()
        if rank == 0:
            with open(path, "wb") as f:
                torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, f)
                f.flush()
                os.fsync(f.fileno())
        dist.barrier()
        best = min(best or 1e9, time.perf_counter() - t0)
    res["torch_save_s"] = best
    dist.barrier()
    t0 = time.perf_counter()
    sd = torch.load(path)
    model.load_state_dict(sd["model"])
    opt.load_state_dict(sd["optim"])
    del sd
    dist.barrier()
    res["torch_load_s"] = time.perf_counter() - t0
    if rank == 0:
        os.unlink(path)

    # dptrain.torch: the stall is the time in save(); the commit is save()
    # and wait(), on the slowest rank.
    ck = dpt.Checkpoint(signals=())
    stall, commit = [], []
    for step in range(1, args.saves + 2):
        dist.barrier()
        t0 = time.perf_counter()
        ck.save(step, state)
        t1 = time.perf_counter()
        ck.wait()
        dist.barrier()
        if step > 1:  # the first save maps its snapshot buffers
            stall.append(t1 - t0)
            commit.append(time.perf_counter() - t0)
    mine = torch.tensor([min(stall), min(commit)], dtype=torch.float64)
    dist.all_reduce(mine, op=dist.ReduceOp.MAX)
    res["dpt_stall_s"], res["dpt_commit_s"] = mine.tolist()
    dist.barrier()
    t0 = time.perf_counter()
    ck.load(state)
    dist.barrier()
    res["dpt_load_s"] = time.perf_counter() - t0

    # Checkpoint.step when nothing is due: one vote through the coordinator.
    step = args.saves + 10
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(args.steps):
        ck.step(step + i, state)
    res["step_us"] = (time.perf_counter() - t0) / args.steps * 1e6
    ck.close()
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(res), flush=True)


def main():
    ap = argparse.ArgumentParser(description="dptrain.torch checkpoints against torch.save")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--gib", type=float, default=1.0, help="state size (model + Adam)")
    ap.add_argument("--saves", type=int, default=3, help="timed saves of each kind (best kept)")
    ap.add_argument("--steps", type=int, default=2000, help="Checkpoint.step calls timed")
    ap.add_argument("--dir", default=None, help="where the checkpoints go (default $TMPDIR)")
    ap.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank is None:
        launch(args)
    else:
        rank_main(args)


if __name__ == "__main__":
    main()

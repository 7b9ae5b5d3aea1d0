"""The peer of bench/rendezvous: the same rendezvous with PyTorch's
TCPStore (the key-value store under torch.distributed's rendezvous).

N clients, all in this process as the simulated workers of
bench/rendezvous are in its: each connects and takes a rank with
add("rank", 1); rank 0 publishes a 128-byte ID with set("id", ...); each
client reads it with get("id"). Prints "seconds=S" (store creation to the
last client holding rank and ID), or "skip=REASON" when torch is missing.
No encryption and no liveness, unlike the coordinator.
"""
import os
import sys
import time
from datetime import timedelta

try:
    import torch
    import torch.distributed as dist
except ImportError as e:  # the bench prints the reason instead of a ratio
    print(f"skip=torch-not-importable({e.__class__.__name__})")
    sys.exit(0)


def main():
    n = int(sys.argv[1])
    timeout = timedelta(seconds=float(sys.argv[2]) if len(sys.argv) > 2 else 60)
    t0 = time.monotonic()
    server = dist.TCPStore("127.0.0.1", 0, n + 1, True, timeout,
                           wait_for_workers=False)
    clients, ranks = [], []
    for _ in range(n):
        c = dist.TCPStore("127.0.0.1", server.port, n + 1, False, timeout)
        clients.append(c)
        ranks.append(c.add("rank", 1) - 1)
    clients[ranks.index(0)].set("id", os.urandom(128))
    ids = [c.get("id") for c in clients]
    seconds = time.monotonic() - t0
    if sorted(ranks) != list(range(n)) or len(set(ids)) != 1:
        print("error=ranks-or-ids-wrong")
        sys.exit(1)
    print(f"seconds={seconds:.3f} torch={torch.__version__}", flush=True)
    # Tearing down thousands of stores takes longer than the rendezvous
    # (torch 1.13 joins its server thread slowly): nothing is left to do.
    os._exit(0)


try:
    main()
except Exception as e:  # e.g. too many open files: say so, do not hang
    print(f"error={e.__class__.__name__}", flush=True)
    os._exit(1)

# The dccl process group made again in the same job (destroy_process_group, then
# init_process_group on the same torchrun store), three rounds, no pause between
# them: each round's group rendezvouses on its own id (not a round before's) and a
# receive from any source names the rank that sent in that round (the announcements
# of an earlier round are not this one's); an all_reduce checks the group.
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch_dccl  # noqa: F401  registers the backend

r, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
for rnd in range(3):
    dist.init_process_group("dccl", timeout=datetime.timedelta(seconds=20))
    sender = 1 + rnd % (n - 1)
    if r == 0:
        t = torch.zeros(1)
        src = dist.recv(t)
        if src != sender or t.item() != 100.0 * (rnd + 1) + sender:
            sys.exit(f"reinit_check: round {rnd}: recv() from any source gave rank {src}, {t.item()}; "
                     f"expected rank {sender}, {100.0 * (rnd + 1) + sender}")
    elif r == sender:
        dist.send(torch.tensor([100.0 * (rnd + 1) + r]), 0)
    x = torch.full((5,), float(r + rnd), dtype=torch.float64)
    dist.all_reduce(x)
    want = float(n * (n - 1) / 2 + n * rnd)
    if x.tolist() != [want] * 5:
        sys.exit(f"reinit_check: round {rnd}: rank {r}: all_reduce gave {x.tolist()}, expected {want}")
    dist.destroy_process_group()
print(f"reinit_check: rank {r} of {n}: 3 rounds, any-source receives and all_reduce as expected")

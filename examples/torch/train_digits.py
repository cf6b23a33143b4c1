#!/usr/bin/env python3
"""DistributedDataParallel training of a small MLP on scikit-learn's digits.

    .venv/bin/torchrun --standalone --nproc_per_node 4 examples/torch/train_digits.py --backend dccl
    .venv/bin/torchrun --standalone --nproc_per_node 2 examples/torch/train_digits.py \\
        --backend cpu:gloo,cuda:dccl --device cuda        # one GPU per rank (LOCAL_RANK)

PyTorch 2.x (the project tests 2.11). The data set ships with scikit-learn (1797
8x8 images, no download). Every rank trains on its shard of the training split;
rank 0 prints the loss of each epoch and the accuracy on the held-out split. Set
PYTHONPATH to build/python (or install torch_dccl) for a backend naming dccl.

train() is also what tests/torch/ddp_check.py runs, once per backend.
"""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def load_digits(test_fraction=0.25, seed=0):
    """(x_train, y_train, x_test, y_test): features scaled to [0, 1], a fixed split."""
    from sklearn.datasets import load_digits as sk_digits

    data = sk_digits()
    x = torch.tensor(data.data, dtype=torch.float32) / 16.0
    y = torch.tensor(data.target, dtype=torch.int64)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    n_test = int(len(x) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def make_model(hidden=128, layers=2):
    dims = [64] + [hidden] * layers
    mods = []
    for a, b in zip(dims, dims[1:]):
        mods += [nn.Linear(a, b), nn.ReLU()]
    mods.append(nn.Linear(dims[-1], 10))
    return nn.Sequential(*mods)


def train(group=None, epochs=5, batch=32, lr=0.05, seed=1, hidden=128, layers=2, log=None, device="cpu"):
    """Trains with DDP over `group` (None: the default group) on `device` (a
    torch.device or its name); returns (model, accuracy on the test split, list
    of mean training losses per epoch)."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    device = torch.device(device)
    x, y, xt, yt = (t.to(device) for t in load_digits())
    torch.manual_seed(seed)  # the same initial parameters on every rank and backend
    ids = [device.index] if device.type == "cuda" else None
    model = DDP(make_model(hidden, layers).to(device), device_ids=ids, process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    # Rank r's shard: every world-th sample of a per-epoch permutation, equal sizes.
    per_rank = len(x) // world
    losses = []
    for epoch in range(epochs):
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed * 1000 + epoch)).to(device)
        mine = perm[rank : per_rank * world : world]
        total, steps = 0.0, 0
        for i in range(0, per_rank - batch + 1, batch):
            idx = mine[i : i + batch]
            opt.zero_grad()
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            total += loss.item()
            steps += 1
        losses.append(total / max(steps, 1))
        if log:
            log(f"epoch {epoch}: loss {losses[-1]:.4f}")
    with torch.no_grad():
        accuracy = (model(xt).argmax(1) == yt).float().mean().item()
    return model, accuracy, losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="dccl", help="dccl, gloo, or per device as cpu:gloo,cuda:dccl")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (the GPU of LOCAL_RANK)")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.1)
    args = ap.parse_args()
    if "dccl" in args.backend:
        try:
            import torch_dccl  # noqa: F401  registers the backend
        except ModuleNotFoundError:
            sys.exit("train_digits: no module torch_dccl: set PYTHONPATH to the build's python folder "
                     "(PYTHONPATH=build/python) or install DirectCCL")
    device = torch.device("cpu")
    if args.device == "cuda":
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            sys.exit("train_digits.py: --device cuda needs a CUDA device, and this machine has none (use --device cpu)")
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()
    log = (lambda s: print(s, flush=True)) if rank == 0 else None
    t0 = time.perf_counter()
    _, accuracy, _ = train(epochs=args.epochs, batch=args.batch, lr=args.lr, hidden=args.hidden, seed=args.seed, log=log,
                           device=device)
    if rank == 0:
        print(f"{args.backend}: {dist.get_world_size()} ranks, {args.epochs} epochs in "
              f"{time.perf_counter() - t0:.2f} s, test accuracy {accuracy:.4f}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

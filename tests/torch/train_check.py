#!/usr/bin/env python3
"""DDP and FSDP training over a backend ends where it ends over gloo.

    torchrun --nproc-per-node N train_check.py [--backend dccl] [--models mlp resnet18]
                                               [--wrappers ddp fsdp] [--steps S]

Trains each model under each wrapper twice in one job from the same seed on the
same data: over the default group (--backend) and over a gloo group of the same
ranks. Models: the digits MLP of examples/torch (64-128-128-10) on scikit-learn's
digits, and torchvision's ResNet-18 (10 classes) on the digits upscaled to 32x32x3.
Wrappers: DistributedDataParallel and FSDP2's fully_shard (every Linear or
ResNet stage its own unit, then the root). ResNet-18 trains in float64: its batch
norms over 4 samples (1x1 maps in layer4) amplify a float32 sum's last bit in
another order by 1e4 or more within 3 steps (float32 runs over two backends, or
over two of DirectCCL's algorithms, end 1e-4..5e-3 apart, and 3 % from float64's),
while float64's differences stay near 1e-13. Checks, on every rank:
  - the per-step losses agree with gloo's (rtol --rtol), and the final parameters
    (gathered whole) agree with gloo's;
  - the MLP's losses agree with a float64 single-process reference trained on the
    union of the ranks' batches (DDP's averaged gradient is that batch's), and it learns;
  - every rank holds the same parameters.
"""
import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from reference import Checker

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch"))
from train_digits import load_digits, make_model  # noqa: E402


def build(model_name, dtype=torch.float32):
    torch.manual_seed(1)  # the same initial parameters on every rank and backend
    if model_name == "mlp":
        m = make_model()
    else:
        import torchvision

        m = torchvision.models.resnet18(num_classes=10)
    return m.to(dtype)


def units(m, model_name):
    """The submodules fully_shard makes units of before the root."""
    if model_name == "mlp":
        return [x for x in m if isinstance(x, nn.Linear)]
    return [m.layer1, m.layer2, m.layer3, m.layer4]


def wrap(m, model_name, wrapper, group):
    if wrapper == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(m, process_group=group)
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    mesh = DeviceMesh.from_group(group or dist.group.WORLD, "cpu")
    for u in units(m, model_name):
        fully_shard(u, mesh=mesh)
    return fully_shard(m, mesh=mesh)


def batches(model_name, rank, world, steps, per_rank):
    """[(x, y)] per step for `rank`: rank r takes every world-th sample of the step's slice."""
    x, y, _, _ = load_digits()
    out = []
    for s in range(steps):
        lo = (s * per_rank * world) % (len(x) - per_rank * world)
        idx = torch.arange(lo + rank, lo + per_rank * world, world)
        xb, yb = x[idx], y[idx]
        if model_name == "resnet18":
            xb = F.interpolate(xb.view(-1, 1, 8, 8), size=32, mode="bilinear", align_corners=False).repeat(1, 3, 1, 1)
        out.append((xb, yb))
    return out


def full_params(m):
    """The whole parameters (FSDP's DTensor shards gathered), by name."""
    out = {}
    for name, p in m.named_parameters():
        p = p.detach()
        if hasattr(p, "full_tensor"):
            p = p.full_tensor()
        out[name.replace("module.", "")] = p.clone()
    return out


def train(model_name, wrapper, group, data, lr, dtype):
    m = wrap(build(model_name, dtype), model_name, wrapper, group)
    opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9)
    losses = []
    for xb, yb in data:
        opt.zero_grad()
        loss = F.cross_entropy(m(xb.to(dtype)), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, full_params(m)


def reference_losses(model_name, world, steps, per_rank, lr):
    """float64, one process: the mean over ranks of each rank's loss, trained on the union."""
    m = build(model_name, torch.float64)
    opt = torch.optim.SGD(m.parameters(), lr=lr, momentum=0.9)
    parts = [batches(model_name, r, world, steps, per_rank) for r in range(world)]
    out = []
    for s in range(steps):
        opt.zero_grad()
        losses = [F.cross_entropy(m(parts[r][s][0].double()), parts[r][s][1]) for r in range(world)]
        loss = sum(losses) / world  # the mean of the ranks' losses: DDP's averaged gradient
        loss.backward()
        opt.step()
        out.append(loss.item())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="dccl")
    ap.add_argument("--models", nargs="+", default=["mlp", "resnet18"])
    ap.add_argument("--wrappers", nargs="+", default=["ddp", "fsdp"])
    ap.add_argument("--steps", type=int, default=0, help="steps per run (0: 30 for the MLP, 3 for ResNet-18)")
    ap.add_argument("--rtol", type=float, default=1e-4, help="the MLP's losses and parameters against gloo's")
    ap.add_argument("--rtol-resnet", type=float, default=1e-9,
                    help="ResNet-18's (float64): its batch norms over 4 samples amplify the last-bit differences "
                         "of a sum in another order (3 or more ranks) step by step, to about 1e-13")
    args = ap.parse_args()
    if args.backend == "dccl":
        import torch_dccl  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    c = Checker(rank)
    gloo = dist.new_group(backend="gloo")
    for model_name in args.models:
        steps = args.steps or (30 if model_name == "mlp" else 3)
        per_rank = 32 if model_name == "mlp" else 4
        lr = 0.1 if model_name == "mlp" else 0.002
        rtol = args.rtol if model_name == "mlp" else args.rtol_resnet
        dtype = torch.float32 if model_name == "mlp" else torch.float64
        data = batches(model_name, rank, world, steps, per_rank)
        ref = reference_losses(model_name, world, steps, per_rank, lr) if model_name == "mlp" else None
        for wrapper in args.wrappers:
            tag = f"{model_name} {wrapper}"
            got, p_got = train(model_name, wrapper, None, data, lr, dtype)
            want, p_want = train(model_name, wrapper, gloo, data, lr, dtype)
            worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(got, want))
            print(f"rank {rank}: {tag}: losses {args.backend} {[round(v, 5) for v in got]}, "
                  f"gloo {[round(v, 5) for v in want]} (largest relative difference {worst:.2e})", flush=True)
            c.true(f"{tag}: losses within rtol {rtol} of gloo's (largest {worst:.2e})", worst <= rtol)
            c.true(f"{tag}: first loss (same parameters, no reduction yet) equal to gloo's", got[0] == want[0])
            for name, a in p_got.items():
                b = p_want[name]
                c.same(f"{tag}: parameter {name}", a, b, atol=rtol * max(1.0, float(b.abs().max())))
                copies = [torch.empty_like(a) for _ in range(world)]
                dist.all_gather(copies, a, group=gloo)
                c.true(f"{tag}: parameter {name} equal on every rank", all(torch.equal(x, copies[0]) for x in copies))
            if ref is not None:
                mean = torch.tensor(got, dtype=torch.float64)
                dist.all_reduce(mean, group=gloo)
                mean /= world
                worst_ref = max(abs(a - b) / abs(b) for a, b in zip(mean.tolist(), ref))
                print(f"rank {rank}: {tag}: mean loss against the float64 reference: largest relative "
                      f"difference {worst_ref:.2e}; loss {ref[0]:.4f} -> {ref[-1]:.4f}", flush=True)
                c.true(f"{tag}: mean losses within 1e-3 of the float64 reference ({worst_ref:.2e})", worst_ref <= 1e-3)
                late = sum(ref[-5:]) / 5
                c.true(f"{tag}: learns (reference loss {ref[0]:.3f}, last 5 steps {late:.3f})", late < 0.5 * ref[0])
    dist.destroy_process_group()
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())

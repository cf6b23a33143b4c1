#!/usr/bin/env python3
"""DDP training on the digits data over dccl ends where it ends over gloo.

    torchrun ... ddp_check.py [EPOCHS]

Runs examples/torch/train_digits.py's train() twice in one job from the same
seed: over the default (dccl) group, then over a gloo group of the same ranks.
Passes when the final parameters agree (allclose), the test accuracies and the
per-epoch losses agree, the model learned (accuracy > 0.85), and every rank
holds the same parameters.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist

import torch_dccl  # noqa: F401
from reference import Checker

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "torch"))
from train_digits import train  # noqa: E402


def main():
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    dist.init_process_group("dccl", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    c = Checker(rank)
    gloo = dist.new_group(backend="gloo")
    m_dccl, acc_dccl, loss_dccl = train(None, epochs=epochs)
    m_gloo, acc_gloo, loss_gloo = train(gloo, epochs=epochs)
    print(f"rank {rank}: accuracy dccl {acc_dccl:.4f} gloo {acc_gloo:.4f}; "
          f"losses dccl {[round(x, 5) for x in loss_dccl]} gloo {[round(x, 5) for x in loss_gloo]}", flush=True)
    c.true(f"learned (accuracy {acc_dccl:.3f} > 0.85)", acc_dccl > 0.85)
    c.true("same accuracy", abs(acc_dccl - acc_gloo) < 1e-9)
    c.true("same losses", all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for a, b in zip(loss_dccl, loss_gloo)))
    exact = 0
    for (name, a), (_, b) in zip(m_dccl.module.named_parameters(), m_gloo.module.named_parameters()):
        c.same(f"parameter {name}", a.detach(), b.detach(), atol=1e-5)
        exact += int(torch.equal(a, b))
        # every rank holds the same parameters (gathered over gloo)
        copies = [torch.empty_like(a) for _ in range(dist.get_world_size())]
        dist.all_gather(copies, a.detach(), group=gloo)
        c.true(f"parameter {name} equal on every rank", all(torch.equal(x, copies[0]) for x in copies))
    print(f"rank {rank}: {exact} of {len(list(m_dccl.parameters()))} parameters bitwise equal to gloo's", flush=True)
    dist.destroy_process_group()
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""torch.distributed over dccl against gloo, in the same job on the same ranks.

    PYTHONPATH=build/python bench/torch_bench.py [--ranks 2 4] [--repeats 5] [--json FILE]

Starts torchrun for each rank count with itself as the worker. Each worker
makes the default group over dccl and a gloo group over the same ranks, then
measures, alternating the two backends (and which goes first) repeat by repeat:
  - all_reduce (float32 sum, in place, blocking) at 1 KiB, 1 MiB and 64 MiB:
    time per call (the slowest rank's), algorithm bandwidth size/time;
  - a DistributedDataParallel step (forward, backward with the gradient
    all_reduce, SGD; and the same step without DDP, for the compute alone) on the digits MLP of examples/torch (64-128-128-10, 26 K
    parameters) and on a wider MLP (64-1024-1024-1024-10, 2.2 M parameters).
Prints a markdown table of medians (and dccl/gloo ratios); --json keeps the raw
samples. Not a test: numbers depend on the machine and its load.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

SIZES = [(1 << 10, "1 KiB", 400), (1 << 20, "1 MiB", 40), (64 << 20, "64 MiB", 4)]
MODELS = [("digits MLP", 128, 2, 30), ("wide MLP", 1024, 3, 10)]


def order(items, rep):
    """The backends in turn, first one then the other going first."""
    items = list(items)
    return items if rep % 2 == 0 else items[::-1]


def slowest(seconds, group):
    import torch
    import torch.distributed as dist

    t = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return float(t[0])


def bench_allreduce(groups, meter, repeats):
    import torch
    import torch.distributed as dist

    out = {}
    for nbytes, label, iters in SIZES:
        t = torch.ones(nbytes // 4)
        samples = {name: [] for name in groups}
        for name, g in groups.items():  # warm-up: registrations, first-touch
            for _ in range(2):
                dist.all_reduce(t, group=g)
        for rep in range(repeats):
            for name, g in order(groups.items(), rep):
                dist.barrier(group=meter)
                t0 = time.perf_counter()
                for _ in range(iters):
                    dist.all_reduce(t, group=g)
                samples[name].append(slowest((time.perf_counter() - t0) / iters, meter))
        out[label] = {"bytes": nbytes, "samples": samples}
    return out


def bench_ddp(groups, meter, repeats):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "examples", "torch"))
    from train_digits import load_digits, make_model

    x, y, _, _ = load_digits()
    out = {}
    for label, hidden, layers, steps in MODELS:
        models = {}
        for name, g in list(groups.items()) + [("none", "none")]:
            torch.manual_seed(1)
            # "none": the same step without DDP, the compute the others add communication to
            m = make_model(hidden, layers) if g == "none" else DDP(make_model(hidden, layers), process_group=g)
            models[name] = (m, torch.optim.SGD(m.parameters(), lr=0.01))
        nparams = sum(p.numel() for p in models[next(iter(models))][0].parameters())
        loss_fn = nn.CrossEntropyLoss()
        xb, yb = x[:32], y[:32]

        def step(m, opt):
            opt.zero_grad()
            loss_fn(m(xb), yb).backward()
            opt.step()

        samples = {name: [] for name in models}
        for name, (m, opt) in models.items():
            for _ in range(3):
                step(m, opt)
        for rep in range(repeats):
            for name, (m, opt) in order(models.items(), rep):
                dist.barrier(group=meter)
                t0 = time.perf_counter()
                for _ in range(steps):
                    step(m, opt)
                samples[name].append(slowest((time.perf_counter() - t0) / steps, meter))
        out[label] = {"params": nparams, "samples": samples}
    return out


def worker(repeats):
    import torch
    import torch.distributed as dist

    import torch_dccl  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("dccl", timeout=datetime.timedelta(seconds=300))
    gloo = dist.new_group(backend="gloo")
    meter = dist.new_group(backend="gloo")  # barriers and timings, off both measured groups
    groups = {"dccl": None, "gloo": gloo}
    res = {"ranks": dist.get_world_size(), "all_reduce": bench_allreduce(groups, meter, repeats),
           "ddp": bench_ddp(groups, meter, repeats)}
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(res), flush=True)
    dist.destroy_process_group()


def run(n, repeats):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--rdzv_backend", "c10d", "--rdzv_endpoint",
           "127.0.0.1:0", "--nnodes", "1", "--nproc_per_node", str(n), "--redirects", "1", "--tee", "1",
           os.path.abspath(__file__), "--worker", "--repeats", str(repeats)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    for line in out.stdout.splitlines():
        if "RESULT " in line:
            return json.loads(line.split("RESULT ", 1)[1])
    sys.exit(f"torch_bench: {n} ranks failed (exit {out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")


def fmt_time(s):
    return f"{s * 1e6:.0f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def table(results):
    lines = ["| ranks | measure | dccl | gloo | gloo/dccl time |", "|---|---|---|---|---|"]
    for res in results:
        n = res["ranks"]
        for label, r in res["all_reduce"].items():
            d, g = (statistics.median(r["samples"][k]) for k in ("dccl", "gloo"))
            bw = lambda s: f"{r['bytes'] / s / 1e9:.2f} GB/s"  # noqa: E731
            lines.append(f"| {n} | all_reduce {label} | {fmt_time(d)} ({bw(d)}) | {fmt_time(g)} ({bw(g)}) | "
                         f"**{g / d:.2f}** |")
        for label, r in res["ddp"].items():
            d, g = (statistics.median(r["samples"][k]) for k in ("dccl", "gloo"))
            c = statistics.median(r["samples"]["none"])
            lines.append(f"| {n} | DDP step, {label} ({r['params'] / 1e6:.2f} M params; {fmt_time(c)} without DDP) | "
                         f"{fmt_time(d)} | {fmt_time(g)} | **{g / d:.2f}** |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="write the raw samples here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.repeats)
    results = [run(n, args.repeats) for n in args.ranks]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

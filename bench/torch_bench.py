#!/usr/bin/env python3
"""torch.distributed over dccl against gloo, in the same job on the same ranks.

    PYTHONPATH=build/python bench/torch_bench.py [--ranks 2 4] [--repeats 5] [--json FILE]

Starts torchrun for each rank count with itself as the worker. Each worker makes
the default group over dccl and a gloo group over the same ranks (and a third,
gloo, group for barriers and timings), then measures, alternating the two
backends (and which goes first) repeat by repeat:
  - all_reduce (float32 sum, in place), all_gather_into_tensor and
    reduce_scatter_tensor, blocking, at 1 KiB to 64 MiB (the size of the whole
    tensor: all_reduce's buffer, all_gather's output, reduce_scatter's input):
    time per call (the slowest rank's), algorithm bandwidth size/time;
  - a training step (forward, backward, SGD) under DistributedDataParallel and
    under FSDP2's fully_shard (each Linear a unit), and the same step without
    either (the compute alone), on the digits MLP of examples/torch (64-128-128-10,
    26 K parameters) and on a wider MLP (64-1024-1024-1024-10, 2.2 M parameters).
Prints a markdown table of medians and gloo/dccl time ratios (above 1: dccl is
faster); --json keeps the raw samples. Not a test: numbers depend on the machine
and its load.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "torch"))
KIB, MIB = 1 << 10, 1 << 20
SIZES = [1 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, 1 * MIB, 4 * MIB, 16 * MIB, 64 * MIB]
OPS = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"]
MODELS = [("digits MLP", 128, 2, 30), ("wide MLP", 1024, 3, 8)]


def label(nbytes):
    return f"{nbytes // MIB} MiB" if nbytes >= MIB else f"{nbytes // KIB} KiB"


def iters_for(nbytes):
    """Calls per sample: about 16 MiB moved, 2 to 200 calls."""
    return max(2, min(200, (16 * MIB) // nbytes))


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


def op_call(op, nbytes, world):
    """A closure running `op` on group g with buffers of the op's size made once."""
    import torch
    import torch.distributed as dist

    n = max(world, nbytes // 4 // world * world)  # float32 elements, a multiple of the world size
    if op == "all_reduce":
        t = torch.ones(n)
        return lambda g: dist.all_reduce(t, group=g)
    if op == "all_gather_into_tensor":
        out, inp = torch.empty(n), torch.ones(n // world)
        return lambda g: dist.all_gather_into_tensor(out, inp, group=g)
    inp, out = torch.ones(n), torch.empty(n // world)
    return lambda g: dist.reduce_scatter_tensor(out, inp, group=g)


def bench_ops(groups, meter, repeats, world):
    import torch.distributed as dist

    out = {}
    for op in OPS:
        for nbytes in SIZES:
            call, iters = op_call(op, nbytes, world), iters_for(nbytes)
            samples = {name: [] for name in groups}
            for g in groups.values():  # warm-up: registrations, first touch
                for _ in range(2):
                    call(g)
            for rep in range(repeats):
                for name, g in order(groups.items(), rep):
                    dist.barrier(group=meter)
                    t0 = time.perf_counter()
                    for _ in range(iters):
                        call(g)
                    samples[name].append(slowest((time.perf_counter() - t0) / iters, meter))
            out[f"{op} {label(nbytes)}"] = {"op": op, "bytes": nbytes, "samples": samples}
    return out


def wrapped(kind, hidden, layers, group):
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    from train_digits import make_model

    torch.manual_seed(1)
    m = make_model(hidden, layers)
    if kind == "DDP":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(m, process_group=group)
    if kind == "FSDP":
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.fsdp import fully_shard

        mesh = DeviceMesh.from_group(group or dist.group.WORLD, "cpu")
        for layer in m:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        return fully_shard(m, mesh=mesh)
    return m


def bench_steps(groups, meter, repeats):
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    from train_digits import load_digits

    x, y, _, _ = load_digits()
    xb, yb = x[:32], y[:32]
    loss_fn = nn.CrossEntropyLoss()
    out = {}
    for label_, hidden, layers, steps in MODELS:
        for kind in ("DDP", "FSDP"):
            models = {}
            for name, g in list(groups.items()) + [("none", "none")]:
                m = wrapped("none" if g == "none" else kind, hidden, layers, None if g == "none" else g)
                models[name] = (m, torch.optim.SGD(m.parameters(), lr=0.01))
            nparams = sum(p.numel() for p in models["none"][0].parameters())

            def step(m, opt):
                opt.zero_grad()
                loss_fn(m(xb), yb).backward()
                opt.step()

            samples = {name: [] for name in models}
            for m, opt in models.values():
                for _ in range(3):
                    step(m, opt)
            for rep in range(repeats):
                for name, (m, opt) in order(models.items(), rep):
                    dist.barrier(group=meter)
                    t0 = time.perf_counter()
                    for _ in range(steps):
                        step(m, opt)
                    samples[name].append(slowest((time.perf_counter() - t0) / steps, meter))
            out[f"{kind} step, {label_}"] = {"params": nparams, "samples": samples}
    return out


def worker(repeats, backend):
    import torch
    import torch.distributed as dist

    if backend == "dccl":
        import torch_dccl  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=300))
    gloo = dist.new_group(backend="gloo")
    meter = dist.new_group(backend="gloo")  # barriers and timings, off both measured groups
    groups = {"dccl": None, "gloo": gloo}  # "dccl": the measured backend, whichever it is
    world = dist.get_world_size()
    res = {"ranks": world, "backend": backend, "torch": torch.__version__, "ops": bench_ops(groups, meter, repeats, world),
           "steps": bench_steps(groups, meter, repeats)}
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(res), flush=True)
    dist.destroy_process_group()


def run(n, repeats, backend):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--rdzv-backend", "c10d", "--rdzv-endpoint",
           "127.0.0.1:0", "--nnodes", "1", "--nproc-per-node", str(n), "--redirects", "1", "--tee", "1",
           os.path.abspath(__file__), "--worker", "--repeats", str(repeats),
           "--backend", backend]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    for line in out.stdout.splitlines():
        if "RESULT " in line:
            return json.loads(line.split("RESULT ", 1)[1])
    sys.exit(f"torch_bench: {n} ranks failed (exit {out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")


def fmt_time(s):
    return f"{s * 1e6:.0f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def table(results):
    name = results[0]["backend"]
    lines = [f"| ranks | measure | {name} | gloo | gloo/{name} time |", "|---|---|---|---|---|"]
    for res in results:
        n = res["ranks"]
        for key, r in res["ops"].items():
            d, g = (statistics.median(r["samples"][k]) for k in ("dccl", "gloo"))
            bw = lambda s: f"{r['bytes'] / s / 1e9:.2f} GB/s"  # noqa: E731
            lines.append(f"| {n} | {key} | {fmt_time(d)} ({bw(d)}) | {fmt_time(g)} ({bw(g)}) | **{g / d:.2f}** |")
        for key, r in res["steps"].items():
            d, g = (statistics.median(r["samples"][k]) for k in ("dccl", "gloo"))
            c = statistics.median(r["samples"]["none"])
            lines.append(f"| {n} | {key} ({r['params'] / 1e6:.2f} M params; {fmt_time(c)} unwrapped) | "
                         f"{fmt_time(d)} | {fmt_time(g)} | **{g / d:.2f}** |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", help="write the raw samples here")
    ap.add_argument("--backend", default="dccl", help="the backend measured against gloo (gloo: the harness alone)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.repeats, args.backend)
    results = [run(n, args.repeats, args.backend) for n in args.ranks]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

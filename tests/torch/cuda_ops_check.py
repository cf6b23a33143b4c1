#!/usr/bin/env python3
"""The dccl backend on CUDA tensors, under torchrun, on one GPU or more:

    torchrun --standalone --nproc_per_node 2 tests/torch/cuda_ops_check.py

(scripts/gpu-check's torch step runs it: 2 ranks on the one GPU.) Each rank uses
the GPU of LOCAL_RANK modulo the GPUs there are. Checks, against float64
references computed here from every rank's inputs (each rank can rebuild them):
  - stream order: a collective issued after slow work queued on the current
    stream sees that work's result, and work queued after Work.wait() sees the
    collective's (with TORCH_DCCL_STREAM_WAIT=1 also: wait() returned without
    waiting for the GPU);
  - every operation on CUDA tensors: all_reduce (SUM, AVG, MAX, PREMUL_SUM),
    broadcast, reduce, all_gather (list and tensor), reduce_scatter (list and
    tensor), all_to_all_single with uneven splits, gather, scatter, send/recv,
    batch_isend_irecv, barrier;
  - refusals: a non-contiguous CUDA tensor, an output on another device;
  - init_process_group("cpu:gloo,cuda:dccl"): CUDA tensors through dccl, CPU
    tensors through gloo.
Prints "cuda_ops_check: N checks passed" last and exits 0, or lists failures.
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_dccl
from reference import PREMUL_FACTOR, Checker, make_input, reduce_ref, tolerance

F32 = torch.float32


def ref(inputs, name, dtype=F32):
    return reduce_ref(inputs, name), tolerance(inputs, name, dtype)


def check_stream_order(c, dev, me, n):
    """The collective runs after the slow fill queued before it; wait() is a queued wait."""
    s = torch.cuda.Stream(device=dev)
    with torch.cuda.stream(s):
        x = torch.zeros(1 << 20, device=dev)
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU time before the fill
        x.fill_(float(me + 1))
        t0 = time.perf_counter()
        w = dist.all_reduce(x, async_op=True)
        w.wait()
        waited = time.perf_counter() - t0
        y = x * 2  # queued after the wait: must see the sum
    torch.cuda.synchronize(dev)
    want = float(n * (n + 1))
    c.true(f"stream order: the collective saw the fill queued before it ({x[0].item()})", x[0].item() == want / 2)
    c.true(f"stream order: work after wait() saw the result ({y[0].item()})", bool((y == want).all().item()))
    if os.environ.get("TORCH_DCCL_STREAM_WAIT") == "1":
        c.true(f"wait() did not synchronize the host ({waited * 1e3:.1f} ms)", waited < 0.05)


def check_ops(c, dev, me, n):
    ins = [make_input(7, r, F32, (1000,)) for r in range(n)]
    for name, op in [("SUM", dist.ReduceOp.SUM), ("AVG", dist.ReduceOp.AVG), ("MAX", dist.ReduceOp.MAX),
                     ("PREMUL", dist._make_nccl_premul_sum(PREMUL_FACTOR))]:
        t = ins[me].to(dev)
        dist.all_reduce(t, op=op)
        want, tol = ref(ins, name)
        c.same(f"cuda all_reduce {name}", t.cpu(), want, tol)
    for root in range(n):
        t = ins[me].to(dev)
        dist.broadcast(t, src=root)
        c.same(f"cuda broadcast root {root}", t.cpu(), ins[root])
        t = ins[me].to(dev)
        dist.reduce(t, dst=root)
        if me == root:
            want, tol = ref(ins, "SUM")
            c.same(f"cuda reduce root {root}", t.cpu(), want, tol)
    outs = [torch.empty(1000, device=dev) for _ in range(n)]
    dist.all_gather(outs, ins[me].to(dev))
    for r in range(n):
        c.same(f"cuda all_gather [{r}]", outs[r].cpu(), ins[r])
    out = torch.empty(n * 1000, device=dev)
    dist.all_gather_into_tensor(out, ins[me].to(dev))
    c.same("cuda all_gather_into_tensor", out.cpu(), torch.cat(ins))
    blocks = [make_input(11, r, F32, (n * 4,)) for r in range(n)]
    mine = [b[4 * me:4 * me + 4] for b in blocks]
    want, tol = ref(mine, "SUM")
    got = torch.empty(4, device=dev)
    dist.reduce_scatter_tensor(got, blocks[me].to(dev))
    c.same("cuda reduce_scatter_tensor", got.cpu(), want, tol)
    got = torch.empty(4, device=dev)
    dist.reduce_scatter(got, [blocks[me][4 * b:4 * b + 4].to(dev) for b in range(n)])
    c.same("cuda reduce_scatter", got.cpu(), want, tol)
    rows = lambda r, b: r + b + 1  # noqa: E731  rank r sends r + b + 1 rows to rank b
    src = [make_input(6, r, F32, (sum(rows(r, b) for b in range(n)), 2)) for r in range(n)]
    want = torch.cat([src[r][sum(rows(r, b) for b in range(me)):][:rows(r, me)] for r in range(n)])
    got = torch.empty(want.shape, device=dev)
    dist.all_to_all_single(got, src[me].to(dev), output_split_sizes=[rows(r, me) for r in range(n)],
                           input_split_sizes=[rows(me, b) for b in range(n)])
    c.same("cuda all_to_all_single uneven", got.cpu(), want)
    for root in range(n):
        gl = [torch.empty(1000, device=dev) for _ in range(n)] if me == root else None
        dist.gather(ins[me].to(dev), gl, dst=root)
        if me == root:
            for r in range(n):
                c.same(f"cuda gather root {root} [{r}]", gl[r].cpu(), ins[r])
        got = torch.empty(1000, device=dev)
        dist.scatter(got, [ins[r].to(dev) for r in range(n)] if me == root else None, src=root)
        c.same(f"cuda scatter root {root}", got.cpu(), ins[me])
    nxt, prv = (me + 1) % n, (me - 1) % n
    got = torch.empty(1000, device=dev)
    if me % 2 == 0:
        dist.send(ins[me].to(dev), nxt)
        dist.recv(got, prv)
    else:
        dist.recv(got, prv)
        dist.send(ins[me].to(dev), nxt)
    c.same("cuda send/recv ring", got.cpu(), ins[prv])
    got = torch.empty(1000, device=dev)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, ins[me].to(dev), nxt), dist.P2POp(dist.irecv, got, prv)])
    for r in reqs:
        r.wait()
    c.same("cuda batch_isend_irecv", got.cpu(), ins[prv])
    dist.barrier()
    c.true("barrier", True)


def check_refusals(c, dev):
    c.raises("non-contiguous CUDA tensor", "must be contiguous", dist.all_reduce, torch.ones(4, 6, device=dev).t())
    c.raises("output on another device", "is on cpu", dist.all_gather_into_tensor,
             torch.empty(dist.get_world_size() * 4), torch.ones(4, device=dev))


def stage(what):
    if os.environ.get("CUDA_OPS_CHECK_VERBOSE"):
        print(f"rank {os.environ.get('RANK')}: {what}", file=sys.stderr, flush=True)


def main():
    if os.environ.get("CUDA_OPS_CHECK_VERBOSE"):
        import faulthandler

        faulthandler.dump_traceback_later(40, exit=False)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("dccl", timeout=datetime.timedelta(seconds=60))
    me, n = dist.get_rank(), dist.get_world_size()
    c = Checker(me)
    c.true("torch_dccl built with CUDA", torch_dccl.cuda)
    stage("init done")
    t = torch.ones(4, device=dev)
    dist.all_reduce(t)
    stage(f"first all_reduce {t.tolist()}")
    check_stream_order(c, dev, me, n)
    stage("stream order done")
    check_ops(c, dev, me, n)
    stage("ops done")
    check_refusals(c, dev)
    dist.destroy_process_group()
    dist.init_process_group("cpu:gloo,cuda:dccl", timeout=datetime.timedelta(seconds=60))
    t, u = torch.full((8,), float(me + 1), device=dev), torch.full((8,), float(me + 1))
    dist.all_reduce(t)
    dist.all_reduce(u)
    c.same("mixed: cuda all_reduce (dccl)", t.cpu(), torch.full((8,), float(n * (n + 1) // 2)))
    c.same("mixed: cpu all_reduce (gloo)", u, torch.full((8,), float(n * (n + 1) // 2)))
    c.true("mixed: the cuda backend is dccl", torch_dccl.is_dccl(dist.group.WORLD._get_backend(dev)))
    dist.destroy_process_group()
    rc = c.finish()
    if rc == 0 and me == 0:
        print(f"cuda_ops_check: {c.passed} checks passed on {n} ranks", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Every operation of the dccl backend against gloo, under torchrun.

    torchrun --standalone --nproc_per_node N --redirects 1 --tee 1 ops_check.py

The default group is dccl; a gloo group over the same ranks runs every
operation on the same inputs. Where gloo refuses a dtype or an op (bfloat16,
bool, AVG), the reference is computed here from every rank's inputs, which
each rank can rebuild (they are a function of the seed and the rank). Integers
and bool compare exactly, floats with allclose. The same for a subset group
(new_group), the refusals at call time, non-contiguous tensors and the Work
interface. Exits 1 with the list of failures, 0 when every check passed.
"""
import datetime
import sys

import torch
import torch.distributed as dist

import torch_dccl  # noqa: F401  registers "dccl"
from reference import PREMUL_FACTOR, Checker, make_input, reduce_ref, same_on_gloo, tolerance

DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64, torch.bool]
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG}


def ops_for(dtype):
    if dtype == torch.bool:
        return ["MIN", "MAX", "PRODUCT"]
    return list(OPS) + (["PREMUL"] if dtype.is_floating_point else [])


def op_of(name, tensor_factor=False):
    """The ReduceOp for a name; PREMUL is PREMUL_SUM of PREMUL_FACTOR, given as a
    float or as a one-element tensor."""
    if name != "PREMUL":
        return OPS[name]
    return dist._make_nccl_premul_sum([torch.tensor([PREMUL_FACTOR])] if tensor_factor else PREMUL_FACTOR)


def check_reductions(c, g, ref_g, ranks, dtype):
    """all_reduce (every op), reduce, reduce_scatter (list and tensor) on group g."""
    me, n = dist.get_rank(g), len(ranks)
    for name in ops_for(dtype):
        op = op_of(name)
        inputs = [make_input(7, r, dtype, (5, 3)) for r in range(n)]
        tol = tolerance(inputs, name, dtype)
        want = same_on_gloo(ref_g, lambda t: dist.all_reduce(t, op=op, group=ref_g), inputs[me].clone(),
                            lambda: reduce_ref(inputs, name))
        got = inputs[me].clone()
        dist.all_reduce(got, op=op, group=g)
        c.same(f"all_reduce {name} {dtype}", got, want, tol)
        # reduce to the last rank: only the root's tensor is defined afterwards
        root = n - 1
        got = inputs[me].clone()
        dist.reduce(got, dst=ranks[root], op=op_of(name, tensor_factor=True), group=g)
        if me == root:
            c.same(f"reduce {name} {dtype}", got, reduce_ref(inputs, name), tol)
    names = ("MAX",) if dtype == torch.bool else ("SUM", "MAX", "PREMUL") if dtype.is_floating_point else ("SUM", "MAX")
    for name in names:
        op = op_of(name)
        blocks = [[make_input(11 + b, r, dtype, (4,)) for b in range(n)] for r in range(n)]
        mine = [blocks[r][me] for r in range(n)]
        tol = tolerance(mine, name, dtype)
        # gloo 1.13 has no reduce_scatter: its all_reduce of the whole, this rank's block
        whole = same_on_gloo(ref_g, lambda t: dist.all_reduce(t, op=op, group=ref_g), torch.cat(blocks[me]),
                             lambda: None)
        want = whole[4 * me:4 * me + 4] if whole is not None else reduce_ref(mine, name)
        got = torch.empty(4, dtype=dtype)
        dist.reduce_scatter(got, [t.clone() for t in blocks[me]], op=op, group=g)
        c.same(f"reduce_scatter {name} {dtype}", got, want, tol)
        got = torch.empty(4, dtype=dtype)
        dist.reduce_scatter_tensor(got, torch.cat(blocks[me]), op=op_of(name, tensor_factor=True), group=g)
        c.same(f"reduce_scatter_tensor {name} {dtype}", got, want, tol)


def check_movement(c, g, ref_g, ranks, dtype):
    """broadcast, all_gather (list, tensor), all_to_all (list, single even and uneven), send/recv."""
    me, n = dist.get_rank(g), len(ranks)
    inputs = [make_input(3, r, dtype, (6,)) for r in range(n)]
    for root in range(n):
        got = inputs[me].clone()
        dist.broadcast(got, src=ranks[root], group=g)
        c.same(f"broadcast root {root} {dtype}", got, inputs[root])
    ref = [torch.empty(6, dtype=dtype) for _ in range(n)]
    ref = same_on_gloo(ref_g, lambda t: dist.all_gather(t, inputs[me], group=ref_g), ref, lambda: inputs)
    got = [torch.empty(6, dtype=dtype) for _ in range(n)]
    dist.all_gather(got, inputs[me], group=g)
    for r in range(n):
        c.same(f"all_gather [{r}] {dtype}", got[r], ref[r])
        c.same(f"all_gather [{r}] {dtype} input", got[r], inputs[r])
    got = torch.empty(n * 6, dtype=dtype)
    dist.all_gather_into_tensor(got, inputs[me], group=g)
    c.same(f"all_gather_into_tensor {dtype}", got, torch.cat(ref))
    # all_to_all_single, even: block b of rank r goes to rank b
    src = [make_input(5, r, dtype, (n * 2, 3)) for r in range(n)]
    got = torch.empty(n * 2, 3, dtype=dtype)
    dist.all_to_all_single(got, src[me], group=g)
    c.same(f"all_to_all_single even {dtype}", got, torch.cat([src[r][2 * me:2 * me + 2] for r in range(n)]))
    # uneven: rank r sends r + b + 1 rows to rank b
    rows = lambda r, b: r + b + 1  # noqa: E731
    src = [make_input(6, r, dtype, (sum(rows(r, b) for b in range(n)), 2)) for r in range(n)]
    want = []
    for r in range(n):
        start = sum(rows(r, b) for b in range(me))
        want.append(src[r][start:start + rows(r, me)])
    want = torch.cat(want)
    got = torch.empty_like(want)
    dist.all_to_all_single(got, src[me], output_split_sizes=[rows(r, me) for r in range(n)],
                           input_split_sizes=[rows(me, b) for b in range(n)], group=g)
    c.same(f"all_to_all_single uneven {dtype}", got, want)
    ref = same_on_gloo(ref_g, lambda t: dist.all_to_all_single(
        t, src[me], output_split_sizes=[rows(r, me) for r in range(n)],
        input_split_sizes=[rows(me, b) for b in range(n)], group=ref_g), torch.empty_like(want), lambda: want)
    c.same(f"all_to_all_single uneven {dtype} vs gloo", got, ref)
    # all_to_all (list), blocks of different sizes
    ins = [make_input(8 + b, me, dtype, (rows(me, b),)) for b in range(n)]
    got = [torch.empty(rows(r, me), dtype=dtype) for r in range(n)]
    dist.all_to_all(got, ins, group=g)
    for r in range(n):
        c.same(f"all_to_all [{r}] {dtype}", got[r], make_input(8 + me, r, dtype, (rows(r, me),)))
    # send/recv around the ring, then back
    nxt, prv = (me + 1) % n, (me - 1) % n
    if n > 1:
        got = torch.empty(6, dtype=dtype)
        if me % 2 == 0:
            dist.send(inputs[me], ranks[nxt], group=g)
            dist.recv(got, ranks[prv], group=g)
        else:
            dist.recv(got, ranks[prv], group=g)
            dist.send(inputs[me], ranks[nxt], group=g)
        c.same(f"send/recv ring {dtype}", got, inputs[prv])


def check_shapes(c, g, ranks):
    """Non-contiguous tensors, several shapes, empty tensors, Work and Future."""
    me, n = dist.get_rank(g), len(ranks)
    base = [make_input(21, r, torch.float32, (4, 6)) for r in range(n)]
    got = base[me].clone().t()  # non-contiguous, in place
    dist.all_reduce(got, group=g)
    f32 = tolerance(base, "SUM", torch.float32)
    c.same("all_reduce transposed", got, reduce_ref(base, "SUM").t(), f32)
    outs = [torch.empty(4, 6).t() for _ in range(n)]  # non-contiguous outputs
    dist.all_gather(outs, base[me].t(), group=g)
    for r in range(n):
        c.same(f"all_gather transposed [{r}]", outs[r], base[r].t())
    out = torch.empty(4, 6 * n).t()
    dist.all_gather_into_tensor(out, base[me].t(), group=g)
    c.same("all_gather_into_tensor transposed", out, torch.cat([b.t() for b in base]))
    got = torch.zeros(0)
    dist.all_reduce(got, group=g)
    c.same("all_reduce empty", got, torch.zeros(0))
    for shape in [(1,), (1000, 3), (2, 3, 4, 5)]:
        inputs = [make_input(31, r, torch.float64, shape) for r in range(n)]
        got = inputs[me].clone()
        dist.all_reduce(got, group=g)
        c.same(f"all_reduce {shape}", got, reduce_ref(inputs, "SUM"), tolerance(inputs, "SUM", torch.float64))
    # Work: asynchronous, completed after wait, the Future holds the output
    t = base[me].clone()
    w = dist.all_reduce(t, group=g, async_op=True)
    c.true("work.wait", w.wait(datetime.timedelta(seconds=30)) is True)
    c.true("work.is_completed", w.is_completed())
    fut = w.get_future().wait()
    c.same("work future value", fut[0], reduce_ref(base, "SUM"), f32)
    works = [dist.all_reduce(base[me].clone(), group=g, async_op=True) for _ in range(5)]
    for w in works:
        w.wait()
    c.true("5 queued works done", all(w.is_completed() for w in works))
    dist.barrier(group=g)
    c.true("barrier", True)


def check_refusals(c, g):
    """Errors found at call time, on the calling rank, naming rank and operation."""
    me = dist.get_rank()
    c.raises("int16 all_reduce", "dtype Short cannot be reduced", dist.all_reduce, torch.ones(3, dtype=torch.int16), group=g)
    c.raises("bool SUM", "SUM of bool", dist.all_reduce, torch.ones(3, dtype=torch.bool), group=g)
    c.raises("int PREMUL_SUM", "PREMUL_SUM takes floating-point tensors", dist.all_reduce,
             torch.ones(3, dtype=torch.int32), op=op_of("PREMUL"), group=g)
    for name in ("BAND", "BOR", "BXOR"):
        c.raises(f"{name}", f"ReduceOp.{name} is not supported", dist.all_reduce, torch.ones(3, dtype=torch.int32),
                 op=getattr(dist.ReduceOp, name), group=g)
    c.raises("sparse tensor", "non-strided", dist.broadcast, torch.eye(3).to_sparse(), src=0, group=g)
    n = dist.get_world_size(g)
    c.raises("all_gather_into_tensor size", "expected group size x input", dist.all_gather_into_tensor,
             torch.empty(n * 4 + 1), torch.ones(4), group=g)
    c.raises("reduce_scatter_tensor size", "expected group size x output", dist.reduce_scatter_tensor,
             torch.empty(4), torch.ones(n * 4 + 2), group=g)
    c.raises("all_gather size", "output 0 has 5 elements, the input 4", dist.all_gather,
             [torch.empty(5) for _ in range(n)], torch.ones(4), group=g)
    c.raises("all_to_all_single splits", "split sizes add up to", dist.all_to_all_single, torch.empty(n * 2),
             torch.ones(n * 2), input_split_sizes=[1] * n, output_split_sizes=[2] * n, group=g)
    c.raises("broadcast root", "outside", dist.broadcast, torch.ones(2), src=n + 5, group=g)
    # the communicator still works after refusals (nothing was communicated)
    t = torch.full((3,), float(me + 1))
    dist.all_reduce(t, group=g)
    c.same("all_reduce after refusals", t, torch.full((3,), float(n * (n + 1) // 2)))


def main():
    dist.init_process_group("dccl", timeout=datetime.timedelta(seconds=60))
    me, n = dist.get_rank(), dist.get_world_size()
    c = Checker(me)
    c.true("backend name", dist.get_backend() == "dccl")
    world = list(range(n))
    gloo = dist.new_group(backend="gloo")
    for dtype in DTYPES:
        check_reductions(c, None, gloo, world, dtype)
        check_movement(c, None, gloo, world, dtype)
    check_shapes(c, None, world)
    check_refusals(c, None)
    # A subset: the first and the last rank (every rank calls new_group).
    sub = [0, n - 1] if n > 2 else [1]
    g = dist.new_group(sub, backend="dccl")
    g_ref = dist.new_group(sub, backend="gloo")
    if me in sub:
        c.true("subgroup size", dist.get_world_size(g) == len(sub))
        for dtype in (torch.int32, torch.float32, torch.bfloat16):
            check_reductions(c, g, g_ref, sub, dtype)
            check_movement(c, g, g_ref, sub, dtype)
        check_shapes(c, g, sub)
    dist.barrier()
    dist.destroy_process_group()
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())

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
import warnings

import torch
import torch.distributed as dist

import torch_dccl  # registers "dccl"
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
    return dist._make_nccl_premul_sum(torch.tensor([PREMUL_FACTOR]) if tensor_factor else PREMUL_FACTOR)


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
        # the reference: gloo's all_reduce of the whole, this rank's block
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
    # uneven, rank 0 sends no rows at all (its input has shape (0, 2)): the ranks' calls still match
    rows0 = lambda r, b: 0 if r == 0 else r + b  # noqa: E731
    src = [make_input(9, r, dtype, (sum(rows0(r, b) for b in range(n)), 2)) for r in range(n)]
    want = torch.cat([src[r][sum(rows0(r, b) for b in range(me)):][:rows0(r, me)] for r in range(n)])
    got = torch.empty_like(want)
    splits = dict(output_split_sizes=[rows0(r, me) for r in range(n)], input_split_sizes=[rows0(me, b) for b in range(n)])
    dist.all_to_all_single(got, src[me], group=g, **splits)
    c.same(f"all_to_all_single, rank 0 sends nothing, {dtype}", got, want)
    ref = same_on_gloo(ref_g, lambda t: dist.all_to_all_single(t, src[me], group=ref_g, **splits), torch.empty_like(want),
                       lambda: want)
    c.same(f"all_to_all_single, rank 0 sends nothing, {dtype} vs gloo", got, ref)
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


def check_rooted(c, g, ranks, dtype):
    """gather and scatter to and from every root (built from send/recv in a group)."""
    me, n = dist.get_rank(g), len(ranks)
    inputs = [make_input(41, r, dtype, (3, 2)) for r in range(n)]
    for root in range(n):
        outs = [torch.empty(3, 2, dtype=dtype) for _ in range(n)] if me == root else None
        dist.gather(inputs[me], outs, dst=ranks[root], group=g)
        if me == root:
            for r in range(n):
                c.same(f"gather root {root} [{r}] {dtype}", outs[r], inputs[r])
        blocks = [make_input(43 + root, r, dtype, (4,)) for r in range(n)]
        got = torch.empty(4, dtype=dtype)
        dist.scatter(got, blocks if me == root else None, src=ranks[root], group=g)
        c.same(f"scatter root {root} {dtype}", got, make_input(43 + root, me, dtype, (4,)))


def check_coalesced(c, g, ref_g, ranks):
    """The coalesced forms: all_reduce_coalesced, all_gather_coalesced, and the
    coalescing manager's all_gather_into_tensor and reduce_scatter_tensor."""
    me, n = dist.get_rank(g), len(ranks)
    shapes = [(3,), (2, 5), (7,)]
    ins = [[make_input(51 + i, r, torch.float32, s) for i, s in enumerate(shapes)] for r in range(n)]
    got = [t.clone() for t in ins[me]]
    dist.all_reduce_coalesced(got, group=g)
    for i in range(len(shapes)):
        mine = [ins[r][i] for r in range(n)]
        c.same(f"all_reduce_coalesced [{i}]", got[i], reduce_ref(mine, "SUM"), tolerance(mine, "SUM", torch.float32))
    outs = [[torch.empty(s) for s in shapes] for _ in range(n)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # all_gather_coalesced is deprecated, still called by stacks
        dist.all_gather_coalesced(outs, ins[me], group=g)
    for r in range(n):
        for i in range(len(shapes)):
            c.same(f"all_gather_coalesced [{r}][{i}]", outs[r][i], ins[r][i])
    gathered = [torch.empty(n * 4) for _ in range(2)]
    scattered = [torch.empty(2) for _ in range(2)]
    src = [[make_input(61 + i, r, torch.float64, (n * 2,)) for i in range(2)] for r in range(n)]
    with dist._coalescing_manager(group=g, device=torch.device("cpu")):
        for i in range(2):
            dist.all_gather_into_tensor(gathered[i], src[me][i][:4].float().contiguous(), group=g)
    for i in range(2):
        c.same(f"coalesced all_gather_into_tensor [{i}]", gathered[i], torch.cat([src[r][i][:4].float() for r in range(n)]))
    with dist._coalescing_manager(group=g, device=torch.device("cpu")):
        for i in range(2):
            dist.reduce_scatter_tensor(scattered[i], src[me][i].float(), group=g)
    for i in range(2):
        mine = [src[r][i][2 * me:2 * me + 2].float() for r in range(n)]
        c.same(f"coalesced reduce_scatter_tensor [{i}]", scattered[i], reduce_ref(mine, "SUM"),
               tolerance(mine, "SUM", torch.float32))


def check_p2p(c, g, ranks):
    """batch_isend_irecv around the ring both ways, and recv from any source."""
    me, n = dist.get_rank(g), len(ranks)
    if n < 2:
        return
    nxt, prv = (me + 1) % n, (me - 1) % n
    big = [make_input(71, r, torch.float32, (1 << 16,)) for r in range(n)]  # large: sends do not complete eagerly
    got_p, got_n = torch.empty(1 << 16), torch.empty(1 << 16)
    ops = [dist.P2POp(dist.isend, big[me], ranks[nxt], group=g), dist.P2POp(dist.isend, big[me], ranks[prv], group=g),
           dist.P2POp(dist.irecv, got_p, ranks[prv], group=g), dist.P2POp(dist.irecv, got_n, ranks[nxt], group=g)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    c.same("batch_isend_irecv from previous", got_p, big[prv])
    c.same("batch_isend_irecv from next", got_n, big[nxt])
    # Every other rank sends to rank 0 of the group; it receives from any source.
    if me == 0:
        seen = set()
        for _ in range(n - 1):
            t = torch.empty(5)
            src = dist.recv(t, group=g)
            c.same(f"recv any source from {src}", t, make_input(73, dist.get_group_rank(g, src) if g else src,
                                                                    torch.float32, (5,)))
            seen.add(src)
        c.true("recv any source: every sender once", seen == {ranks[r] for r in range(1, n)})
    else:
        dist.send(make_input(73, me, torch.float32, (5,)), ranks[0], group=g)


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
    torch_dccl.monitored_barrier(group=g, timeout=datetime.timedelta(seconds=30))
    c.true("monitored_barrier", True)


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
    # PyTorch 2.x refuses sparse tensors in its dispatcher, before the backend
    with_rank = False
    try:
        dist.broadcast(torch.eye(3).to_sparse(), src=0, group=g)
    except (RuntimeError, NotImplementedError) as e:
        with_rank = "SparseCPU" in str(e)
    c.true("sparse tensor refused", with_rank)
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
    for dtype in (torch.int32, torch.float32, torch.bfloat16):
        check_rooted(c, None, world, dtype)
    check_coalesced(c, None, gloo, world)
    check_p2p(c, None, world)
    check_shapes(c, None, world)
    check_refusals(c, None)
    seq = torch_dccl.sequence_number()
    seqs = [None] * n
    dist.all_gather_object(seqs, seq, group=gloo)
    c.true(f"sequence numbers agree and count the calls ({seqs})", len(set(seqs)) == 1 and seq > 100)
    # A subset: the first and the last rank (every rank calls new_group).
    sub = [0, n - 1] if n > 2 else [1]
    g = dist.new_group(sub, backend="dccl")
    g_ref = dist.new_group(sub, backend="gloo")
    if me in sub:
        c.true("subgroup size", dist.get_world_size(g) == len(sub))
        for dtype in (torch.int32, torch.float32, torch.bfloat16):
            check_reductions(c, g, g_ref, sub, dtype)
            check_movement(c, g, g_ref, sub, dtype)
        check_rooted(c, g, sub, torch.float32)
        check_p2p(c, g, sub)
        check_shapes(c, g, sub)
    dist.barrier()
    dist.destroy_process_group()
    check_mixed(c)
    return c.finish()


def check_mixed(c):
    """init_process_group("cpu:gloo,cuda:dccl"): CPU tensors go to gloo, the
    CUDA backend is dccl (made here too, without a GPU)."""
    dist.init_process_group("cpu:gloo,cuda:dccl", timeout=datetime.timedelta(seconds=60))
    pg = dist.group.WORLD
    c.true("mixed: cpu backend is gloo", pg._get_backend_name() in ("undefined", "gloo", "cpu:gloo,cuda:dccl"))
    c.true("mixed: cuda backend is dccl", torch_dccl.is_dccl(pg._get_backend(torch.device("cuda"))))
    c.true("mixed: cpu backend is not dccl", not torch_dccl.is_dccl(pg._get_backend(torch.device("cpu"))))
    t = torch.ones(4)
    dist.all_reduce(t)
    c.same("mixed: all_reduce on cpu (gloo)", t, torch.full((4,), float(dist.get_world_size())))
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())

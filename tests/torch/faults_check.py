#!/usr/bin/env python3
"""Errors that involve peers surface as Python exceptions within the timeout.

    faults_check.py N      starts N ranks (N >= 2) of itself, rendezvous tcp://

Not under torchrun: its agent ends every rank when one dies, and one rank here
dies on purpose. Each failure gets a dccl group of its own, so one broken
communicator does not hide the next check:
  - mismatched shapes: every rank raises within its group's timeout; with
    the ranks' comparison off (TORCH_DCCL_CHECK=0), DirectCCL's own length
    checks fail mismatched all_gather_into_tensor and all_to_all_single;
  - a missing peer: the ranks that called raise within the timeout;
  - Work.wait(timeout) raises after its own timeout, not the group's, and a
    later wait() still gets the result once the late rank has joined;
  - dropping a group with an operation pending and a Python callback on its
    Future neither deadlocks nor loses the callback;
  - torch_dccl.monitored_barrier with a late rank: every rank that came names
    it, one that came before rank 0 included;
  - a killed rank (SIGKILL): the others' next all_reduce raises within the
    timeout, naming rank and operation; they then leave cleanly.
The launcher passes when the last rank died of SIGKILL and every other rank
exited 0 with all its checks passed, within its overall bound.
"""
import datetime
import os
import signal
import sys
import time

import spawn

SLACK_S = 3.0  # on top of a timeout: process scheduling on a loaded 2-core machine


def timed_error(c, name, fn, bound_s, text):
    """fn() raises RuntimeError containing text (and this rank) within bound_s seconds."""
    t0 = time.monotonic()
    try:
        fn()
    except RuntimeError as e:
        took = time.monotonic() - t0
        msg = str(e).split("\n")[0]
        print(f"rank {c.rank}: {name}: raised after {took:.2f} s: {msg}", flush=True)
        c.true(f"{name} within {bound_s:.1f} s (took {took:.2f})", took <= bound_s)
        c.true(f"{name} names the rank and {text!r}", f"rank {c.rank}/" in msg and text in msg)
        return took
    c.true(f"{name} raised", False)
    return None


def run_rank(rank, n, port):
    import torch
    import torch.distributed as dist

    import torch_dccl
    from reference import Checker

    sec = lambda s: datetime.timedelta(seconds=s)  # noqa: E731
    dist.init_process_group("dccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n, timeout=sec(30))
    c = Checker(rank)
    last = n - 1

    # Mismatched shapes: the ranks' comparison before each collective fails the
    # call on every rank (more cases in bad_input_check.py).
    g = dist.new_group(backend="dccl", timeout=sec(2))
    t = torch.ones(1000 + 7 * rank)
    timed_error(c, "mismatched broadcast", lambda: dist.broadcast(t, src=0, group=g), 2 + SLACK_S, "do not match")
    dist.barrier()  # every rank is done with the failed group before the next group's init
    os.environ["TORCH_DCCL_CHECK"] = "0"  # read when a group is made
    g = dist.new_group(backend="dccl", timeout=sec(2))
    k = 1000 + 7 * rank
    timed_error(c, "mismatched all_gather_into_tensor", lambda: dist.all_gather_into_tensor(
        torch.empty(n * k), torch.ones(k), group=g), 2 + SLACK_S, "all_gather_into_tensor")
    dist.barrier()
    g = dist.new_group(backend="dccl", timeout=sec(2))
    sends = [3 if rank == 1 else 2] * n  # rank 1 sends 3 rows where 2 are expected
    timed_error(c, "mismatched all_to_all_single", lambda: dist.all_to_all_single(
        torch.empty(2 * n, 3), torch.ones(sum(sends), 3), input_split_sizes=sends,
        output_split_sizes=[2] * n, group=g), 2 + SLACK_S, "all_to_all_single")
    dist.barrier()
    os.environ["TORCH_DCCL_CHECK"] = "1"

    # A missing peer: the last rank does not call; the others time out.
    g = dist.new_group(backend="dccl", timeout=sec(2))
    if rank != last:
        timed_error(c, "missing peer", lambda: dist.all_reduce(torch.ones(16), group=g), 2 + SLACK_S, "all_reduce")
    dist.barrier()

    # wait(timeout) is bounded by its own timeout; the operation still completes.
    g = dist.new_group(backend="dccl", timeout=sec(20))
    t = torch.full((8,), float(rank + 1))
    if rank == last:
        time.sleep(0.5 + SLACK_S + 1.0)  # later than the others' bound below
        dist.all_reduce(t, group=g)
    else:
        w = dist.all_reduce(t, group=g, async_op=True)
        took = timed_error(c, "wait(0.5 s)", lambda: w.wait(datetime.timedelta(milliseconds=500)), 0.5 + SLACK_S,
                           "not complete after 500 ms")
        c.true("wait(0.5 s) waited its timeout", took is not None and took >= 0.45)
        c.true("late rank joined: wait() succeeds", w.wait())
    c.same("all_reduce with a late rank", t, torch.full((8,), float(n * (n + 1) // 2)))

    # Dropping a group whose operation is pending with a Python callback on its
    # Future: the callback (which takes the GIL on the group's worker) runs, and
    # the group goes once the late rank has joined; no deadlock.
    g = dist.new_group(backend="dccl", timeout=sec(20))
    t = torch.full((4,), float(rank + 1))
    ran = []
    if rank == last:
        time.sleep(1.0)
    fut = dist.all_reduce(t, group=g, async_op=True).get_future().then(lambda f: ran.append(f.value()[0].sum().item()))
    t0 = time.monotonic()
    dist.destroy_process_group(g)
    del g  # the last reference: the group's destructor joins its worker
    took = time.monotonic() - t0
    print(f"rank {rank}: group dropped with a pending callback in {took:.2f} s", flush=True)
    c.true(f"group dropped with a pending callback in {took:.2f} s", took < 10)
    c.true("its callback ran with the sum", ran == [4.0 * n * (n + 1) / 2])
    del fut
    dist.barrier()

    # monitored_barrier with a late rank: every rank that came names it, rank 1 too,
    # which arrives before rank 0 and so would time out before rank 0's verdict.
    g = dist.new_group(backend="dccl", timeout=sec(20))
    if rank == last:
        time.sleep(2.5)
    else:
        time.sleep(0.5 if rank == 0 else 0.0)
        timed_error(c, "monitored_barrier with a late rank", lambda: torch_dccl.monitored_barrier(
            group=g, timeout=sec(1), wait_all_ranks=True), 1.5 + SLACK_S, f"rank {last} did not reach the barrier")
    dist.barrier()

    # A killed rank: the world group's next operation fails on the others.
    t = torch.ones(1 << 16)
    dist.all_reduce(t)
    c.same("all_reduce before the kill", t, torch.full((1 << 16,), float(n)))
    if rank == last:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    timed_error(c, "killed peer", lambda: [dist.all_reduce(t) for _ in range(100)], 30 + SLACK_S, "all_reduce")
    timed_error(c, "the failed group's next call", lambda: dist.broadcast(t, src=0), 1.0, "exited")
    t0 = time.monotonic()
    dist.destroy_process_group()
    took = time.monotonic() - t0
    print(f"rank {rank}: destroy_process_group after the kill took {took:.2f} s", flush=True)
    c.true("destroy_process_group within the timeout", took <= 30 + SLACK_S)
    return c.finish()


if __name__ == "__main__":
    spawn.main(__file__, __doc__, run_rank, lambda n: [0] * (n - 1) + [-signal.SIGKILL])

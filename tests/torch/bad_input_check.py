#!/usr/bin/env python3
"""Bad input across ranks raises a clear RuntimeError on every rank, within the
group's timeout, naming the rank, the operation and the cause.

    bad_input_check.py N      starts N ranks (N >= 2) of itself, rendezvous tcp://

Before every collective the ranks compare what each was called with (operation,
dtype, element count, root, reduction), so each of these fails on every rank:
  - mismatched shapes (one rank's all_reduce has more elements);
  - mismatched dtypes of the same byte size (float32 on one rank, int32 on the
    others), which moving bytes alone would not notice;
  - a rank that skips a call (it calls the next collective while the others
    call the one it skipped);
  - mismatched roots of a broadcast.
After each, the same group still works (nothing was communicated but the
comparison).
"""
import datetime
import time

import spawn

TIMEOUT_S = 5.0
SLACK_S = 3.0  # on top of a timeout: process scheduling on a loaded 2-core machine


def run_rank(rank, n, port):
    import torch
    import torch.distributed as dist

    import torch_dccl  # noqa: F401
    from reference import Checker

    sec = lambda s: datetime.timedelta(seconds=s)  # noqa: E731
    dist.init_process_group("dccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n, timeout=sec(30))
    c = Checker(rank)
    last = n - 1
    g = dist.new_group(backend="dccl", timeout=sec(TIMEOUT_S))

    def every_rank_raises(name, fn, texts):
        t0 = time.monotonic()
        try:
            fn()
        except RuntimeError as e:
            took = time.monotonic() - t0
            msg = str(e).split("\n")[0]
            print(f"rank {rank}: {name}: raised after {took:.2f} s: {msg}", flush=True)
            c.true(f"{name} within the timeout (took {took:.2f} s)", took <= TIMEOUT_S + SLACK_S)
            for text in [f"rank {rank}/{n}"] + texts:
                c.true(f"{name} names {text!r}", text in msg)
        else:
            c.true(f"{name} raised", False)
        # The group still works: only the comparison ran.
        t = torch.full((3,), float(rank + 1))
        dist.all_reduce(t, group=g)
        c.same(f"all_reduce after {name}", t, torch.full((3,), float(n * (n + 1) // 2)))

    every_rank_raises("mismatched shapes", lambda: dist.all_reduce(torch.ones(10 + (2 if rank == last else 0)), group=g),
                      ["all_reduce", "do not match", f"rank {last if rank != last else 0} called ALLREDUCE",
                       f"of {12 if rank != last else 10} Float", "ReduceOp SUM"])
    every_rank_raises("mismatched dtypes",
                      lambda: dist.all_reduce(torch.ones(8, dtype=torch.int32 if rank == last else torch.float32), group=g),
                      ["all_reduce", "do not match", "Int" if rank != last else "Float"])
    # A skipped call: the last rank skips the all_reduce and goes on to the broadcast.
    def skipped():
        if rank != last:
            dist.all_reduce(torch.ones(4), group=g)
        dist.broadcast(torch.ones(4), src=0, group=g)
    every_rank_raises("a rank skips a call", skipped,
                      ["BROADCAST" if rank != last else "ALLREDUCE", "skipped"])
    every_rank_raises("mismatched roots", lambda: dist.broadcast(torch.ones(4), src=rank % 2, group=g),
                      ["broadcast", "root"])
    dist.barrier()
    return c.finish()


if __name__ == "__main__":
    spawn.main(__file__, __doc__, run_rank, lambda n: [0] * n)

#!/usr/bin/env python3
"""A process that leaves without destroy_process_group: at the end of a script,
or on an uncaught exception.

    exit_check.py N      starts N ranks (N >= 2) of itself, rendezvous tcp://, in rounds

Not under torchrun: its agent ends every rank when one exits with an error.
  - "end" rounds (8): each rank runs collectives on the world and two more dccl
    groups (checked against float64 references), the last of them synchronous,
    then leaves the script without destroy_process_group. Every rank must exit
    0: the group's worker thread dropped the last tensors of a call after the
    caller had woken, so it could race the interpreter's finalization, take the
    GIL and be ended by Python (SIGABRT, "terminate called without an active
    exception", in one run of 3 ranks in 4 to 8
    here; the rounds make a miss unlikely, not impossible).
  - a "raise" round: the last rank raises an uncaught exception after an
    all_reduce, the others call the next ones. With a timeout of 60 s they must
    raise within 15 s naming the rank and the operation, and the raising rank must
    exit (code 1) as fast: its group's destructor used to meet the other ranks,
    which waited for it in their collective, so both sides waited the timeout.
  - a "late" round: rank 0 sends a tensor (under the eager size: the send ends
    before the receive) to every other rank and leaves without
    destroy_process_group; they receive it 1 s later and check it. Leaving at a
    script's end meets the other ranks (a destroy), so their last calls with it
    end well (an abort there would stop them: "rank 0 aborted the communicator").
The launcher passes when every round's exit codes are as expected.
"""
import datetime
import os
import sys
import time

import spawn

ROUNDS = ["end"] * 8 + ["raise", "late"]
TIMEOUT_S = 60
BOUND_S = 15  # well under the timeout: the peers learn of the exit, they do not wait it out


def run_rank(rank, n, port):
    import torch
    import torch.distributed as dist

    import torch_dccl  # noqa: F401  registers the backend
    from reference import Checker

    mode = os.environ["EXIT_CHECK_MODE"]
    dist.init_process_group("dccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    c = Checker(rank)
    x = torch.full((1 << 16,), float(rank + 1), dtype=torch.float64)
    dist.all_reduce(x)
    c.same("all_reduce", x, torch.full((1 << 16,), n * (n + 1) / 2, dtype=torch.float64))
    if mode == "raise":
        if rank == n - 1:
            raise ValueError("exit_check: an error in the user's code on the last rank")
        t0 = time.monotonic()
        try:
            for _ in range(10):
                dist.all_reduce(x)
            c.true("the next all_reduce raised", False)
        except RuntimeError as e:
            took, msg = time.monotonic() - t0, str(e).split("\n")[0]
            print(f"rank {rank}: raised after {took:.2f} s: {msg}", flush=True)
            c.true(f"raised within {BOUND_S} s (took {took:.2f})", took <= BOUND_S)
            c.true("names this rank, the operation and the rank that left",
                   f"rank {rank}/" in msg and "all_reduce" in msg and f"rank {n - 1}" in msg)
        sys.exit(c.finish())
    if mode == "late":
        t = torch.arange(1 << 8, dtype=torch.float64) + 7
        if rank == 0:
            for peer in range(1, n):
                dist.send(t, peer)
            return 0
        time.sleep(1)
        got = torch.zeros_like(t)
        dist.recv(got, 0)
        c.same("recv after rank 0 left", got, t)
        return c.finish()
    groups = [dist.new_group(backend="dccl") for _ in range(2)]
    works, outs = [], []
    for i, g in enumerate(groups):
        t = torch.full((1 << 18,), float(rank * (i + 2)), dtype=torch.float32)
        works.append(dist.all_reduce(t, group=g, async_op=True))
        outs.append((t, float(sum(r * (i + 2) for r in range(n)))))
    for w in works:
        w.wait()
    for i, (t, want) in enumerate(outs):
        c.same(f"all_reduce {i}", t, torch.full_like(t, want))
    if c.finish():
        sys.exit(1)
    # The last call right before the end (its result is the one checked above),
    # then no destroy_process_group: the interpreter ends with the groups alive.
    last = torch.full((1 << 20,), float(rank), dtype=torch.float32)
    dist.all_reduce(last)
    return 0


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--rank":
        sys.exit(run_rank(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
    if len(sys.argv) != 2 or int(sys.argv[1]) < 2:
        sys.exit(__doc__)
    n = int(sys.argv[1])
    bad = 0
    for i, mode in enumerate(ROUNDS):
        os.environ["EXIT_CHECK_MODE"] = mode
        t0 = time.monotonic()
        want = [0] * (n - 1) + [1] if mode == "raise" else [0] * n
        bad += spawn.launch(__file__, n, want, f"exit_check round {i} ({mode})")
        if mode == "raise":
            took = time.monotonic() - t0
            print(f"exit_check: the raise round took {took:.1f} s (timeout {TIMEOUT_S} s)", flush=True)
            bad += took > BOUND_S + 20  # + process start and imports on a loaded machine
    print(f"exit_check: {len(ROUNDS) - bad} of {len(ROUNDS)} rounds as expected", flush=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

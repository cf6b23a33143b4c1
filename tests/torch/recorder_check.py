#!/usr/bin/env python3
"""The flight recorder from PyTorch, under torchrun: every rank runs a few
all_reduces on the default group and on a subgroup, asks for a dump on demand
(SIGUSR2, with DCCL_RECORDER_DIR set), and checks its own records: each
collective carries the process group's name (getGroupUid) and PyTorch's own
sequence number, and the subgroup's calls carry the subgroup's name.

    DCCL_RECORDER_DIR=DIR torchrun --nproc_per_node 2 recorder_check.py

Exits 1 naming what is missing, 0 when every check passed.
"""
import glob
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import torch_dccl  # registers "dccl"


def records(folder, rank):
    out = []
    for path in glob.glob(os.path.join(folder, "*")):
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("rank") == rank and "coll" in r:
                    out.append(r)
    return out


def main():
    folder = os.environ["DCCL_RECORDER_DIR"]
    dist.init_process_group("dccl")
    rank, n = dist.get_rank(), dist.get_world_size()
    sub = dist.new_group(list(range(n)))
    t = torch.ones(1024)
    for _ in range(3):
        dist.all_reduce(t)
    dist.all_reduce(t, group=sub)
    dist.barrier()
    os.kill(os.getpid(), signal.SIGUSR2)
    time.sleep(0.5)
    recs = [r for r in records(folder, rank) if r.get("coll") == "all_reduce"]
    problems = []
    tags = {r.get("tag") for r in recs}
    if len(recs) != 4:
        problems.append(f"{len(recs)} all_reduce records, want 4")
    if not any(tags):
        problems.append(f"no record carries a group name: {sorted(map(str, tags))}")
    if len({x for x in tags if x}) < 2:
        problems.append(f"the default group's and the subgroup's calls carry one name: {sorted(map(str, tags))}")
    seqs = {tag: [r.get("user_seq") for r in recs if r.get("tag") == tag] for tag in tags}
    if sorted(len(v) for v in seqs.values()) != [1, 3]:
        problems.append(f"want 3 calls on one group and 1 on the other: {seqs}")
    for tag, v in seqs.items():
        if any(not isinstance(x, int) for x in v) or v != sorted(set(v)):
            problems.append(f"PyTorch's sequence numbers on group {tag} not carried in order: {v}")
    dist.destroy_process_group()
    for p in problems:
        print(f"rank {rank}: {p}", flush=True)
    if not problems:
        print(f"rank {rank}: {len(recs)} all_reduce records, groups {sorted(map(str, tags))}, sequence {seqs}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

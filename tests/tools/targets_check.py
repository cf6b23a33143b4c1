#!/usr/bin/env python3
"""bench/targets.py: the pass/fail lines bench/compare prints, on a made-up summary
whose ratios are worked out here by hand."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import targets  # noqa: E402

KIB, MIB = 1 << 10, 1 << 20


def t(us):
    return {"time_us": us}


summary = {
    ("dccl-tcp", 2, 8, "in_place"): t(6.0), ("ompi-tcp", 2, 8, "in_place"): t(6.6),
    ("mpich-tcp", 2, 8, "in_place"): t(7.0),
    ("dccl-tcp", 2, MIB, "in_place"): t(337.5), ("ompi-tcp", 2, MIB, "in_place"): t(354.5),
    ("dccl-tcp", 4, 64 * KIB, "in_place"): t(100.0), ("ompi-tcp", 4, 64 * KIB, "in_place"): t(140.0),
    ("dccl-shm", 2, 8, "in_place"): t(0.5), ("ompi-shm", 2, 8, "in_place"): t(0.4),
    ("dccl-sim-direct", 4, MIB, "in_place"): t(600.0), ("dccl-sim-staged", 4, MIB, "in_place"): t(1200.0),
}
peers = {"tcp": ["ompi-tcp", "mpich-tcp"], "shm": ["ompi-shm"]}
floors = {2: {MIB: 310.0, 8: 5.0}, 4: {64 * KIB: 70.0}}
rows = {what: (v, d) for v, what, d in targets.evaluate(summary, peers, [8, 64 * KIB, MIB], floors)}
fails = []


def expect(what, verdict, *parts):
    got = rows.get(what)
    if not got or got[0] != verdict or any(p not in got[1] for p in parts):
        fails.append(f"{what}: expected {verdict} with {parts}, got {got}")


# 6.6 / 6.0 = 1.10 against the best peer (Open MPI's 6.6 us, not MPICH's 7.0).
expect("tcp 2 ranks 8 B: at or below the best peer", "PASS", "1.10x", "ompi-tcp 6.6 us", "floor 5.0 us")
# 354.5 / 337.5 = 1.05 < 1.2; the target time 354.5 / 1.2 = 295.4 us lies below the 310 us floor.
expect("tcp 2 ranks 1 MiB: >= 1.2x the best peer", "FAIL", "1.05x", "floor 310.0 us",
       "target 295.4 us is below it")
# 140 / 100 = 1.40 >= 1.3; its target time (107.7 us) is above the floor: no note.
expect("tcp 4 ranks 64 KiB: >= 1.3x the best peer", "PASS", "1.40x", "floor 70.0 us")
if "below it" in rows.get("tcp 4 ranks 64 KiB: >= 1.3x the best peer", ("", ""))[1]:
    fails.append("4 ranks 64 KiB: a target above the floor was called below it")
expect("shm 2 ranks 8 B: at or below Open MPI", "FAIL", "0.80x")
if "floor" in rows.get("shm 2 ranks 8 B: at or below Open MPI", ("", ""))[1]:
    fails.append("a shm line was given a TCP floor")
expect("sim 4 ranks 1 MiB: peer-direct >= 1.5x staged", "PASS", "2.00x")
# Sizes or sides not measured give no line; without floors no line has one.
if any("tcp 4 ranks 8 B" in w or "1 KiB" in w for w in rows):
    fails.append(f"lines for sizes not measured: {sorted(rows)}")
if any("floor" in d for _, _, d in targets.evaluate(summary, peers, [8, 64 * KIB, MIB])):
    fails.append("a floor without floors")
md = targets.markdown(targets.evaluate(summary, peers, [8, 64 * KIB, MIB], floors))
if not md[0].startswith("3 of 5 targets met"):
    fails.append(f"markdown head: {md[0]}")

for f in fails:
    print("FAIL:", f)
print(f"targets_check: {len(rows)} lines, {len(fails)} failures")
sys.exit(1 if fails else 0)

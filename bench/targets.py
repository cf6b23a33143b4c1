"""The performance targets bench/compare reports as pass/fail lines, from the medians
of one side-by-side run (summary: (config, nranks, size, variant) -> {"time_us": ...}).

  tcp  2 ranks: 8 B and 1 KiB at or below the best peer's time; >= 1.2x the best peer
       from 64 KiB to 64 MiB. 4 ranks: >= 1.0x at every size, >= 1.3x from 64 KiB.
  shm  2 and 4 ranks: 8 B and 1 KiB at or below Open MPI's time; 2 ranks: 1 MiB and
       16 MiB >= 1.5x Open MPI.
  sim  4 ranks, sim device memory: peer-direct >= 1.5x the staged path from 1 MiB.

A ratio is the other side's time over DirectCCL's (>1: DirectCCL faster), in place.
With floors (dccl-tcp-floor's times, {nranks: {size: us}}) a TCP line also gives the
bare-socket floor, and says so when the target's time lies below it.
"""

KIB, MIB = 1 << 10, 1 << 20


def _label(b):
    for unit, shift in (("M", 20), ("K", 10)):
        if b >= (1 << shift) and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}iB"
    return f"{b} B"


def _time(summary, key, n, size):
    v = summary.get((key, n, size, "in_place"))
    return v["time_us"] if v and v.get("time_us") else None


def _best(summary, keys, n, size):
    best = None
    for k in keys:
        t = _time(summary, k, n, size)
        if t and (best is None or t < best[1]):
            best = (k, t)
    return best


def _check(rows, what, mine, other, need, floor=None):
    """One line: pass/fail with the ratio other/mine against `need`; with the bare floor (us)
    where one was measured."""
    if not mine or not other:
        rows.append(("n/a", what, "not measured"))
        return
    r = other[1] / mine
    note = ""
    if floor:
        goal = other[1] / need
        note = f"; floor {floor:.1f} us" + (f", target {goal:.1f} us is below it" if goal < floor else "")
    rows.append(("PASS" if r >= need else "FAIL", what, f"{r:.2f}x (need >= {need:g}x; DirectCCL {mine:.1f} us, "
                                                        f"{other[0]} {other[1]:.1f} us{note})"))


def evaluate(summary, peer_keys, sizes, floors=None):
    """[(verdict, target, detail)] for every target whose sizes were measured."""
    rows = []
    floors = floors or {}
    tcp_peers = peer_keys.get("tcp", [])
    for n in (2, 4):
        for s in sizes:
            mine = _time(summary, "dccl-tcp", n, s)
            best = _best(summary, tcp_peers, n, s)
            fl = floors.get(n, {}).get(s)
            if n == 2 and s in (8, KIB):
                _check(rows, f"tcp 2 ranks {_label(s)}: at or below the best peer", mine, best, 1.0, fl)
            elif n == 2 and 64 * KIB <= s <= 64 * MIB:
                _check(rows, f"tcp 2 ranks {_label(s)}: >= 1.2x the best peer", mine, best, 1.2, fl)
            elif n == 4:
                need = 1.3 if s >= 64 * KIB else 1.0
                _check(rows, f"tcp 4 ranks {_label(s)}: >= {need:g}x the best peer", mine, best, need, fl)
    for n in (2, 4):
        for s in sizes:
            mine = _time(summary, "dccl-shm", n, s)
            ompi = ("Open MPI", _time(summary, "ompi-shm", n, s))
            if s in (8, KIB):
                _check(rows, f"shm {n} ranks {_label(s)}: at or below Open MPI", mine, ompi, 1.0)
            elif n == 2 and s in (MIB, 16 * MIB):
                _check(rows, f"shm 2 ranks {_label(s)}: >= 1.5x Open MPI", mine, ompi, 1.5)
    for s in sizes:
        if s < MIB:
            continue
        mine = _time(summary, "dccl-sim-direct", 4, s)
        staged = ("staged", _time(summary, "dccl-sim-staged", 4, s))
        _check(rows, f"sim 4 ranks {_label(s)}: peer-direct >= 1.5x staged", mine, staged, 1.5)
    return [r for r in rows if r[0] != "n/a"]  # a side not run (--only, a failed run): no line


def markdown(rows):
    if not rows:
        return ["No target's sizes were measured in this run.", ""]
    passed = sum(1 for r in rows if r[0] == "PASS")
    out = [f"{passed} of {len(rows)} targets met.", "", "| | target | ratio |", "|---|---|---|"]
    out += [f"| {v} | {t} | {d} |" for v, t, d in rows]
    out.append("")
    return out

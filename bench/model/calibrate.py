"""Fits the parameters the published figures leave open to half of the A3 Mega table and
reports the model's error on every row: fitted rows and held-back rows apart.

Fitted: launch_us, net_lat_us, net_eff (continuous, by pattern search) and the two channel
counts (integers, by grid). The fit minimises the largest |log(model / measured)| over the
fitted rows, then their sum. Rows alternate: 8 B fitted, 16 B held back, 32 B fitted, ...
"""
import csv
import math
import os

import nccl

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "nccl-a3mega-2x8-allreduce.csv")
NODES = 2
CONTINUOUS = ("launch_us", "net_lat_us", "net_eff")
START = {"launch_us": 30.0, "net_lat_us": 20.0, "net_eff": 0.9}
CHANNEL_GRID = [(lo, hi) for lo in (1, 2, 4, 8, 12, 16) for hi in (8, 12, 16, 24, 32) if hi >= lo]


def load(path=DATA):
    with open(path) as f:
        return [(int(r["size_bytes"]), float(r["time_us"])) for r in csv.DictReader(f)]


def split(rows):
    """(fitted, held back): every other row."""
    return rows[0::2], rows[1::2]


def model(size, over):
    return nccl.allreduce(size, NODES, over)[0]


def loss(rows, over):
    e = [abs(math.log(model(s, over) / t)) for s, t in rows]
    return (max(e), sum(e))


def _refine(rows, over):
    best = loss(rows, over)
    for f in (1.3, 1.1, 1.03, 1.01, 1.003):
        improved = True
        while improved:
            improved = False
            for k in CONTINUOUS:
                for g in (f, 1 / f):
                    trial = dict(over, **{k: over[k] * g})
                    if k == "net_eff" and trial[k] > 1.0:
                        continue
                    c = loss(rows, trial)
                    if c < best:
                        best, over, improved = c, trial, True
    return best, over


def fit(rows, fixed=None):
    """Best values of the fitted parameters on `rows`; `fixed` holds any parameter
    overridden by the caller (not fitted)."""
    fixed = dict(fixed or {})
    best = None
    for lo, hi in CHANNEL_GRID:
        over = dict(START, nccl_min_channels=lo, nccl_max_channels=hi)
        over.update(fixed)
        key, over = _refine(rows, over)
        if best is None or key < best[0]:
            best = (key, over)
    return best[1]


def errors(rows, over):
    """[(size, measured, model, error fraction)]"""
    return [(s, t, model(s, over), (model(s, over) - t) / t) for s, t in rows]


def calibrate(rows=None, fixed=None):
    rows = rows or load()
    fitted, held = split(rows)
    over = fit(fitted, fixed)
    table = []
    held_sizes = {s for s, _ in held}
    for s, t, m, e in errors(rows, over):
        table.append((s, t, m, e, "held back" if s in held_sizes else "fitted"))
    return over, table

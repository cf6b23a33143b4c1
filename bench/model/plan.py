"""DirectCCL's tuning plan as `dccl-info --plan --json --ranks 4 --hosts 1 --provider tcp`
prints it (data/plan.json; the test tools.plan checks it is the tool's current output):
the tuner's thresholds, chunks and link model, read here instead of copied."""
import json
import os

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "plan.json")) as _f:
    PLAN = json.load(_f)


def window_max(coll, algo):
    """The largest size (bytes) the tuner gives `algo` for `coll` by default."""
    for w in PLAN["windows"]:
        if w["coll"] == coll and w["algo"] == algo:
            return w["max_bytes"]
    raise KeyError(f"{coll}/{algo} is not in the plan")


RHD_MAX = window_max("all_reduce", "rhd")  # halving-doubling up to here, the ring above
RD_BOUNDS = (PLAN["rd"]["min_bound"], PLAN["rd"]["max_bound"])  # recursive doubling's clamp
# The tuner's link model for this shape's provider (tcp): us per message, GB/s, reduction GB/s.
LINK = (PLAN["link"]["alpha_us"], PLAN["link"]["gbps"], PLAN["link"]["reduce_gbps"])
SEGMENT_ONESHOT = PLAN["segment"]["oneshot_bytes"]  # one-shot through the segment up to here
HIER_PIECE = PLAN["hier"]["piece_bytes"]
HIER_SHARD = PLAN["hier"]["shard_bytes"]

"""The flow model (flows.py) applied: a cloud NIC with a per-flow cap at 8 ... 1,024 nodes,
and the emulated fabric of bench/compare-hosts --fabric against its measured runs.

  cloud_table()        allreduce busbw, one flow per peer against several, 100 Gbit/s NIC,
                       5 Gbit/s per flow (CLOUD's assumptions)
  against(rows, ...)   the model's busbw beside each measured row of runs.jsonl, and the error
"""
import json
import math
import os
import statistics

import costmodel as cm
import dccl
import flows
import plan

# The cloud: what the prediction assumes (value, origin and source, as params.P).
CLOUD = {
    "nic_gbps": (12.5, "assumed", "a 100 Gbit/s NIC, one rank per node"),
    "flow_cap_gbps": (0.625, "published", "5 Gbit/s for one flow between AWS instances outside a cluster "
                      "placement group (EC2 instance network bandwidth documentation)"),
    "spines": (4, "assumed", "equal-cost paths between two leaves"),
    "hosts_per_leaf": (4, "assumed", "hosts of one leaf sending across the spines at once (ranks placed "
                       "without regard to the fabric: every ring neighbour on another leaf)"),
    "efficiency": (0.95, "measured", "TCP payload per byte on the wire: one flow gets 238 of a 250 Mbit/s "
                   "cap and 946 of 1,000 Mbit/s (bench/results/2026-12-04-fabric)"),
}
NODES = [8, 16, 64, 256, 1024]
SIZES = [16 << 20, 1 << 30]
FLOWS = [1, 4, 8, 16, 32]


def cloud_alpha():
    """us per network message: NCCL's network step plus the fitted TCPXO latency plus
    DirectCCL's host-driven step (dccl.net_link, the cluster model's own)."""
    return dccl.net_link().alpha


def allreduce_busbw(nodes, size, nic, nflows, cap, alpha, eff, slowdown):
    """The better of ring and halving-doubling (the tuner's two large-size algorithms)."""
    gbps = flows.peer_gbps(nic, nflows, cap) * eff / slowdown
    link = cm.Link(alpha=alpha, gbps=gbps)
    t = min(cm.ring(nodes, size, link, math.inf), cm.rhd(nodes, size, link, math.inf))
    return cm.busbw(size, t, nodes)


def cloud_table():
    v = {k: x[0] for k, x in CLOUD.items()}
    nic, cap, h, s = v["nic_gbps"], v["flow_cap_gbps"], v["hosts_per_leaf"], v["spines"]
    uplink = nic * h / s  # a non-blocking leaf: its uplinks carry what its hosts' NICs can send

    def slow(n, f, c=cap):
        return flows.collision_slowdown(h, f, s, c, nic, uplink, rebalance=f > 1, leaves=max(1, n // h))
    head = "| nodes | size | " + " | ".join(f"{f} flow{'s' if f > 1 else ''} GB/s" for f in FLOWS) + \
        f" | {FLOWS[-1]} ÷ 1 |"
    out = [head, "|---|---|" + "---|" * (len(FLOWS) + 1)]
    alpha = cloud_alpha()
    for n in NODES:
        sl = {f: slow(n, f) for f in FLOWS}
        for size in SIZES:
            bws = [allreduce_busbw(n, size, nic, f, cap, alpha, v["efficiency"], sl[f]) for f in FLOWS]
            label = f"{size >> 20} MiB" if size < 1 << 30 else f"{size >> 30} GiB"
            out.append(f"| {n} | {label} | " + " | ".join(f"{b:.2f}" for b in bws) + f" | {bws[-1] / bws[0]:.1f}× |")
    lo, hi = NODES[0], NODES[-1]
    notes = [f"Expected slowdown of a step from ECMP collisions ({h} hosts a leaf, {s} spines, non-blocking "
             "uplinks, every leaf at once; more than one flow sprayed and rebalanced), "
             f"{lo} and {hi} nodes: " + ", ".join(f"{f} flow{'s' if f > 1 else ''} {slow(lo, f):.2f}× and "
                                                   f"{slow(hi, f):.2f}×" for f in FLOWS) +
             f". Step latency {alpha:.1f} µs.",
             "Without the cap (one flow may fill the NIC) the collisions decide instead: one flow per peer "
             f"{slow(lo, 1, 0.0):.2f}× ({lo} nodes) and {slow(hi, 1, 0.0):.2f}× ({hi}) slower than spread evenly, "
             f"8 flows sprayed {slow(lo, 8, 0.0):.2f}× and {slow(hi, 8, 0.0):.2f}×."]
    return "\n".join(out), notes


def parse_rate(s):
    """'250mbit' -> GB/s."""
    for unit, m in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if s and s.lower().endswith(unit):
            return float(s[: -len(unit)]) * m / 8e9
    return 0.0


def row_flows(variant, flows_var, default_flows):
    """Flows per peer of a compare-hosts variant: NAME=k in its settings, else DirectCCL's
    default, else one (Gloo, Open MPI, Intel MPI, oneCCL: one connection per peer)."""
    base, *env = variant.split("@")
    for kv in env:
        k, _, x = kv.partition("=")
        if k == flows_var:
            return int(x)
    return default_flows if base in ("hier", "flat", "ring") else 1


def predict_row(r, nflows):
    """The model's busbw (GB/s) for one measured row (its net settings from compare-hosts).
    The emulated ranks sit block-wise under the leaves, so a ring crosses each leaf
    boundary once per direction: one sender per leaf, no collisions."""
    net = r["net"]
    nic, cap = parse_rate(net["rate"]), parse_rate(net.get("flow_rate"))
    eff = CLOUD["efficiency"][0]
    return flows.fabric_busbw(r["hosts"], r["size"], nic, nflows, cap, plan.LINK[0], eff, 1.0, r["op"])


def against(paths, flows_var, default_flows, min_size=1 << 20):
    """Markdown rows: measured median busbw, the model's, the error; and the worst error."""
    groups = {}
    for p in paths:
        with open(p) as f:
            for line in f:
                r = json.loads(line)
                if r["size"] >= min_size and "net" in r:
                    key = (os.path.basename(os.path.dirname(p)), r["op"], r["variant"], r["size"])
                    groups.setdefault(key, []).append(r)
    out = ["| run | op | variant | flows | size | measured busbw GB/s | model GB/s | error |",
           "|---|---|---|---|---|---|---|---|"]
    errs = []
    for (run, op, variant, size), rs in sorted(groups.items()):
        nf = row_flows(variant, flows_var, default_flows)
        meas = statistics.median(r["busbw_gbps"] for r in rs)
        model = predict_row(rs[0], nf)
        e = (model - meas) / meas
        errs.append(e)
        out.append(f"| {run} | {op} | {variant} | {nf} | {size >> 20} MiB | {meas:.4f} | {model:.4f} | {e * 100:+.0f}% |")
    return "\n".join(out), errs

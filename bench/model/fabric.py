"""The flow model (flows.py) applied: a cloud NIC with a per-flow cap at 8 ... 1,024 nodes,
and the emulated fabric of bench/compare-hosts --fabric against its measured runs.

  cloud_table()        allreduce busbw, one flow per peer against several, 100 Gbit/s NIC,
                       5 Gbit/s per flow (CLOUD's assumptions)
  against(rows, ...)   the model's busbw beside each measured row of runs.jsonl, and the error
                       (with the emulator's cap buckets and the sprayed flows' queued window)
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


def leaf_of(hosts, leaves, h, interleave=False):
    """dccl-run --fabric's leaf of host h: block-wise, the first hosts % leaves leaves one more;
    round-robin (h % leaves) with --interleave."""
    if interleave:
        return h % leaves
    per, extra = divmod(hosts, leaves)
    edge = extra * (per + 1)
    return h // (per + 1) if h < edge else extra + (h - edge) // per


def steps(op, algo, n, size):
    """[(bytes each rank sends, destination of rank r)] of one collective, step by step."""
    if algo == "ring":
        count = 2 * (n - 1) if op == "all_reduce" else n - 1
        return [(size / n, lambda r: (r + 1) % n)] * count
    if algo == "rhd" and op == "all_reduce":  # halving from distance n/2, doubling back
        rs, d, m = [], n // 2, size
        while d >= 1:
            m /= 2
            rs.append((m, lambda r, d=d: r ^ d))
            d //= 2
        return rs + rs[::-1]
    if algo == "bruck" and op == "all_gather":
        out, d = [], 1
        while d < n:
            out.append((min(d, n - d) * size / n, lambda r, d=d: (r - d) % n))
            d *= 2
        return out
    raise ValueError(f"no step model of {op} {algo}")


def emulated_busbw(op, algo, hosts, leaves, spines, size, nic, cap, nflows, alpha, eff, buckets=0, window=0,
                   interleave=False):
    """busbw (GB/s) of op on the emulated fabric: per step, the leaves whose hosts send to
    another leaf hash those flows over the spines (collision_slowdown, the most senders of
    any leaf, every such leaf at once); the rest cross only their leaf's bridge. Every
    link runs at the NIC's rate (dccl-run shapes them all alike). buckets: the flow cap's
    hash buckets a peer's flows fall into (0: a cap per flow; flows.capped_gbps); window:
    bytes each sprayed flow keeps queued (0: none; flows.queue_us, once a call)."""
    t = 0.0
    bw = flows.capped_gbps(nic, nflows, cap, buckets) * eff
    for m, dest in steps(op, algo, hosts, size):
        out = [0] * leaves
        for r in range(hosts):
            if leaf_of(hosts, leaves, r, interleave) != leaf_of(hosts, leaves, dest(r), interleave):
                out[leaf_of(hosts, leaves, r, interleave)] += 1
        senders, busy = max(out), sum(1 for c in out if c == max(out))
        slow = 1.0 if senders == 0 else flows.collision_slowdown(
            senders, nflows, spines, cap, nic, nic, rebalance=nflows > 1, leaves=busy)
        t += alpha + cm.us(m, bw / slow)
    t += flows.queue_us(nflows, window, size / hosts, bw)
    factor = 2 if op == "all_reduce" else 1
    return size / (t * 1e3) * factor * (hosts - 1) / hosts


def row_algo(variant, op):
    """The algorithm a row ran at >= 1 MiB: DCCL_ALGO's for op when the variant sets it,
    else the ring (DirectCCL's tuner above 256 KiB; Gloo's ring; Open MPI and the Intel
    libraries taken as rings too)."""
    name = {"all_reduce": "allreduce", "all_gather": "allgather"}[op]
    for kv in variant.split("@")[1:]:
        k, _, v = kv.partition("=")
        if k == "DCCL_ALGO":
            for item in v.split(","):
                coll, _, algo = item.rpartition(":")
                if coll in ("", name):
                    return algo
    return "ring"


# Bytes each sprayed flow keeps queued: DirectCCL's window (net/sock/spray.hpp kWindowBytes,
# DCCL_NET_FLOW_WINDOW_BYTES; 512 KiB in the runs before 2026-12-05-fabric-window).
WINDOW = 128 << 10


def predict_row(r, nflows, buckets=0, window=None):
    """The model's busbw (GB/s) for one measured row (its net settings from compare-hosts).
    buckets: the emulator's cap buckets a peer's flows hash into (0: a cap per flow); window:
    bytes per sprayed flow, None: DirectCCL's (WINDOW), 0: no queue term. Only DirectCCL's rows
    spray (one flow per peer queues nothing of its own)."""
    net = r["net"]
    nic, cap = parse_rate(net["rate"]), parse_rate(net.get("flow_rate"))
    w = WINDOW if window is None else window
    return emulated_busbw(r["op"], row_algo(r["variant"], r["op"]), r["hosts"], net.get("leaves") or r["hosts"],
                          net["spines"], r["size"], nic, cap, nflows, plan.LINK[0], CLOUD["efficiency"][0],
                          buckets=buckets, window=w, interleave=bool(net.get("interleave")))


def against(paths, flows_var, default_flows, min_size=1 << 20, buckets=0, window=0):
    """Markdown rows: measured median busbw, the model's, the error; and the errors by variant."""
    groups = {}
    for p in paths:
        with open(p) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                r = json.loads(line)
                if r["size"] >= min_size and "net" in r:
                    b = r["busbw_gbps"]
                    if not isinstance(b, (int, float)) or not b > 0:
                        raise ValueError(f"{p} line {n}: busbw_gbps {b!r} is not a positive number")
                    key = (os.path.basename(os.path.dirname(p)), r["op"], r["variant"], r["size"])
                    groups.setdefault(key, []).append(r)
    if not groups:
        raise ValueError(f"no row of {min_size >> 20} MiB or more with the network's settings (\"net\", "
                         "as bench/compare-hosts --fabric writes them) to compare with")
    out = ["| run | op | variant | flows | size | measured busbw GB/s | model GB/s | error |",
           "|---|---|---|---|---|---|---|---|"]
    errs = {}  # variant -> [relative error]
    for (run, op, variant, size), rs in sorted(groups.items()):
        nf = row_flows(variant, flows_var, default_flows)
        meas = statistics.median(r["busbw_gbps"] for r in rs)
        model = predict_row(rs[0], nf, buckets, window)
        e = (model - meas) / meas
        errs.setdefault(variant, []).append(e)
        out.append(f"| {run} | {op} | {variant} | {nf} | {size >> 20} MiB | {meas:.4f} | {model:.4f} | {e * 100:+.0f}% |")
    return "\n".join(out), errs

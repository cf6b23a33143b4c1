"""Predictions on the calibrated cluster: NCCL (its own algorithm and protocol choice),
DirectCCL peer-direct and DirectCCL staged, 2 ... 1,024 nodes x 8 GPUs, 8 B ... 8 GiB, with
the winner and why."""
import math

import dccl
import nccl

NODES = [2, 4, 8, 16, 64, 256, 1024]
SIZES = [8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30, 8 << 30]
LABELS = {"nccl": "NCCL", "direct": "DirectCCL peer-direct", "staged": "DirectCCL staged"}

# Every bandwidth made endless: what is left of a time is its step latency.
ENDLESS = {"nic_gbps": 1e12, "nvlink_gbps": 1e12, "copy_gbps": 1e12, "staging_node_gbps": 1e12,
           "hbm_gbps": 1e12, "nccl_tree_ch_gbps_2n": 1e12, "nccl_tree_ch_gbps_4n": 1e12,
           "nccl_ll128_ch_gbps": 1e12}


def human(b):
    for unit, f in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= f and b % f == 0:
            return f"{b // f}{unit}"
    return f"{b}B"


def times(size, nodes, over):
    t_nccl, algo, proto = nccl.allreduce(size, nodes, over)
    return {"nccl": t_nccl, "direct": dccl.allreduce(size, nodes, "direct", over),
            "staged": dccl.allreduce(size, nodes, "staged", over)}, f"{algo}/{proto}"


def latency_share(who, size, nodes, over):
    """Fraction of `who`'s time that is step latency (the rest is bytes on links)."""
    lat_over = dict(over, **ENDLESS)
    full = times(size, nodes, over)[0][who]
    lat = times(size, nodes, lat_over)[0][who]
    return min(1.0, lat / full)


def _steps(who, size, nodes):
    if who == "nccl":
        return "NCCL: 14 NVLink and 2 log2 N network hops up and down its tree"
    if size <= 64 << 10:
        return "DirectCCL: 3 + log2 N host-driven messages"
    return "DirectCCL: 14 node messages per 4 MiB piece, and 2 (N - 1) network ones once shards pass 256 KiB"


def why(size, nodes, over, t):
    """Who wins, by how much against the other library's better path, and which cost
    decides it: step latency or bytes on links (the model with endless bandwidth gives
    the first, the rest is the second)."""
    best = min(t, key=t.get)
    rival = "nccl" if best != "nccl" else min(("direct", "staged"), key=t.get)
    ratio = t[rival] / t[best]
    lat_b = t[best] * latency_share(best, size, nodes, over)
    lat_r = t[rival] * latency_share(rival, size, nodes, over)
    d_lat, d_bw = lat_r - lat_b, (t[rival] - lat_r) - (t[best] - lat_b)
    if d_lat >= d_bw:
        dearer = best if d_lat < 0 else rival
        reason = f"step latency {lat_b:,.0f} against {lat_r:,.0f} us ({_steps(dearer, size, nodes)})"
    else:
        reason = f"bytes on links {t[best] - lat_b:,.0f} against {t[rival] - lat_r:,.0f} us"
    return best, ratio, reason


def table(over):
    """[(nodes, size, times, nccl choice, winner, ratio, reason)]"""
    rows = []
    for n in NODES:
        for s in SIZES:
            t, choice = times(s, n, over)
            best, ratio, reason = why(s, n, over, t)
            rows.append((n, s, t, choice, best, ratio, reason))
    return rows


WHATIF_NODES = [2, 64, 1024]
WHATIF_SIZES = [16 << 20, 1 << 30, 8 << 30]


def whatif(over):
    """Peer-direct as it is, then with halving-doubling across nodes above 256 KiB (log2 N
    steps, not 2 (N - 1)), then also with 64 MiB pieces (fewer node steps per byte)."""
    rows = []
    for n in WHATIF_NODES:
        for s in WHATIF_SIZES:
            now = dccl.allreduce(s, n, "direct", over)
            rhd = dccl.allreduce(s, n, "direct", over, large="rhd")
            big = dccl.allreduce(s, n, "direct", dict(over, hier_piece=64 << 20), large="rhd")
            rows.append((n, s, nccl.allreduce(s, n, over)[0], now, rhd, big))
    out = ["| nodes | size | NCCL µs | peer-direct µs | + rhd across nodes | + 64 MiB pieces | ÷ NCCL |",
           "|---|---|---|---|---|---|---|"]
    for n, s, t, now, rhd, big in rows:
        out.append(f"| {n} | {human(s)} | {t:,.0f} | {now:,.0f} | {rhd:,.0f} | {big:,.0f} | {big / t:.2f}x |")
    return "\n".join(out)


def busbw(size, t_us, ranks):
    return size / (t_us * 1e3) * 2 * (ranks - 1) / ranks


def markdown(rows, gpus=8):
    out = ["| nodes | size | NCCL µs (algo) | peer-direct µs | staged µs | busbw NCCL / direct / staged GB/s "
           "| staged ÷ direct | wins | by | why |", "|---|---|---|---|---|---|---|---|---|---|"]
    for n, s, t, choice, best, ratio, reason in rows:
        p = n * gpus
        bw = " / ".join(f"{busbw(s, t[k], p):.2f}" if busbw(s, t[k], p) < 10 else f"{busbw(s, t[k], p):.0f}"
                        for k in ("nccl", "direct", "staged"))
        out.append(f"| {n} | {human(s)} | {t['nccl']:,.0f} ({choice}) | {t['direct']:,.0f} | {t['staged']:,.0f} "
                   f"| {bw} | {t['staged'] / t['direct']:.2f}x | {LABELS[best]} | {ratio:.2f}x | {reason} |")
    return "\n".join(out)


def dat(over, path, gpus=8):
    """gnuplot data: one block per node count; size, NCCL, direct, staged (us)."""
    with open(path, "w") as f:
        f.write("# nodes size nccl_us direct_us staged_us\n")
        for n in NODES:
            for i in range(int(math.log2(8 << 30)) - 2):
                s = 8 << i
                t, _ = times(s, n, over)
                f.write(f"{n} {s} {t['nccl']:.3f} {t['direct']:.3f} {t['staged']:.3f}\n")
            f.write("\n\n")

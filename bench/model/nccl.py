"""NCCL's allreduce on N nodes x g GPUs, algorithm by algorithm, protocol by protocol.

Each call runs on `ch` channels (NCCL's CUDA blocks, each with its own connections); a channel
moves its share of the vector in steps (Simple: NCCL_BUFFSIZE / NCCL_STEPS bytes) through a
pipeline of hops. A hop costs NCCL's own per-step latency for its link, algorithm and protocol
(tuning.cc's hwLat; the network hop adds this path's fitted latency) plus the step's bytes at the
channel's share of the link. A call costs:

  launch + baseLat + (every hop once, with the first step)  + (steps - 1) x (the slowest hop)

Tree: a chain through the node's g GPUs and a binary tree across nodes (NCCL's double binary
tree: at 2 nodes each node sends each byte once, beyond that an inner node sends to two
children), reduce up, broadcast down: 2 (g - 1) NVLink hops and 2 log2 N network hops.
Ring: 2 (P - 1) hops of 1/P of the vector each, 2 N of them across nodes (NCCL's count).
Protocols: Simple moves whole steps; LL moves 8-byte lines of 4 data bytes, LL128 128-byte lines
of 120: their latencies are lower, their bandwidth a fraction of Simple's.
"""
import math

from params import MB, value

PROTOS = ("LL", "LL128", "Simple")


def _v(name, over):
    return value(name, over)


def step_bytes(over=None):
    return _v("nccl_buffsize", over) / _v("nccl_steps", over)


def channels(size, over=None):
    """Channels of one call: a channel per full step, between the small-call and the
    large-call counts (both fitted)."""
    lo, hi = int(_v("nccl_min_channels", over)), int(_v("nccl_max_channels", over))
    return int(min(hi, max(lo, size // step_bytes(over))))


def _proto_eff(proto, over, algo="ring"):
    if proto == "LL" and algo == "tree":
        return _v("nccl_tree_ll_eff", over)
    return {"LL": _v("nccl_ll_eff", over), "LL128": _v("nccl_ll128_eff", over), "Simple": 1.0}[proto]


def _nvl_lat(algo, proto, over):
    if proto == "LL":
        return _v("nccl_nvl_lat_ll", over)
    return _v(f"nccl_nvl_lat_{algo}_{proto.lower()}", over)


def _net_lat(algo, proto, over):
    base = _v("nccl_net_lat_simple", over) if proto == "Simple" else _v(f"nccl_net_lat_{algo}_{proto.lower()}", over)
    return base + _v("net_lat_us", over)


def _base_lat(algo, proto, over):
    if proto == "LL128":
        return _v("nccl_base_lat_ll128", over)
    return _v(f"nccl_base_lat_{algo}_{proto.lower()}", over)


def node_net_gbps(over=None):
    """What the TCPXO path delivers per node and direction."""
    return _v("nics_per_node", over) * _v("nic_gbps", over) * _v("net_eff", over)


def tree(size, nodes, proto="Simple", over=None):
    g = int(_v("gpus_per_node", over))
    ch = channels(size, over)
    eff = _proto_eff(proto, over, "tree")
    s = size / ch
    c = step_bytes(over) if proto == "Simple" else _v("nccl_ll_step", over)
    k = max(1, math.ceil(s / c))
    m = min(c, s)
    scale = "2n" if nodes <= 2 else "4n"
    cap = _v(f"nccl_tree_ll128_ch_gbps_{scale}" if proto == "LL128" else f"nccl_tree_ch_gbps_{scale}", over)
    nvl_ch = min(cap, _v("nvlink_gbps", over) / ch) * eff * 1e3   # B/us
    fan = 1 if nodes <= 2 else 2
    net_ch = node_net_gbps(over) / (ch * fan) * eff * 1e3
    t_nvl = _nvl_lat("tree", proto, over) + m / nvl_ch
    hops_net = 2 * math.ceil(math.log2(nodes)) if nodes > 1 else 0
    t_net = _net_lat("tree", proto, over) + m / net_ch
    fill = 2 * (g - 1) * t_nvl + hops_net * t_net
    slow = max(m / nvl_ch, m / net_ch if hops_net else 0.0)
    return _v("launch_us", over) + _base_lat("tree", proto, over) + fill + (k - 1) * slow


def ring(size, nodes, proto="Simple", over=None):
    g = int(_v("gpus_per_node", over))
    p = nodes * g
    ch = channels(size, over)
    eff = _proto_eff(proto, over)
    inter = 2 * nodes if nodes > 1 else 0
    intra = 2 * (p - 1) - inter
    lat = intra * _nvl_lat("ring", proto, over) + inter * _net_lat("ring", proto, over)
    # Every GPU sends 2 (P - 1) / P of the vector; across nodes each ring leaves a node once
    # per direction, so a node sends as much as one GPU.
    moved = 2 * (p - 1) / p * size
    bw = _v("nvlink_gbps", over) * eff
    if nodes > 1:
        bw = min(bw, node_net_gbps(over) * eff)
    if proto == "LL128":
        bw = min(bw, ch * _v("nccl_ll128_ch_gbps", over))
    c = min(step_bytes(over), size / (ch * p))
    fill = 2 * c / (bw * 1e3 / ch)  # the first step through a hop, the last out of one
    return _v("launch_us", over) + _base_lat("ring", proto, over) + lat + moved / (bw * 1e3) + fill


ALGOS = {"tree": tree, "ring": ring}


def allowed_protos(over=None):
    return tuple(str(_v("nccl_protos", over)).split(","))


def choice(size, nodes, over=None):
    """(algorithm, protocol) as NCCL runs it on A3 Mega: the cloud's tuner plugin fixes Tree
    at 2 nodes and up to 2 MiB at 3-6 nodes; elsewhere NCCL takes the cheapest by its model."""
    protos = allowed_protos(over)
    if nodes == 2 or (3 <= nodes <= 6 and size <= 2 * MB):
        algos = ("tree",)
    else:
        algos = ("ring", "tree")
    return min(((a, p) for a in algos for p in protos), key=lambda ap: ALGOS[ap[0]](size, nodes, ap[1], over))


def allreduce(size, nodes, over=None):
    a, p = choice(size, nodes, over)
    return ALGOS[a](size, nodes, p, over), a, p

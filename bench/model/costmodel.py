"""Alpha-beta-gamma cost model of DirectCCL's allreduce algorithms and data paths.

Times are in microseconds, sizes in bytes, bandwidths in GB/s (1e9 B/s = 1e-3 B/us).
A message of m bytes over a link costs alpha + m / bw. Reductions cost m / reduce_bw.
The staged path adds, per network message, a device-to-host copy before
the send and a host-to-device copy after the receive: 2 * copy_latency, the pipeline's
fill and drain (one slot each way) and a throughput cap of the staging bandwidth.
"""
import math
from dataclasses import dataclass, replace

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30


def us(nbytes, gbps):
    """Microseconds to move nbytes at gbps (GB/s, 1e9 B/s)."""
    return nbytes / (gbps * 1e3)


@dataclass(frozen=True)
class Link:
    alpha: float  # us per message
    gbps: float   # bandwidth per direction
    eager: int = 1 << 62  # larger messages take a rendezvous: one more alpha
    seg: int = 0          # messages up to this size move at seg_gbps instead (one
    seg_gbps: float = 0.0  # loopback TCP segment: 64 KiB here; 0 in the clusters)


@dataclass(frozen=True)
class Staging:
    """The host-staged path: copies through host staging buffers."""
    copy_latency: float = 8.0   # us per device<->host copy (launch + completion)
    copy_gbps: float = 50.0     # one accelerator's copy bandwidth (PCIe 5 x16, effective)
    node_gbps: float = 150.0    # all of a node's staging traffic through host memory
    slot: int = 1 * MB          # staging-slot size: the pipeline's fill and drain


def net_msg(link, m, staging=None, flows=1):
    """One message of m bytes on a network link shared by `flows` concurrent flows."""
    bw = (link.seg_gbps if m <= link.seg else link.gbps) / flows
    alpha = link.alpha * (2 if m > link.eager else 1)
    if staging is None:
        return alpha + us(m, bw)
    staging_bw = min(staging.copy_gbps, staging.node_gbps / flows)
    fill = 2 * us(min(m, staging.slot), staging.copy_gbps)
    return alpha + 2 * staging.copy_latency + fill + us(m, min(bw, staging_bw))


# ---- allreduce algorithms on one flat group of n ranks over one kind of link ----

def ring(n, size, link, reduce_gbps, staging=None, flows=1):
    if n == 1:
        return 0.0
    m = size / n
    return 2 * (n - 1) * net_msg(link, m, staging, flows) + (n - 1) * us(m, reduce_gbps)


def rhd(n, size, link, reduce_gbps, staging=None, flows=1):
    """Recursive halving (reduce-scatter) then doubling (allgather)."""
    if n == 1:
        return 0.0
    steps = math.ceil(math.log2(n))
    t, m = 0.0, size
    for _ in range(steps):
        m /= 2
        t += 2 * net_msg(link, m, staging, flows) + us(m, reduce_gbps)
    return t


def rd(n, size, link, reduce_gbps, staging=None, flows=1):
    """Recursive doubling: log2(n) exchanges of the whole message (small messages)."""
    if n == 1:
        return 0.0
    return math.ceil(math.log2(n)) * (net_msg(link, size, staging, flows) + us(size, reduce_gbps))


def tree(n, size, link, reduce_gbps, staging=None, flows=1, chunk=512 * KB):
    """Pipelined binary tree: reduce up, broadcast down, in chunks."""
    if n == 1:
        return 0.0
    depth = math.ceil(math.log2(n + 1))
    c = min(size, chunk)
    chunks = max(1, math.ceil(size / c))
    per = net_msg(link, c, staging, flows) + us(c, reduce_gbps)
    # Two children per node in the reduce, two in the broadcast; the pipeline holds
    # 2 * depth stages and then moves one chunk per stage time.
    return 2 * (depth + chunks - 1) * per


FLAT = {"ring": ring, "rhd": rhd, "rd": rd, "tree": tree}


def rd_max_bytes(n, alpha, gbps, reduce_gbps, lo, hi):
    """Where rd() stops beating rhd() for a power-of-two n: the tuner's recursive
    doubling bound (src/tune/link_model.cc computes the same, held to the plan's lo..hi)."""
    if n < 2:
        return hi
    L = math.ceil(math.log2(n))
    f = 1 - 2.0 ** -L
    per_byte = (L - 2 * f) / (gbps * 1e3) + (L - f) / (reduce_gbps * 1e3)
    if per_byte <= 0:
        return hi
    return int(min(hi, max(lo, L * alpha / per_byte)))


# ---- one host of this machine: the shared-memory segment ----

def segment_oneshot(n, size, alpha, kappa, copy_gbps_at, reduce_gbps_at):
    """One-shot through the shared segment (small messages, in cache): every rank
    copies its input into its slot, then reduces all n slots into its output.
    kappa scales the memory terms for ranks sharing cores (fitted)."""
    return alpha + kappa * (us(size, copy_gbps_at(size)) + (n - 1) * us(size, reduce_gbps_at(size)))


def segment_chunked(n, size, alpha, kappa, copy_gbps_at, reduce_gbps_at, chunk=256 * KB):
    """Chunked reduce-scatter + allgather through the segment: the user's buffers
    stream from memory (read once, written once), the slots stay in cache, every
    rank reduces 1/n of each chunk from n - 1 slots."""
    t = 2 * us(size, copy_gbps_at(size)) + (n - 1) / n * us(size, reduce_gbps_at(chunk / n))
    return alpha + kappa * t


# ---- a cloud cluster: N nodes x g accelerators ----

@dataclass(frozen=True)
class Cluster:
    gpus: int = 8
    intra: Link = Link(alpha=3.0, gbps=150.0)   # accelerator fabric inside a node
    nic: Link = Link(alpha=15.0, gbps=50.0)     # 4 x 100 Gbit/s per node
    reduce_gbps: float = 1000.0                 # reduction on the accelerator (HBM)
    staging: Staging = Staging()


def cluster_allreduce(algo, nodes, size, cl, staged):
    """Allreduce of `size` bytes per accelerator over nodes x cl.gpus accelerators."""
    g, staging = cl.gpus, (cl.staging if staged else None)
    p = nodes * g
    if algo == "ring":  # one ring through every accelerator: a step waits for its node hop
        if p == 1:
            return 0.0
        m = size / p
        step = max(cl.intra.alpha + us(m, cl.intra.gbps), net_msg(cl.nic, m, staging) if nodes > 1 else 0.0)
        return 2 * (p - 1) * step + (p - 1) * us(m, cl.reduce_gbps)
    if algo == "tree":  # a tree across nodes, a chain inside each (pipelined)
        t_in = tree(g, size, cl.intra, cl.reduce_gbps)
        t_x = tree(nodes, size, cl.nic, cl.reduce_gbps, staging) if nodes > 1 else 0.0
        return t_in + t_x
    if algo == "hier":  # reduce-scatter inside, g parallel allreduces across, allgather inside
        share = size / g
        t_in = 2 * (g - 1) * (cl.intra.alpha + us(share, cl.intra.gbps)) + (g - 1) * us(share, cl.reduce_gbps)
        if nodes == 1:
            return t_in
        across = min(f(nodes, share, cl.nic, cl.reduce_gbps, staging, flows=g) for f in (ring, rhd, tree))
        return t_in + across
    raise ValueError(algo)


def busbw(size, t_us, ranks):
    """nccl-tests' bus bandwidth in GB/s."""
    return 0.0 if t_us <= 0 else size / (t_us * 1e3) * 2 * (ranks - 1) / ranks


def with_staging(cl, **kw):
    return replace(cl, staging=replace(cl.staging, **kw))

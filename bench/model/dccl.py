"""DirectCCL's allreduce on the same N nodes x g GPUs: its hierarchical algorithm
(src/coll/allreduce_hier.cc) on the two data paths, like for like with nccl.py.

  up to hier_shard_min (64 KiB): allreduce on the node (recursive doubling over the g GPUs),
      then every GPU allreduces the whole vector with its peers on the other nodes (its own
      cross-node communicator, its own NIC);
  above: reduce-scatter on the node, allreduce of each GPU's 1/g shard across nodes (the
      tuner's rd / rhd / ring, by size), allgather on the node; in pieces of hier_piece
      (4 MiB), the cross-node step of one piece beside the node steps of its neighbours.

A network message costs NCCL's per-step network latency on this path (its published 14 us
plus the fitted TCPXO latency: the same NICs), DirectCCL's host-driven step (post,
completion, a device reduce launched and synchronised) and the bytes at one NIC's share of
what the path delivers. Peer-direct: the NIC reads and writes GPU memory. Staged: every
message also crosses host memory (a device->host copy before the send, a host->device copy
after the receive, one slot of pipeline fill) at the copies' bandwidth, shared per node.
Reductions run on the GPU at HBM speed.
"""
import math

import costmodel as cm
import nccl
import plan
from params import value

PATHS = ("direct", "staged")


def _v(name, over):
    return value(name, over)


def reduce_gbps(over=None):
    """Sum of two vectors into a third: three HBM passes per element."""
    return _v("hbm_gbps", over) / 3


def staging(over=None):
    return cm.Staging(copy_latency=(_v("d2h_us", over) + _v("h2d_us", over)) / 2,
                    copy_gbps=_v("copy_gbps", over), node_gbps=_v("staging_node_gbps", over),
                    slot=int(_v("staging_slot", over)))


# Links are given per node: the g GPUs of a node run their messages at once (flows = g in
# costmodel.net_msg, which divides the link and the staging's host memory among them).

def net_link(over=None):
    alpha = _v("nccl_net_lat_simple", over) + _v("net_lat_us", over) + _v("dccl_step_us", over)
    return cm.Link(alpha=alpha, gbps=nccl.node_net_gbps(over))


def node_link(path, over=None):
    """Between GPUs of one node: NVLink peer to peer (every GPU its own ports), or through
    host memory when staged (every GPU its own copy engines)."""
    g = _v("gpus_per_node", over)
    alpha = _v("dccl_nvl_lat_us", over) + _v("dccl_step_us", over)
    if path == "direct":
        return cm.Link(alpha=alpha, gbps=g * _v("nvlink_gbps", over) * _v("dccl_nvl_eff", over))
    return cm.Link(alpha=alpha, gbps=g * _v("copy_gbps", over))


def _staging_for(path, over):
    return staging(over) if path == "staged" else None


def cross_algo(n, size, over=None, large="ring"):
    """The tuner's choice across nodes (its plan, plan.py): rd up to the link model's
    bound, rhd up to the plan's window, ring above (`large` replaces the ring in what-ifs)."""
    link = net_link(over)
    per_gpu = link.gbps / _v("gpus_per_node", over)
    if size <= cm.rd_max_bytes(n, link.alpha, per_gpu, reduce_gbps(over), *plan.RD_BOUNDS):
        return "rd"
    return "rhd" if size <= plan.RHD_MAX else large


def cross(n, size, path, over=None, large="ring"):
    if n < 2:
        return 0.0
    g = int(_v("gpus_per_node", over))
    f = cm.FLAT[cross_algo(n, size, over, large)]
    return f(n, size, net_link(over), reduce_gbps(over), _staging_for(path, over), flows=g)


def node_rd(size, path, over=None):
    g = int(_v("gpus_per_node", over))
    return cm.rd(g, size, node_link(path, over), reduce_gbps(over), _staging_for(path, over), flows=g)


def node_rs_or_ag(size, path, over=None, reduce=True):
    """Ring reduce-scatter (or allgather) of `size` bytes over the node's g GPUs."""
    g = int(_v("gpus_per_node", over))
    m = size / g
    msg = cm.net_msg(node_link(path, over), m, _staging_for(path, over), flows=g)
    return (g - 1) * (msg + (cm.us(m, reduce_gbps(over)) if reduce else 0.0))


def hier(size, nodes, path, over=None, large="ring"):
    g = int(_v("gpus_per_node", over))
    t = _v("launch_us", over)
    if size <= _v("hier_shard_min", over):
        return t + node_rd(size, path, over) + cross(nodes, size, path, over, large)
    piece = min(size, _v("hier_piece", over))
    pieces = math.ceil(size / piece)
    rs = node_rs_or_ag(piece, path, over, reduce=True)
    ag = node_rs_or_ag(piece, path, over, reduce=False)
    x = cross(nodes, piece / g, path, over, large)
    # First piece's reduce-scatter, then one cross-node step per piece beside the node
    # steps of its neighbours, then the last piece's allgather.
    return t + rs + pieces * max(x, rs + ag if pieces > 1 else 0.0) + ag


def allreduce(size, nodes, path, over=None, large="ring"):
    return hier(size, nodes, path, over, large)

"""Every parameter of the cluster model, with where it comes from.

origin is one of:
  published  a vendor's or a project's published figure (cited in `source`);
  measured   measured by this project (the file named in `source`);
  fitted     fitted by calibrate.py on half of the A3 Mega table (value here: the last fit,
             refitted by every `bench/model/run`);
  assumed    neither published for this cluster nor fitted: a guess, named as one.

Units: microseconds, GB/s (1e9 B/s), bytes.
"""
from dataclasses import dataclass, replace

import plan

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30


@dataclass(frozen=True)
class Param:
    value: float
    unit: str
    origin: str
    source: str


P = {
    # ---- the cluster: Google Cloud A3 Mega (a3-megagpu-8g) ----
    "gpus_per_node": Param(8, "", "published",
                           "cloud.google.com/compute/docs/gpus (A3 Mega: 8 x H100 80GB per VM)"),
    "nics_per_node": Param(8, "", "published",
                           "cloud.google.com/compute/docs/gpus/gpu-network-bandwidth (A3 Mega: 8 GPU NICs)"),
    "nic_gbps": Param(25.0, "GB/s", "published",
                      "same page: 200 Gbit/s per GPU NIC (1,600 Gbit/s per VM for GPUDirect-TCPXO)"),
    "nvlink_gbps": Param(450.0, "GB/s", "published",
                         "NVIDIA H100 SXM datasheet: NVLink 900 GB/s per GPU, both directions"),
    "hbm_gbps": Param(3350.0, "GB/s", "published", "NVIDIA H100 SXM datasheet: HBM3 3.35 TB/s"),
    # ---- NCCL's own per-step costs and limits (NVIDIA/nccl src/graph/tuning.cc) ----
    "nccl_base_lat_tree_simple": Param(8.4, "us", "published", "tuning.cc baseLat[Tree][Simple]"),
    "nccl_base_lat_ring_simple": Param(8.4, "us", "published", "tuning.cc baseLat[Ring][Simple]"),
    "nccl_base_lat_tree_ll": Param(6.8, "us", "published", "tuning.cc baseLat[Tree][LL]"),
    "nccl_base_lat_ring_ll": Param(6.6, "us", "published", "tuning.cc baseLat[Ring][LL]"),
    "nccl_base_lat_ll128": Param(14.0, "us", "published", "tuning.cc baseLat[Tree|Ring][LL128]"),
    "nccl_nvl_lat_tree_simple": Param(4.0, "us", "published", "tuning.cc hwLat[NVLink][Tree][Simple]"),
    "nccl_nvl_lat_ring_simple": Param(3.4, "us", "published", "tuning.cc hwLat[NVLink][Ring][Simple]"),
    "nccl_nvl_lat_ll": Param(0.6, "us", "published", "tuning.cc hwLat[NVLink][Tree|Ring][LL]"),
    "nccl_nvl_lat_tree_ll128": Param(1.25, "us", "published", "tuning.cc hwLat[NVLink][Tree][LL128]"),
    "nccl_nvl_lat_ring_ll128": Param(1.9, "us", "published", "tuning.cc hwLat[NVLink][Ring][LL128]"),
    "nccl_net_lat_simple": Param(14.0, "us", "published", "tuning.cc hwLat[Net][Tree|Ring][Simple]"),
    "nccl_net_lat_tree_ll": Param(5.0, "us", "published", "tuning.cc hwLat[Net][Tree][LL]"),
    "nccl_net_lat_ring_ll": Param(2.7, "us", "published", "tuning.cc hwLat[Net][Ring][LL]"),
    "nccl_net_lat_tree_ll128": Param(8.5, "us", "published", "tuning.cc hwLat[Net][Tree][LL128]"),
    "nccl_net_lat_ring_ll128": Param(4.0, "us", "published", "tuning.cc hwLat[Net][Ring][LL128]"),
    "nccl_tree_ch_gbps_2n": Param(41.4, "GB/s", "published",
                                  "tuning.cc perChMaxTreeBws[Hopper][2 nodes]: one channel's tree copy rate"),
    "nccl_tree_ch_gbps_4n": Param(36.0, "GB/s", "published", "tuning.cc perChMaxTreeBws[Hopper][4+ nodes]"),
    "nccl_ll128_ch_gbps": Param(36.7, "GB/s", "published", "tuning.cc perChMaxRingLL128Bws[Hopper]"),
    "nccl_tree_ll128_ch_gbps_2n": Param(36.7, "GB/s", "published", "tuning.cc perChMaxTreeLL128Bws[Hopper][2 nodes]"),
    "nccl_tree_ll128_ch_gbps_4n": Param(29.0, "GB/s", "published", "tuning.cc perChMaxTreeLL128Bws[Hopper][4+ nodes]"),
    "nccl_tree_ll_eff": Param(1 / 3.8, "", "published", "tuning.cc: tree LL bandwidth is Simple's / 3.8"),
    "nccl_ll_step": Param(256 * KB, "B", "assumed", "bytes per LL / LL128 step and channel (their buffers are smaller "
                          "than Simple's; only Simple runs on A3 Mega)"),
    "nccl_ll_eff": Param(0.5, "", "published",
                         "LL: 8-byte lines carry 4 bytes of data and a 4-byte flag (tuning.cc: bw * 0.5)"),
    "nccl_ll128_eff": Param(120 / 128, "", "published", "LL128: 120 of every 128 bytes are data (tuning.cc)"),
    "nccl_steps": Param(8, "", "published", "NCCL_STEPS: buffer slots per connection (src/include/device.h)"),
    "nccl_buffsize": Param(8 * MB, "B", "published",
                           "NCCL_BUFFSIZE=8388608 in the cloud's A3 Mega profile (nccl-env-profile.sh); "
                           "a Simple step is buffsize / NCCL_STEPS = 1 MiB"),
    "nccl_protos": Param("Simple", "", "published",
                         "NCCL_PROTO=Simple in the A3 Mega profile (TCPXO carries Simple only); "
                         "the tuner plugin's a3plus_tuner_config: Tree/Simple at 2 nodes x 8, "
                         "Tree up to 2 MiB at 3-6 nodes, NCCL's choice (Ring, Tree) beyond"),
    # ---- fitted on the A3 Mega table (calibrate.py overwrites these) ----
    "launch_us": Param(35.0, "us", "fitted", "kernel launch and NCCL's per-call overhead"),
    "net_lat_us": Param(23.1, "us", "fitted",
                        "per network step of the TCPXO path beyond NCCL's own 14 us (one direction)"),
    "net_eff": Param(0.82, "", "fitted", "fraction of the NICs' 200 GB/s per node the TCPXO path delivers"),
    "nccl_min_channels": Param(8, "", "fitted", "channels of a small call"),
    "nccl_max_channels": Param(24, "", "fitted", "channels of a large call (a channel per full 1 MiB step between)"),
    # ---- this project's data paths on the same cluster ----
    "d2h_us": Param(4.8, "us", "measured", "4 KiB device->host copy, H200 (bench/results/2026-12-04-gpu-check)"),
    "h2d_us": Param(5.9, "us", "measured", "4 KiB host->device copy, H200 (same run)"),
    "copy_gbps": Param(49.6, "GB/s", "measured",
                       "device<->host copies both ways at once: 99.2 GB/s, half each way (same run)"),
    "staging_node_gbps": Param(150.0, "GB/s", "assumed",
                             "a node's host memory for staged bytes (each byte written and read twice)"),
    "staging_slot": Param(1 * MB, "B", "published", "DCCL_STAGING_SLOT_BYTES default (src/core/config_table.hpp)"),
    "hier_piece": Param(plan.HIER_PIECE, "B", "published", "DirectCCL's plan: dccl-info --plan (data/plan.json)"),
    "hier_shard_min": Param(plan.HIER_SHARD, "B", "published", "DirectCCL's plan: dccl-info --plan (data/plan.json)"),
    "dccl_step_us": Param(8.0, "us", "assumed",
                          "DirectCCL per message on the host-driven path: post, completion, one device "
                          "reduce launched and synchronised (copies of 4 KiB take 4.8-5.9 us here)"),
    "dccl_nvl_lat_us": Param(10.0, "us", "assumed",
                             "a message between GPUs of one node through libfabric shm with FI_HMEM (CUDA IPC)"),
    "dccl_nvl_eff": Param(0.8, "", "assumed", "fraction of NVLink's 450 GB/s a copy-engine transfer reaches"),
}


def value(name, over=None):
    if over and name in over:
        return over[name]
    return P[name].value


def with_fit(fit):
    """P with the fitted values replaced (fit: name -> value)."""
    out = dict(P)
    for k, v in fit.items():
        out[k] = replace(P[k], value=v)
    return out


def table(params=None):
    """Markdown table of every parameter."""
    params = params or P
    lines = ["| parameter | value | unit | origin | source |", "|---|---|---|---|---|"]
    for k, p in params.items():
        v = p.value
        vs = f"{v:.4g}" if isinstance(v, float) else str(v)
        lines.append(f"| {k} | {vs} | {p.unit} | {p.origin} | {p.source} |")
    return "\n".join(lines)

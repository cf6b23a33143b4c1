#!/usr/bin/env python3
"""The flow terms of the cost model (bench/model/flows.py, fabric.py) against values
computed by hand: a peer's bandwidth under a per-flow cap, max-min fair rates on shared
spines, the expected slowdown from ECMP collisions, and busbw on the fabric.

  flows_check.py REPO_ROOT
"""
import json
import os
import sys
import tempfile
import unittest

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench", "model"))
import fabric  # noqa: E402
import flows  # noqa: E402

MIB = 1 << 20


class PeerBandwidth(unittest.TestCase):
    def test_min_of_link_share_and_flows_times_cap(self):
        # 100 Gbit/s NIC = 12.5 GB/s, 5 Gbit/s cap = 0.625 GB/s.
        self.assertAlmostEqual(flows.peer_gbps(12.5, 1, 0.625), 0.625)
        self.assertAlmostEqual(flows.peer_gbps(12.5, 8, 0.625), 5.0)
        self.assertAlmostEqual(flows.peer_gbps(12.5, 32, 0.625), 12.5)  # 20 GB/s of caps, the NIC bounds
        self.assertAlmostEqual(flows.peer_gbps(12.5, 4, 0.625, sharing=4), 2.5)  # NIC shared by 4 peers: 3.125
        self.assertAlmostEqual(flows.peer_gbps(12.5, 1, 0.0), 12.5)  # no cap


class FairRates(unittest.TestCase):
    def test_two_flows_on_one_spine_halve(self):
        self.assertEqual(flows.waterfill([0, 0], [0, 1], 0.0, 1.0, 1.0), [0.5, 0.5])
        self.assertEqual(flows.waterfill([0, 1], [0, 1], 0.0, 1.0, 1.0), [1.0, 1.0])

    def test_three_on_one_spine_one_alone(self):
        # Host 0: flows on spines 0 and 1; host 1: two flows on spine 0. Spine 0's three
        # flows get 1/3 each; host 0's flow on spine 1 takes what its NIC leaves: 2/3.
        r = flows.waterfill([0, 1, 0, 0], [0, 0, 1, 1], 0.0, 1.0, 1.0)
        for got, want in zip(r, [1 / 3, 2 / 3, 1 / 3, 1 / 3]):
            self.assertAlmostEqual(got, want)

    def test_cap_binds_first(self):
        r = flows.waterfill([0, 0, 0, 0], [0, 0, 0, 0], 0.25, 1.0, 1.0)
        for got in r:
            self.assertAlmostEqual(got, 0.25)


class Collisions(unittest.TestCase):
    def test_one_flow_each_two_hosts_two_spines(self):
        # 4 hashes: 2 put both flows on one spine (half rate: 2x the time), 2 spread them.
        self.assertAlmostEqual(flows.collision_slowdown(2, 1, 2, 0.0, 1.0, 1.0), (2 + 2 + 1 + 1) / 4)

    def test_slowest_of_two_leaves(self):
        # Two leaves as above, hashed independently: only when neither collides (1/4)
        # is the step at full speed: 1/4 * 1 + 3/4 * 2.
        self.assertAlmostEqual(flows.collision_slowdown(2, 1, 2, 0.0, 1.0, 1.0, leaves=2), 1.75)
        # 3 leaves: P(no collision anywhere) = 1/8.
        self.assertAlmostEqual(flows.collision_slowdown(2, 1, 2, 0.0, 1.0, 1.0, leaves=3), 1 / 8 + 7 / 8 * 2)

    def test_two_flows_each_rebalanced(self):
        # 16 hashes of 4 flows: all on one spine (2 hashes): every host at 1/2, time 2x;
        # 3 on one and 1 alone (8): the host with both flows on the full spine gets 2/3,
        # time 1.5x; 2 and 2 (6): every host at 1. (2*2 + 8*1.5 + 6*1) / 16 = 1.375.
        self.assertAlmostEqual(flows.collision_slowdown(2, 2, 2, 0.0, 1.0, 1.0, rebalance=True), 1.375)

    def test_equal_bytes_per_flow_waits_for_the_slowest(self):
        # One host, 2 flows, 2 spines each as fast as the NIC: spread, 1/2 each (the
        # NIC); together on a spine, 1/2 each too. No slowdown either way.
        self.assertAlmostEqual(flows.collision_slowdown(1, 2, 2, 0.0, 1.0, 1.0, rebalance=False), 1.0)
        # Uplinks at half the NIC: together on one spine the flows get 1/4 each against
        # 1/2 spread (2 of 4 hashes): (2 + 2 + 1 + 1) / 4.
        self.assertAlmostEqual(flows.collision_slowdown(1, 2, 2, 0.0, 1.0, 0.5, rebalance=False), 1.5)

    def test_capped_flows_do_not_collide(self):
        # 4 flows at a quarter of the uplink: even all on one spine they fit.
        self.assertAlmostEqual(flows.collision_slowdown(1, 4, 2, 0.25, 1.0, 1.0), 1.0)

    def test_sampled_above_the_exact_limit(self):
        # 4 hosts x 8 flows over 4 spines: 4^32 hashes, sampled; within 2% of a second seed.
        a = flows.collision_slowdown(4, 8, 4, 0.0, 1.0, 1.0, seed=1)
        b = flows.collision_slowdown(4, 8, 4, 0.0, 1.0, 1.0, seed=2)
        self.assertGreater(a, 1.0)
        self.assertLess(abs(a - b) / a, 0.02)


class BusBandwidth(unittest.TestCase):
    def test_ring_allreduce_on_the_fabric(self):
        # 4 hosts, one leaf each, 16 MiB, 1 Gbit/s links, one flow capped at 250 Mbit/s =
        # 0.03125 GB/s, 1,000 us per message: 6 steps of 4 MiB at 31.25 B/us.
        t = 6 * (1000 + 4 * MIB / 31.25)
        want = 16 * MIB / (t * 1e3) * 2 * 3 / 4
        got = fabric.emulated_busbw("all_reduce", "ring", 4, 4, 2, 16 * MIB, 0.125, 0.03125, 1, 1000.0, 1.0)
        self.assertAlmostEqual(got, want, places=12)
        # Four flows fill the link, at TCP's payload efficiency.
        t = 6 * (1000 + 4 * MIB / (125 * 0.95))
        got = fabric.emulated_busbw("all_reduce", "ring", 4, 4, 2, 16 * MIB, 0.125, 0.03125, 4, 1000.0, 0.95)
        self.assertAlmostEqual(got, 16 * MIB / (t * 1e3) * 1.5, places=12)

    def test_ring_allgather(self):
        # 3 steps of 4 MiB, busbw = S / t x 3/4.
        t = 3 * (10 + 4 * MIB / 31.25)
        want = 16 * MIB / (t * 1e3) * 3 / 4
        got = fabric.emulated_busbw("all_gather", "ring", 4, 4, 2, 16 * MIB, 0.125, 0.03125, 1, 10.0, 1.0)
        self.assertAlmostEqual(got, want, places=12)

    def test_halving_doubling_collides_across_two_leaves(self):
        # 4 hosts, 2 leaves (0, 1 | 2, 3), no cap, 1 Gbit/s everywhere, one flow each.
        # Steps: distance 2 with 8 MiB (0<->2, 1<->3: each leaf sends 2 flows over 2
        # spines, both leaves at once: expected 1.75x), distance 1 with 4 MiB (in the
        # leaf), then the same back. No latency.
        t = 2 * (8 * MIB / 125 * 1.75 + 4 * MIB / 125)
        want = 16 * MIB / (t * 1e3) * 1.5
        got = fabric.emulated_busbw("all_reduce", "rhd", 4, 2, 2, 16 * MIB, 0.125, 0.0, 1, 0.0, 1.0)
        self.assertAlmostEqual(got, want, places=12)
        # The ring crosses each leaf boundary once each way: one flow a leaf, no collision.
        got = fabric.emulated_busbw("all_reduce", "ring", 4, 2, 2, 16 * MIB, 0.125, 0.0, 1, 0.0, 1.0)
        self.assertAlmostEqual(got, 0.125, places=12)

    def test_bruck_steps(self):
        # 4 ranks: distance 1 with one block (one flow a leaf crosses), distance 2 with two
        # blocks (two flows a leaf: 1.75x). Blocks of 4 MiB at 125 B/us.
        t = 4 * MIB / 125 + 8 * MIB / 125 * 1.75
        want = 16 * MIB / (t * 1e3) * 3 / 4
        got = fabric.emulated_busbw("all_gather", "bruck", 4, 2, 2, 16 * MIB, 0.125, 0.0, 1, 0.0, 1.0)
        self.assertAlmostEqual(got, want, places=12)

    def test_queued_window_once_a_call(self):
        # 8 sprayed flows of 512 KiB hold 4 MiB: the call ends 4 MiB / 125 B/us later.
        self.assertAlmostEqual(flows.queue_us(8, 512 << 10, 4 * MIB, 0.125), 4 * MIB / 125, places=9)
        self.assertAlmostEqual(flows.queue_us(8, 1 << 20, 4 * MIB, 0.125), 4 * MIB / 125, places=9)  # a step's bytes at most
        self.assertEqual(flows.queue_us(1, 512 << 10, 4 * MIB, 0.125), 0.0)  # one flow is not sprayed
        t = 3 * (10 + 4 * MIB / 125) + 8 * (128 << 10) / 125
        got = fabric.emulated_busbw("all_gather", "ring", 4, 4, 2, 16 * MIB, 0.125, 0.03125, 8, 10.0, 1.0,
                                    window=128 << 10)
        self.assertAlmostEqual(got, 16 * MIB / (t * 1e3) * 3 / 4, places=12)
        r = {"op": "all_gather", "hosts": 4, "variant": "hier", "size": 16 * MIB,
             "net": {"rate": "1gbit", "spines": 2, "leaves": None, "flow_rate": "250mbit"}}
        # window=None: DirectCCL's default (net/sock/spray.hpp kWindowBytes, 128 KiB).
        self.assertEqual(fabric.WINDOW, 128 << 10)
        t = 3 * (fabric.plan.LINK[0] + 4 * MIB / (125 * 0.95)) + 8 * (128 << 10) / (125 * 0.95)
        self.assertAlmostEqual(fabric.predict_row(r, 8, window=None), 16 * MIB / (t * 1e3) * 3 / 4, places=12)

    def test_cap_buckets_shared(self):
        # 2 flows into 4 buckets: the same one 1 time in 4; 3 flows into 2: all in one 2 in 8.
        self.assertEqual([round(x, 12) for x in flows.distinct_buckets(2, 4)], [0, 0.25, 0.75])
        self.assertEqual([round(x, 12) for x in flows.distinct_buckets(3, 2)], [0, 0.25, 0.75, 0])
        self.assertAlmostEqual(flows.capped_gbps(1.0, 2, 0.25, 4), 0.25 * 0.25 + 0.75 * 0.5, places=12)
        self.assertAlmostEqual(flows.capped_gbps(1.0, 8, 0.25, 0), 1.0, places=12)  # a cap per flow
        # 4 flows over 8 buckets fill a link of 4 caps only when all 4 differ: 8*7*6*5 / 8^4.
        p4 = 8 * 7 * 6 * 5 / 8 ** 4
        self.assertAlmostEqual(flows.distinct_buckets(4, 8)[4], p4, places=12)

    def test_interleaved_ring_collides(self):
        # 4 hosts round-robin over 2 leaves: every ring hop crosses, each leaf sends 2
        # flows over 2 spines at once (expected 1.75x, as halving-doubling's first step).
        self.assertEqual([fabric.leaf_of(4, 2, h, True) for h in range(4)], [0, 1, 0, 1])
        t = 6 * 4 * MIB / 125 * 1.75
        got = fabric.emulated_busbw("all_reduce", "ring", 4, 2, 2, 16 * MIB, 0.125, 0.0, 1, 0.0, 1.0, interleave=True)
        self.assertAlmostEqual(got, 16 * MIB / (t * 1e3) * 1.5, places=12)

    def test_algorithm_of_a_row(self):
        self.assertEqual(fabric.row_algo("gloo", "all_reduce"), "ring")
        v = "hier@DCCL_ALGO=allreduce:rhd,allgather:bruck@DCCL_NET_FLOWS=1"
        self.assertEqual(fabric.row_algo(v, "all_reduce"), "rhd")
        self.assertEqual(fabric.row_algo(v, "all_gather"), "bruck")
        self.assertEqual(fabric.row_algo("hier@DCCL_ALGO=allreduce:rhd", "all_gather"), "ring")

    def test_against_measured_rows(self):
        # A runs.jsonl row of compare-hosts with 2 flows set: the model's busbw beside it.
        net = {"rate": "1gbit", "mtu": None, "fabric": True, "spines": 2, "leaves": None, "flow_rate": "250mbit"}
        rows = [{"op": "all_reduce", "hosts": 4, "variant": "hier@DCCL_NET_FLOWS=2", "size": 16 * MIB,
                 "busbw_gbps": 0.05, "net": net},
                {"op": "all_reduce", "hosts": 4, "variant": "gloo", "size": 16 * MIB, "busbw_gbps": 0.03, "net": net},
                {"op": "all_reduce", "hosts": 4, "variant": "gloo", "size": 8, "busbw_gbps": 0.0, "net": net}]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "runs.jsonl")
            with open(path, "w") as f:
                f.write("".join(json.dumps(r) + "\n" for r in rows))
            text, errs = fabric.against([path], "DCCL_NET_FLOWS", 1)
        self.assertEqual(sorted(errs), ["gloo", "hier@DCCL_NET_FLOWS=2"])  # 8 B is not a bandwidth row
        a = fabric.plan.LINK[0]
        m2 = fabric.emulated_busbw("all_reduce", "ring", 4, 4, 2, 16 * MIB, 0.125, 0.03125, 2, a, 0.95)
        m1 = fabric.emulated_busbw("all_reduce", "ring", 4, 4, 2, 16 * MIB, 0.125, 0.03125, 1, a, 0.95)
        self.assertAlmostEqual(m2, 2 * 0.03125 * 0.95, delta=1e-4)
        self.assertEqual(errs, {"hier@DCCL_NET_FLOWS=2": [(m2 - 0.05) / 0.05], "gloo": [(m1 - 0.03) / 0.03]})
        self.assertIn("| hier@DCCL_NET_FLOWS=2 | 2 |", text)


if __name__ == "__main__":
    unittest.main(verbosity=2)

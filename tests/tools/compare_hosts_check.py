#!/usr/bin/env python3
"""bench/compare-hosts without running anything: the fabric's host addresses match
dccl-run's block-wise leaves, every peer's launch carries the fabric's options and
those addresses, a variant's K=V settings reach every rank, and the report's
fraction of the link bound is the hand-computed one for allreduce and allgather.

  compare_hosts_check.py REPO_ROOT
"""
import importlib.machinery
import importlib.util
import os
import sys
import unittest
from pathlib import Path

ROOT = os.path.abspath(sys.argv[1])
del sys.argv[1]
_loader = importlib.machinery.SourceFileLoader("compare_hosts", os.path.join(ROOT, "bench", "compare-hosts"))
_spec = importlib.util.spec_from_loader("compare_hosts", _loader)
ch = importlib.util.module_from_spec(_spec)
_loader.exec_module(ch)

FABRIC = {"rate": "1gbit", "mtu": None, "fabric": True, "spines": 2, "leaves": None, "flow_rate": "250mbit"}
BRIDGE = {"rate": "1gbit", "mtu": None, "fabric": False, "spines": 2, "leaves": None, "flow_rate": None}


def argv(net, variant, op="all_reduce", hosts=4, per=1):
    return ch.perf_argv(Path("/b"), hosts, per, 1, net, variant, op, "16M", 5, Path("/t/1.json"), True)


class Addresses(unittest.TestCase):
    def test_leaves_block_wise(self):
        # 5 hosts under 2 leaves: the first leaf has one more (3 + 2); 4 under 4: one each.
        self.assertEqual([ch.leaf_of(5, 2, h) for h in range(5)], [0, 0, 0, 1, 1])
        self.assertEqual([ch.leaf_of(4, 4, h) for h in range(4)], [0, 1, 2, 3])
        self.assertEqual([ch.leaf_of(7, 3, h) for h in range(7)], [0, 0, 0, 1, 1, 2, 2])

    def test_addresses(self):
        self.assertEqual([ch.host_address(FABRIC, 4, h) for h in range(4)],
                         ["198.18.0.1", "198.18.1.2", "198.18.2.3", "198.18.3.4"])
        two = dict(FABRIC, leaves=2)
        self.assertEqual([ch.host_address(two, 4, h) for h in range(4)],
                         ["198.18.0.1", "198.18.0.2", "198.18.1.3", "198.18.1.4"])
        self.assertEqual(ch.host_address(BRIDGE, 4, 3), "198.18.0.4")

    def test_interleaved(self):
        # --interleave: host h under leaf h % leaves, and dccl-run is told so.
        self.assertEqual([ch.leaf_of(5, 2, h, True) for h in range(5)], [0, 1, 0, 1, 0])
        mixed = dict(FABRIC, leaves=2, interleave=True)
        self.assertEqual([ch.host_address(mixed, 4, h) for h in range(4)],
                         ["198.18.0.1", "198.18.1.2", "198.18.0.3", "198.18.1.4"])
        self.assertIn("--interleave", argv(mixed, "hier"))
        self.assertNotIn("--interleave", argv(dict(FABRIC, leaves=2), "hier"))


class Launches(unittest.TestCase):
    def test_fabric_options_reach_every_peer(self):
        for v in ("hier", "gloo", "ompi", "impi", "oneccl"):
            a = argv(FABRIC, v)
            i = a.index("--fabric")
            self.assertEqual(a[i + 1:i + 5], ["--spines", "2", "--flow-rate", "250mbit"], v)
            self.assertNotIn("--rails", a, v)
            self.assertEqual(a[a.index("--rate") + 1], "1gbit", v)

    def test_mpi_hosts_are_the_fabric_addresses(self):
        a = argv(FABRIC, "ompi")
        self.assertEqual(a[a.index("--host") + 1], "198.18.0.1:1,198.18.1.2:1,198.18.2.3:1,198.18.3.4:1")
        self.assertIn("tcp,self", a)
        a = argv(FABRIC, "oneccl")
        self.assertEqual(a[a.index("-hosts") + 1], "198.18.0.1,198.18.1.2,198.18.2.3,198.18.3.4")

    def test_variant_settings(self):
        a = argv(FABRIC, "hier@DCCL_A=4@DCCL_B=x")
        self.assertEqual([a[i + 1] for i, x in enumerate(a) if x == "--env"][1:], ["DCCL_A=4", "DCCL_B=x"])
        self.assertIn("all_reduce", a)
        self.assertIn("all_gather", argv(FABRIC, "hier", "all_gather"))
        with self.assertRaises(SystemExit):
            ch.split_variant("hier@nokey")
        self.assertEqual(ch.split_variants("hier,hier@DCCL_ALGO=allreduce:rhd,allgather:bruck@X=1,gloo"),
                         ["hier", "hier@DCCL_ALGO=allreduce:rhd,allgather:bruck@X=1", "gloo"])
        self.assertEqual(ch.split_variant("hier@DCCL_ALGO=allreduce:rhd,allgather:bruck")[1],
                         ["DCCL_ALGO=allreduce:rhd,allgather:bruck"])

    def test_variant_build(self):
        # hier@build=DIR runs DIR's dccl-run and dccl-perf; build= is no setting.
        a = argv(FABRIC, "hier@build=build-main@DCCL_A=4")
        main = str((ch.ROOT / "build-main").resolve())
        self.assertEqual(a[0], main + "/tools/dccl-run")
        self.assertIn(main + "/tools/dccl-perf", a)
        self.assertNotIn("build=build-main", a)
        self.assertEqual([a[i + 1] for i, x in enumerate(a) if x == "--env"][1:], ["DCCL_A=4"])
        self.assertEqual(argv(FABRIC, "hier")[0], "/b/tools/dccl-run")

    def test_bridge_unchanged(self):
        a = argv(BRIDGE, "hier")
        self.assertEqual(a[a.index("--rails") + 1], "1")
        self.assertNotIn("--fabric", a)


class Report(unittest.TestCase):
    def test_fraction_of_link_bound(self):
        # 4 hosts x 1 rank, 1 Gbit/s = 0.125 GB/s. allreduce moves 2*3/4 S per host:
        # bound algbw 0.125/1.5 = 0.08333, so 0.05 GB/s is 0.60. allgather moves 3/4 S:
        # bound 0.125/0.75 = 0.16667, so 0.05 GB/s is 0.30.
        res = {("all_reduce", 4, 1, 1, "hier", 16 << 20): [{"algbw_gbps": 0.05, "time_us": 1.0}],
               ("all_gather", 4, 1, 1, "hier", 16 << 20): [{"algbw_gbps": 0.05, "time_us": 1.0}],
               ("all_reduce", 4, 1, 1, "gloo", 16 << 20): [{"algbw_gbps": 0.02, "time_us": 1.0}]}
        text = "\n".join(ch.report(res, ["all_reduce", "all_gather"], [4], [1], [1], ["hier", "gloo"], ["16M"],
                                   1e9, 1, "t", None, None))
        self.assertIn("| 4 x 1 | 1 | 16M | 0.050 (0.60) | 0.020 (0.24) |", text)
        self.assertIn("| 4 x 1 | 1 | 16M | 0.050 (0.30) | - |", text)
        self.assertIn("| 4 x 1 | 1 | 16M | 2.50 |", text)  # hier over gloo, allreduce

    def test_smallest_size_has_an_element_per_rank(self):
        self.assertEqual(ch.smallest("all_reduce", ["8", "32", "16M"], 4), "8")
        self.assertEqual(ch.smallest("all_gather", ["8", "32", "16M"], 4), "32")  # 2 B per rank is no float
        self.assertEqual(ch.smallest("all_gather", ["8", "16M"], 4), "16M")
        self.assertIsNone(ch.smallest("all_gather", ["8"], 4))


if __name__ == "__main__":
    unittest.main()

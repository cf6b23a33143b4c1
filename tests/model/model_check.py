#!/usr/bin/env python3
"""Checks of the cluster cost model (bench/model): the calibration against NCCL's measured
allreduce on 2 A3 Mega nodes holds on the held-back rows, the bound can fail, and the model
keeps its own bookkeeping (every parameter sourced and used).

  model_check.py REPO_ROOT
"""
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(ROOT, "bench", "model")
sys.path.insert(0, MODEL)
import calibrate  # noqa: E402
import dccl  # noqa: E402
import nccl  # noqa: E402
import params  # noqa: E402

BOUND = 0.25
GIB = 1 << 30


def measured():
    """The table read here with no help from calibrate.py: size -> time_us."""
    out = {}
    with open(os.path.join(MODEL, "data", "nccl-a3mega-2x8-allreduce.csv")) as f:
        next(f)
        for line in f:
            size, t = line.split(",")[:2]
            out[int(size)] = float(t)
    return out


_FIT = []


def the_fit():
    """calibrate's fit on the even rows, computed once for the tests that only use it."""
    if not _FIT:
        _FIT.append(calibrate.fit(calibrate.split(calibrate.load())[0]))
    return dict(_FIT[0])


def worst_held(over):
    rows = sorted(measured().items())
    return max(abs(nccl.allreduce(s, 2, over)[0] - t) / t for s, t in rows[1::2])


class Calibration(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fit, cls.table = calibrate.calibrate()

    def test_table_is_the_measurement(self):
        m = measured()
        self.assertEqual(len(m), 31)
        self.assertEqual(min(m), 8)
        self.assertEqual(max(m), 8 * GIB)
        self.assertEqual([r[0] for r in self.table], sorted(m))
        self.assertEqual({r[1] for r in self.table}, set(m.values()))

    def test_fitted_only_on_every_other_row(self):
        kinds = [r[4] for r in self.table]
        self.assertEqual(kinds[0::2], ["fitted"] * 16)
        self.assertEqual(kinds[1::2], ["held back"] * 15)
        # Refitting on the fitted rows alone gives the same parameters: the held-back
        # rows took no part.
        fitted = [(s, t) for s, t, _, _, k in self.table if k == "fitted"]
        self.assertEqual(calibrate.fit(fitted), self.fit)

    def test_held_back_rows_within_bound(self):
        m = measured()
        for s, t, model, e, kind in self.table:
            # The error recomputed from the raw table, in float64.
            self.assertAlmostEqual(e, (model - m[s]) / m[s], places=12)
            if kind == "held back":
                self.assertLessEqual(abs(e), BOUND, f"{s} B: model {model:.1f} us, measured {t} us")
        self.assertLessEqual(worst_held(self.fit), BOUND)

    def test_bound_bites_on_a_wrong_published_figure(self):
        # Half the NICs the cloud publishes: no fit of the open parameters can carry
        # 8 GiB in 47.5 ms through 4 x 200 Gbit/s.
        fit = calibrate.fit(calibrate.split(calibrate.load())[0], fixed={"nics_per_node": 4})
        self.assertGreater(worst_held(fit), BOUND)

    def test_bound_bites_on_a_perturbed_fit(self):
        for name, factor in (("net_lat_us", 4.0), ("net_eff", 0.6), ("launch_us", 4.0)):
            with self.subTest(name=name):
                self.assertGreater(worst_held(dict(self.fit, **{name: self.fit[name] * factor})), BOUND)

    def test_large_sizes_run_at_the_nics_rate(self):
        # Two nodes, tree: each node sends every byte once each way, so the time per byte at
        # large sizes is one over what the node's NICs deliver.
        f = self.fit
        slope = (nccl.tree(8 * GIB, 2, "Simple", f) - nccl.tree(4 * GIB, 2, "Simple", f)) / (4 * GIB)
        node = 8 * 25.0 * f["net_eff"] * 1e3  # B/us
        self.assertAlmostEqual(slope * node, 1.0, delta=0.01)


class Predictions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fit = the_fit()

    def test_large_size_verdict_is_not_the_assumed_costs(self):
        # Near-free DirectCCL messages: at 1,024 nodes the ring across nodes still leaves it
        # far behind NCCL at 1 GiB, and halving-doubling there removes most of that.
        cheap = dict(self.fit, dccl_step_us=1.0, dccl_nvl_lat_us=2.0)
        t_nccl = nccl.allreduce(GIB, 1024, self.fit)[0]
        self.assertGreater(dccl.allreduce(GIB, 1024, "direct", cheap) / t_nccl, 100)
        self.assertLess(dccl.allreduce(GIB, 1024, "direct", cheap, large="rhd") / t_nccl, 10)

    def test_staged_never_beats_direct(self):
        for n in (2, 16, 1024):
            for s in (8, 64 << 10, 1 << 20, 256 << 20):
                self.assertGreater(dccl.allreduce(s, n, "staged", self.fit), dccl.allreduce(s, n, "direct", self.fit))

    def test_nccl_choice_follows_the_cloud_tuner(self):
        self.assertEqual(nccl.choice(8 * GIB, 2, self.fit), ("tree", "Simple"))
        self.assertEqual(nccl.choice(1 << 20, 4, self.fit), ("tree", "Simple"))
        for n in (8, 64, 1024):  # NCCL's own pick: the cheaper of ring and tree
            a, p = nccl.choice(256 << 20, n, self.fit)
            other = "ring" if a == "tree" else "tree"
            self.assertLessEqual(nccl.ALGOS[a](256 << 20, n, p, self.fit),
                                 nccl.ALGOS[other](256 << 20, n, p, self.fit))

    def test_protocols_when_all_are_allowed(self):
        # With LL and LL128 allowed (not on TCPXO), the latency protocols take small calls
        # and Simple the largest, each the cheapest of the three.
        f = dict(self.fit, nccl_protos="LL,LL128,Simple")
        self.assertEqual(nccl.choice(8, 2, f), ("tree", "LL"))
        self.assertEqual(nccl.choice(8 * GIB, 2, f), ("tree", "Simple"))
        for s in (8, 1 << 20, GIB):
            a, p = nccl.choice(s, 2, f)
            self.assertEqual(nccl.tree(s, 2, p, f), min(nccl.tree(s, 2, q, f) for q in nccl.PROTOS))

    def test_ring_latency_counts_every_hop(self):
        # 8 B on a ring: 2 (P - 1) hops, 2 N across nodes (NCCL's count); independent sum.
        f = dict(self.fit)
        for n in (2, 16):
            p = 8 * n
            hops = (2 * (p - 1) - 2 * n) * 3.4 + 2 * n * (14.0 + f["net_lat_us"])
            want = f["launch_us"] + 8.4 + hops
            self.assertAlmostEqual(nccl.ring(8, n, "Simple", f), want, delta=0.01)


class Bookkeeping(unittest.TestCase):
    def test_every_parameter_sourced_and_used(self):
        # Every parameter --params prints is read by the model: sweep every algorithm,
        # protocol and data path with a recording lookup.
        read = set()

        def recording(name, over=None):
            read.add(name)
            return params.value(name, over)
        fit = the_fit()
        saved = nccl.value, dccl.value
        nccl.value = dccl.value = recording
        try:
            for n in (2, 4, 16):
                for s in (8, 1 << 20, GIB):
                    for algo in nccl.ALGOS.values():
                        for proto in nccl.PROTOS:
                            algo(s, n, proto, fit)
                    nccl.allreduce(s, n, fit)
                    for path in dccl.PATHS:
                        dccl.allreduce(s, n, path, fit)
        finally:
            nccl.value, dccl.value = saved
        for name, p in params.P.items():
            with self.subTest(name=name):
                self.assertIn(p.origin, ("published", "measured", "fitted", "assumed"))
                self.assertTrue(p.source.strip())
                self.assertIn(name, read, f"{name} is printed by --params but the model never reads it")

    def test_run_prints_params_and_tables(self):
        run = os.path.join(MODEL, "run")
        out = subprocess.run([sys.executable, run, "--params"], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        for name in params.P:
            self.assertIn(f"| {name} |", out.stdout)
        out = subprocess.run([sys.executable, run], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("within 25%", out.stdout)
        # The prediction table: every size at 1,024 nodes, NCCL's algorithm named.
        self.assertEqual(len(re.findall(r"^\| 1024 \| \S+ \| [\d,]+ \((tree|ring)/Simple\)", out.stdout, re.M)), 8)
        self.assertIn("What would close the gap", out.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)

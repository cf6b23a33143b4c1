#!/usr/bin/env python3
"""dccl-info --plan --json: the output parses, and the thresholds it prints are the
ones the tuner uses: every choice a tuner made from the plan takes (printed beside
it) is what the printed windows, segment and chunks predict, walked here with no
help from the library. bench/model/data/plan.json, which the cost model reads, is
the tool's current output for its shape, and the model's recursive-doubling bound
is the plan's.

  plan_check.py REPO_ROOT BUILD_DIR
"""
import json
import os
import subprocess
import sys
import unittest

ROOT, BUILD = (os.path.abspath(a) for a in sys.argv[1:3])
del sys.argv[1:3]
INFO = os.path.join(BUILD, "tools", "dccl-info")
MODEL_PLAN = os.path.join(ROOT, "bench", "model", "data", "plan.json")
MODEL_ARGS = ["--ranks", "4", "--hosts", "1", "--provider", "tcp"]  # the shape bench/model reads
sys.path.insert(0, os.path.join(ROOT, "bench", "model"))
import costmodel  # noqa: E402


def run_info(args, env=None):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DCCL_") and k != "FI_PROVIDER"}
    clean.update(env or {})
    return subprocess.run([INFO, "--plan"] + args, env=clean, capture_output=True, text=True, timeout=60)


def plan_of(args, env=None):
    r = run_info(["--json"] + args, env)
    if r.returncode != 0:
        raise AssertionError(f"dccl-info --plan --json {args}: exit {r.returncode}: {r.stderr}")
    return json.loads(r.stdout), r.stdout


def predict(plan, coll, nbytes):
    """The first usable window holding the size, as the printed plan describes it."""
    n = plan["nranks"]
    seg = plan["segment"]
    for w in plan["windows"]:
        if w["coll"] != coll:
            continue
        needs = set(w["needs"])
        if "oneshot" in needs and not (seg["used"] and seg["oneshot_bytes"] and nbytes <= seg["oneshot_bytes"]):
            continue
        if "chunks" in needs and not (seg["used"] and seg["chunk_bytes"]):
            continue
        if "levels" in needs and not plan["hier"]["used"]:
            continue
        if "ranks_by_host" in needs and not plan["ranks_by_host"]:
            continue
        size = nbytes * n if w["total"] else nbytes
        if w["min_bytes"] <= size and (w["max_bytes"] is None or size <= w["max_bytes"]):
            return w["algo"]
    raise AssertionError(f"no window for {coll} at {nbytes} B")


SHAPES = [
    (["--ranks", "2"], {}),
    (["--ranks", "4", "--provider", "tcp"], {}),
    (["--ranks", "8", "--provider", "tcp"], {}),  # the one-shot capped above 4 ranks
    (["--ranks", "8", "--hosts", "2", "--provider", "tcp;ofi_rxm"], {}),
    (["--ranks", "4", "--hosts", "4", "--provider", "efa"], {}),
    (["--ranks", "4"], {"DCCL_SEGMENT_BYTES": "8K", "DCCL_SEGMENT_CHUNK_BYTES": "0", "DCCL_CHUNK_BYTES": "128K"}),
    (["--ranks", "4", "--cores", "2"], {}),
]


class PlanJson(unittest.TestCase):
    def test_choices_follow_the_printed_plan(self):
        for args, env in SHAPES:
            with self.subTest(args=args, env=env):
                plan, _ = plan_of(args, env)
                self.assertGreater(len(plan["choices"]), 20)
                algos = set()
                for c in plan["choices"]:
                    self.assertEqual(c["algo"], predict(plan, c["coll"], c["bytes"]), c)
                    self.assertEqual(c["chunk_bytes"], plan["chunks"]["host"], c)
                    algos.add((c["coll"], c["algo"]))
                rd = [w for w in plan["windows"] if w["algo"] == "rd"][0]
                self.assertEqual(rd["max_bytes"], plan["rd"]["max_bytes"])
                self.assertGreaterEqual(len(algos), 7)  # the edges asked reach several windows

    def test_settings_and_shape_reach_the_plan(self):
        base, _ = plan_of(["--ranks", "4"])
        self.assertEqual(base["segment"], {"used": True, "oneshot_bytes": 64 << 10, "chunk_bytes": 256 << 10})
        self.assertEqual(base["chunks"]["host"], 512 << 10)  # shm's one-host chunk
        two, _ = plan_of(["--ranks", "2"])
        self.assertEqual(two["segment"]["chunk_bytes"], 512 << 10)  # unset: 512 KiB for 2 ranks
        set2, _ = plan_of(["--ranks", "2"], {"DCCL_SEGMENT_CHUNK_BYTES": "256K"})
        self.assertEqual(set2["segment"]["chunk_bytes"], 256 << 10)
        eight, _ = plan_of(["--ranks", "8"])
        self.assertEqual(eight["segment"]["oneshot_bytes"], 16 << 10)
        many, _ = plan_of(["--ranks", "1024"], {"DCCL_SEGMENT_CHUNK_BYTES": "1M"})
        self.assertEqual(many["segment"]["chunk_bytes"], (32 << 20) // 1024)
        over, _ = plan_of(["--ranks", "4", "--cores", "2"])
        self.assertEqual(over["spin"]["spin_us"], 0)
        kept, _ = plan_of(["--ranks", "4", "--cores", "2"], {"DCCL_SPIN_US": "7"})
        self.assertEqual(kept["spin"]["spin_us"], 7)
        across, _ = plan_of(["--ranks", "8", "--hosts", "2"])
        self.assertFalse(across["segment"]["used"])
        self.assertTrue(across["hier"]["used"])
        self.assertEqual(across["chunks"]["host"], 256 << 10)
        self.assertEqual(across["provider"], "tcp;ofi_rxm")
        forced, _ = plan_of(["--ranks", "8", "--hosts", "2"], {"DCCL_CHUNK_BYTES": "1M", "DCCL_HIER": "0"})
        self.assertEqual(forced["chunks"]["host"], 1 << 20)
        self.assertFalse(forced["hier"]["used"])

    def test_model_reads_the_current_plan(self):
        _, text = plan_of(MODEL_ARGS)
        with open(MODEL_PLAN) as f:
            self.assertEqual(f.read(), text, "bench/model/data/plan.json is stale: regenerate it with "
                             f"dccl-info --plan --json {' '.join(MODEL_ARGS)}")
        plan = json.loads(text)
        link = plan["link"]
        self.assertEqual(costmodel.rd_max_bytes(plan["nranks"], link["alpha_us"], link["gbps"], link["reduce_gbps"],
                                                plan["rd"]["min_bound"], plan["rd"]["max_bound"]),
                         plan["rd"]["max_bytes"])

    def test_bad_options_refused(self):
        for args in (["--ranks", "0"], ["--ranks", "3", "--hosts", "2"], ["--warp"], ["--ranks"]):
            r = run_info(args)
            self.assertEqual(r.returncode, 2, (args, r.stdout, r.stderr))
            self.assertIn("dccl-info --plan", r.stderr)
        r = run_info([], {"DCCL_SEGMENT_BYTES": "lots"})
        self.assertEqual(r.returncode, 1)
        self.assertIn("DCCL_SEGMENT_BYTES", r.stderr)


if __name__ == "__main__":
    unittest.main()

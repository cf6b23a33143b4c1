#!/usr/bin/env python3
"""PyTorch's distributed test suite over several backends, side by side.

    PYTHONPATH=build/python run.py [--backends dccl gloo] [--world-sizes 2 3]
                                   [-k REGEX] [--jobs N] [--out DIR] [--check]

Runs driver.py (torch.testing._internal.distributed.distributed_test) once per
backend and world size, each in a temporary directory of its own, then prints
pass / fail / skip counts per backend next to each other, every failure and skip
with its reason, and the tests that pass on the last backend listed (the
reference, gloo) but not on another. --check: exit 1 when a test that passes on
the reference fails on another backend (a skip is listed, not counted as either).
--out keeps each run's log and per-test records (JSON).
"""
import argparse
import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run_one(backend, world, args, out):
    """Runs the driver for one backend and world size; returns its per-test records."""
    tag = f"{backend}.n{world}"
    log_path = os.path.join(out, f"{tag}.log")
    json_path = os.path.join(out, f"{tag}.json")
    with tempfile.TemporaryDirectory(prefix=f"torchsuite-{tag}-") as temp:
        env = dict(os.environ, BACKEND=backend, WORLD_SIZE=str(world), TEMP_DIR=temp,
                   INIT_METHOD=f"file://{temp}/init_method_file", START_METHOD=args.start_method, OMP_NUM_THREADS="1",
                   DISTRIBUTED_TESTS_DEFAULT_TIMEOUT=str(args.timeout))
        cmd = [sys.executable, os.path.join(HERE, "driver.py"), "--json", json_path, "-k", args.filter]
        t0 = time.monotonic()
        with open(log_path, "w") as log:
            rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=temp).returncode
        seconds = time.monotonic() - t0
    records = []
    if os.path.exists(json_path):
        with open(json_path) as f:
            records = json.load(f)
    if rc not in (0, 1) or not records:
        records.append({"test": "(driver)", "outcome": "fail", "seconds": 0,
                        "reason": f"driver exited {rc} after {len(records)} tests; see {log_path}"})
    print(f"{tag}: {len(records)} tests in {seconds:.0f} s", flush=True)
    return records


def short(reason):
    """The line that says why: the last exception line of a traceback, else the first line."""
    lines = [ln.strip() for ln in reason.splitlines() if ln.strip()]
    exc = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Exit|Timeout)\b", ln) or "timed out" in ln]
    text = (exc[-1] if exc else lines[0] if lines else "")
    return text if len(text) <= 200 else text[:197] + "..."


def report(results, backends, worlds):
    ref = backends[-1]
    lines = []
    header = "| world size | " + " | ".join(f"{b} pass | {b} fail | {b} skip" for b in backends) + " |"
    lines += [header, "|" + "---|" * (1 + 3 * len(backends))]
    for w in worlds:
        row = [str(w)]
        for b in backends:
            c = collections.Counter(r["outcome"] for r in results[(b, w)])
            row += [str(c["pass"]), str(c["fail"]), str(c["skip"])]
        lines.append("| " + " | ".join(row) + " |")
    # A run that broke (the driver died, or nothing passed) fails the check whatever the backend.
    regressions = [(b, w, "(the whole run)") for (b, w), rs in results.items()
                   if not any(r["outcome"] == "pass" for r in rs) or any(r["test"] == "(driver)" for r in rs)]
    for w in worlds:
        by = {b: {r["test"]: r for r in results[(b, w)]} for b in backends}
        for b in backends:
            fails = [r for r in results[(b, w)] if r["outcome"] == "fail"]
            lines.append(f"\n{b}, world size {w}: {len(fails)} failed")
            lines += [f"  FAIL {r['test']}: {short(r['reason'])}" for r in fails]
            skips = collections.defaultdict(list)
            for r in results[(b, w)]:
                if r["outcome"] == "skip":
                    skips[short(r["reason"])].append(r["test"])
            lines.append(f"{b}, world size {w}: {sum(map(len, skips.values()))} skipped")
            for reason, tests in sorted(skips.items(), key=lambda kv: -len(kv[1])):
                lines.append(f"  SKIP ({len(tests)}) {reason}: {' '.join(sorted(tests))}")
        for b in backends[:-1]:
            for name, r in by[ref].items():
                if r["outcome"] != "pass":
                    continue
                mine = by[b].get(name, {"outcome": "not run"})
                if mine["outcome"] != "pass":
                    kind = "fails" if mine["outcome"] in ("fail", "not run") else "skips"
                    if kind == "fails":
                        regressions.append((b, w, name))
                    lines.append(f"  passes on {ref} but {kind} on {b} (world size {w}): {name}")
    return "\n".join(lines), regressions


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", nargs="+", default=["dccl", "gloo"], help="the last one is the reference")
    ap.add_argument("--world-sizes", type=int, nargs="+", default=[2, 3])
    ap.add_argument("-k", "--filter", default=".", help="test-name regex (re.search)")
    ap.add_argument("--jobs", type=int, default=1, help="runs at a time")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per test before its ranks are killed")
    ap.add_argument("--start-method", default="fork", choices=["fork", "spawn"],
                    help="how ranks start (spawn: as torch's own CI; about 10 s more per test)")
    ap.add_argument("--out", help="keep logs and per-test JSON here (default: a temporary directory)")
    ap.add_argument("--check", action="store_true", help="exit 1 when a test passing on the reference fails")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="torchsuite-")
    os.makedirs(out, exist_ok=True)
    print(f"PyTorch distributed suite: backends {' '.join(args.backends)}, world sizes "
          f"{' '.join(map(str, args.world_sizes))}, filter {args.filter!r}; logs in {out}", flush=True)
    configs = [(b, w) for w in args.world_sizes for b in args.backends]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {c: pool.submit(run_one, c[0], c[1], args, out) for c in configs}
        results = {c: f.result() for c, f in futures.items()}
    text, regressions = report(results, args.backends, args.world_sizes)
    print(text)
    if args.check and regressions:
        print(f"\n{len(regressions)} tests pass on {args.backends[-1]} and fail on another backend", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

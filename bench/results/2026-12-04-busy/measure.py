#!/usr/bin/env python3
"""Two DirectCCL builds (and Open MPI) side by side, with K busy processes.

    measure.py --base /work/main/build --new build [--ompi PATH/ompi-perf] [--reps 3] [--busy 0,2]

For each repeat, each K (`yes > /dev/null` processes, unbound, started before and
ended after the K's runs), each of 2 and 4 ranks over shm and tcp: every
configuration runs dccl-perf (ompi-perf) all_reduce, float32 sum, blocking
calls, in two bands (8 B - 64 KiB x8, 200 calls; 256 KiB - 64 MiB x4, 5 calls),
in an order reversed on every other repeat. Prints the medians per size, out of
place, as a markdown table, and writes every row to runs.jsonl beside itself.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BANDS = [["-b", "8", "-e", "64K", "-f", "8", "-n", "200", "-w", "20"],
         ["-b", "256K", "-e", "64M", "-f", "4", "-n", "5", "-w", "2"]]
SHAPES = [(2, "shm"), (2, "tcp"), (4, "shm"), (4, "tcp")]


def dccl_cmd(build, n, prov, band, jp):
    run, perf = str(Path(build) / "tools/dccl-run"), str(Path(build) / "tools/dccl-perf")
    extra = ["--env", "DCCL_SMEM_BYTES=0", "--env", "DCCL_SMEM_CHUNK_BYTES=0"] if prov == "tcp" else []
    return [run, "-n", str(n), "--env", f"DCCL_PROVIDER={prov}"] + extra + [perf, "all_reduce", "-z", "1", "-c", "0"] + band + ["--json", jp]


def ompi_cmd(exe, n, prov, band, jp):
    btl = "vader,self" if prov == "shm" else "tcp,self"
    return (["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", str(n), "--mca", "pml", "ob1",
             "--mca", "btl", btl, exe, "all_reduce", "-c", "0"] + band + ["--json", jp])


def run_one(cmd, timeout):
    with tempfile.TemporaryDirectory() as d:
        jp = os.path.join(d, "rows.json")
        cmd = [jp if a == "@JSON@" else a for a in cmd]
        try:
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout, check=False)
            return json.load(open(jp))
        except (subprocess.TimeoutExpired, OSError, ValueError):
            return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--ompi", default="")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--busy", default="0,2")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--report-only", action="store_true", help="print the table of runs.jsonl as it is")
    a = ap.parse_args()
    here = Path(__file__).resolve().parent
    if a.report_only:
        res, names = {}, []
        for line in open(here / "runs.jsonl"):
            rec = json.loads(line)
            if rec["cfg"] not in names:
                names.append(rec["cfg"])
            for size, us in rec["rows"] or []:
                res.setdefault((rec["busy"], rec["ranks"], rec["prov"], size), {}).setdefault(rec["cfg"], []).append(us)
        return report(res, names)
    out = open(here / "runs.jsonl", "a")
    cfgs = [("main", lambda n, p, b: dccl_cmd(a.base, n, p, b, "@JSON@")),
            ("new", lambda n, p, b: dccl_cmd(a.new, n, p, b, "@JSON@"))]
    if a.ompi:
        cfgs.append(("ompi", lambda n, p, b: ompi_cmd(a.ompi, n, p, b, "@JSON@")))
    res = {}
    for rep in range(a.reps):
        for k in [int(x) for x in a.busy.split(",")]:
            spin = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(k)]
            try:
                for n, prov in SHAPES:
                    for band in BANDS:
                        order = cfgs if rep % 2 == 0 else cfgs[::-1]
                        for name, mk in order:
                            rows = run_one(mk(n, prov, band), a.timeout)
                            rec = {"rep": rep, "busy": k, "ranks": n, "prov": prov, "cfg": name, "time": time.time(),
                                   "rows": [(r["size"], r["out_of_place"]["time_us"]) for r in rows] if rows else None}
                            out.write(json.dumps(rec) + "\n")
                            out.flush()
                            for size, us in rec["rows"] or []:
                                res.setdefault((k, n, prov, size), {}).setdefault(name, []).append(us)
                            print(f"rep {rep} K={k} n={n} {prov} {name}: {'ok' if rows else 'FAILED/timeout'}",
                                  file=sys.stderr, flush=True)
            finally:
                for p in spin:
                    p.kill()
                    p.wait()
    report(res, [c[0] for c in cfgs])


def report(res, names):
    """Medians per point, out of place (min-max over the repeats in brackets);
    new/main is the ratio of the medians."""
    def cell(v):
        if not v:
            return "-"
        f = lambda x: f"{x:.3g}"
        return f(statistics.median(v)) + (f" [{f(min(v))}-{f(max(v))}]" if len(v) > 1 else "")
    print("| busy | ranks | path | size | " + " | ".join(f"{x} us" for x in names) + " | new/main |")
    print("|---|---|---|---|" + "---|" * (len(names) + 1))
    for key in sorted(res):
        k, n, prov, size = key
        got = res[key]
        ratio = (f"{statistics.median(got['new']) / statistics.median(got['main']):.2f}"
                 if got.get("new") and got.get("main") else "-")
        print(f"| {k} | {n} | {prov} | {size} | " + " | ".join(cell(got.get(x)) for x in names) + f" | {ratio} |")

if __name__ == "__main__":
    main()

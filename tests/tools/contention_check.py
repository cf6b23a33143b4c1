#!/usr/bin/env python3
"""bench/contention on a tiny configuration (DirectCCL, shm, 2 ranks, 8 B and
64 KiB, K = 0 and 1, one repeat of 20 calls): its results.json and report.md
have every point, every value is a positive number, the results were checked
(0 wrong), and no spinner is left, neither after a normal end nor after a
SIGTERM in the middle of a run; --dccl-bind core,none launches each build both
bound and unbound. Not a timing test.

    contention_check.py SOURCE_DIR BUILD_DIR
"""
import importlib.machinery
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

src, build = Path(sys.argv[1]), Path(sys.argv[2])
tool = src / "bench" / "contention"
fails = []
TAG = "dccl-contention-spinner"


def spinners_of(pid):
    """Live spinner processes started by the bench/contention process `pid`."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                argv = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if TAG.encode() in argv and str(pid).encode() in argv:
                out.append(int(d))
    return out


def positive(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


with tempfile.TemporaryDirectory() as tmp:
    out = Path(tmp) / "out"
    base = [sys.executable, str(tool), "--no-build", "--build-dir", str(build), "--libs", "dccl", "--classes", "shm",
            "--ranks", "2", "--hosts", "1", "--reps", "1", "--iters", "20", "--out", str(out)]
    p = subprocess.Popen(base + ["--busy", "0,1", "--sizes", "8,64K"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    text, _ = p.communicate(timeout=240)
    if p.returncode != 0:
        fails.append(f"exit {p.returncode}:\n{text[-3000:]}")
    if spinners_of(p.pid):
        fails.append(f"spinners left running after the run: {spinners_of(p.pid)}")
    doc = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None
    if doc is None:
        fails.append("no results.json")
    else:
        for key in ("meta", "spinners", "results"):
            if key not in doc:
                fails.append(f"results.json has no '{key}'")
        spin = doc.get("spinners", {})
        if len(spin.get("pids", [])) != 1 or spin.get("left_running") != []:
            fails.append(f"spinners: expected 1 started, none left running: {spin}")
        for pid in spin.get("pids", []):
            if Path(f"/proc/{pid}").exists() and TAG in Path(f"/proc/{pid}/cmdline").read_text(errors="replace"):
                fails.append(f"spinner {pid} is still running")
        got = {(r["busy"], r["size"]): r for r in doc.get("results", [])}
        for k in (0, 1):
            for size in (8, 64 << 10):
                r = got.get((k, size))
                if r is None:
                    fails.append(f"no result for K={k} size {size}")
                    continue
                for f in ("time_us_median", "time_us_min", "time_us_max", "repeats"):
                    if not positive(r.get(f)):
                        fails.append(f"K={k} size {size}: {f} = {r.get(f)!r} is not a positive number")
                if r.get("wrong") != 0 or r.get("hosts") != 1 or r.get("ranks") != 2 or r.get("class") != "shm":
                    fails.append(f"K={k} size {size}: unexpected {r}")
        if len(got) != 4:
            fails.append(f"expected 4 points, got {sorted(got)}")
        md = (out / "report.md").read_text() if (out / "report.md").exists() else ""
        for want in ("## shm, 2 ranks, one host", "| size | DirectCCL K=0 | DirectCCL K=1 |", "| 64 KiB |"):
            if want not in md:
                fails.append(f"report.md lacks '{want}'")

    # SIGTERM while the spinners run: the tool ends its launch and its spinners.
    p = subprocess.Popen(base + ["--busy", "2", "--sizes", "64K", "--iters", "100000", "--out", str(out) + "-term"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    while len(spinners_of(p.pid)) < 2 and time.time() - t0 < 60 and p.poll() is None:
        time.sleep(0.1)
    if len(spinners_of(p.pid)) < 2:
        fails.append("the SIGTERM case never had its 2 spinners running")
    time.sleep(1)
    p.send_signal(signal.SIGTERM)
    try:
        p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        fails.append("bench/contention did not end within 30 s of SIGTERM")
    if p.returncode == 0:
        fails.append("bench/contention exited 0 after SIGTERM")
    time.sleep(0.5)
    if spinners_of(p.pid):
        fails.append(f"spinners left running after SIGTERM: {spinners_of(p.pid)}")
    for d in os.listdir("/proc"):  # nor the ranks of the launch it was in
        try:
            argv = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0") if d.isdigit() else []
        except OSError:
            continue
        if argv and argv[0].endswith(b"dccl-perf") and b"100000" in argv:
            fails.append(f"rank {d} of the interrupted launch is still running: {b' '.join(argv)!r}")

# --dccl-bind core,none: each build twice, the second launched unbound (dccl-run
# --bind-to none right after dccl-run, as the Gloo ranks are), nothing else changed.
loader = importlib.machinery.SourceFileLoader("contention", str(tool))
cont = importlib.util.module_from_spec(importlib.util.spec_from_loader("contention", loader))
loader.exec_module(cont)
cfgs = {c.key: c for c in cont.dccl_configs([("main", build, [])], [], ["core", "none"])}
if sorted(cfgs) != ["dccl.main-shm", "dccl.main-tcp", "dccl.main_unbound-shm", "dccl.main_unbound-tcp"]:
    fails.append(f"--dccl-bind core,none: configs {sorted(cfgs)}")
else:
    for klass in ("shm", "tcp"):
        bound = cfgs[f"dccl.main-{klass}"].build(2, "all_reduce", {"b": "8", "e": "8", "f": 2, "n": 5, "w": 1}, "x")
        free = cfgs[f"dccl.main_unbound-{klass}"].build(2, "all_reduce", {"b": "8", "e": "8", "f": 2, "n": 5, "w": 1}, "x")
        if "--bind-to" in bound or free != [bound[0], "--bind-to", "none"] + bound[1:]:
            fails.append(f"{klass}: bound launch {bound}, unbound launch {free}")
        if cfgs[f"dccl.main_unbound-{klass}"].library != "DirectCCL unbound":
            fails.append(f"{klass}: unbound library named {cfgs[f'dccl.main_unbound-{klass}'].library!r}")

# --dccl-also TAG=BUILDDIR@K=V@K=V: that build alone runs with those settings.
tag, bdir, env = cont.parse_tagged(f"spin={build}@DCCL_SPIN_US=0@DCCL_ALGO=ring")
if (tag, bdir, env) != ("spin", Path(build).resolve(), ["DCCL_SPIN_US=0", "DCCL_ALGO=ring"]):
    fails.append(f"parse_tagged: {(tag, bdir, env)}")
two = {c.key: c for c in cont.dccl_configs([("main", build, []), (tag, bdir, env)], [], ["core"])}
for klass in ("shm", "tcp"):
    plain = two[f"dccl.main-{klass}"].build(2, "all_reduce", {"b": "8", "e": "8", "f": 2, "n": 5, "w": 1}, "x")
    tuned = two[f"dccl.spin-{klass}"].build(2, "all_reduce", {"b": "8", "e": "8", "f": 2, "n": 5, "w": 1}, "x")
    if "DCCL_SPIN_US=0" in plain or "DCCL_SPIN_US=0" not in tuned or "DCCL_ALGO=ring" not in tuned:
        fails.append(f"{klass}: per-build settings: plain {plain}, tuned {tuned}")
for bad in ("spin", f"spin={build}@NOVALUE"):
    try:
        cont.parse_tagged(bad)
        fails.append(f"parse_tagged accepted {bad!r}")
    except SystemExit:
        pass

for f in fails:
    print("FAIL:", f)
print("contention_check:", "FAILED" if fails else "ok")
sys.exit(1 if fails else 0)

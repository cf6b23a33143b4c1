"""dccl-perf --trace on 2 ranks of one host: the timeline has one row per rank and
one slice per allreduce on each (as many as the run made, within DCCL_RECORDER),
and dccl-trace writes its PNG chart from the same dumps. An earlier run's dumps in
FILE.dumps/ (here a larger communicator's, which dccl-trace would pick) are removed
first; the folder's other files are kept.
usage: perf_trace_check.py BUILD_DIR SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

build, src = sys.argv[1:3]
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "t.json")
    os.mkdir(out + ".dumps")
    for r in range(4):  # an earlier run's dumps, of 4 ranks
        with open(os.path.join(out + ".dumps", "dccl-rec.stale.r%d.jsonl" % r), "w") as f:
            f.write(json.dumps({"header": True, "comm": "stale", "rank": r, "nranks": 4, "host": "h0",
                                "reason": "on demand", "hosts": ["h0"]}) + "\n")
    keep = os.path.join(out + ".dumps", "notes.txt")
    open(keep, "w").write("not a dump\n")
    # 2 sizes x (1 warm-up + 3 timed) x (out of place + in place) = 16 allreduces per rank.
    subprocess.run([os.path.join(build, "tools", "dccl-run"), "-n", "2", os.path.join(build, "tools", "dccl-perf"),
                    "all_reduce", "-b", "8", "-e", "64K", "-f", "8192", "-n", "3", "-w", "1", "--trace", out],
                   check=True, timeout=120)
    ev = json.load(open(out))["traceEvents"]
    left = sorted(os.listdir(out + ".dumps"))
    assert "notes.txt" in left and not any(".stale." in n for n in left), left
    names = [e["args"]["name"] for e in ev if e.get("ph") == "M" and e["name"] == "process_name"]
    assert names and not any("stale" in n for n in names), names
    rows = {e["tid"] for e in ev if e.get("ph") == "M" and e["name"] == "thread_name"}
    assert rows == {0, 1}, rows
    for r in (0, 1):
        slices = [e for e in ev if e.get("ph") == "X" and e["tid"] == r and e["name"].startswith("all_reduce #")]
        assert len(slices) >= 16, (r, len(slices))
        assert all(e["dur"] > 0 and e["args"]["result"] == 0 for e in slices), r
    png = os.path.join(tmp, "t.png")
    subprocess.run([os.path.join(src, "tools", "dccl-trace", "dccl-trace"), "--png", png, out + ".dumps"], check=True,
                   timeout=60, stdout=subprocess.DEVNULL)
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
print("dccl-perf --trace: an earlier run's dumps removed, 2 rows, every allreduce a slice; dccl-trace --png wrote a PNG")

"""dccl-trace on dumps that are incomplete by nature, from synthetic dumps of 3 ranks:
- dumps taken on demand (SIGUSR2, dcclCommDumpRecorder) by some ranks only: the
  others are listed as "no dump" but never named the culprit;
- a torn dump (its last line cut short): a warning naming the file and the rank, its
  complete records still read, and its rank never named "not entered" for the calls
  cut off;
- the timeline's transfer slices read "recv 4096 B from rank 1"; the PNG of calls
  without transfers says "no transfers" (gnuplot replaced by a script that keeps
  what it is given).
usage: trace_dumps_check.py SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

tool = os.path.join(sys.argv[1], "tools", "dccl-trace", "dccl-trace")
T0 = 1_700_000_000 * 1_000_000_000
ok = True


def call(seq, result, steps=()):
    return {"seq": seq, "coll": "all_reduce", "count": 1024, "type": "float32", "op": "sum", "root": -1, "peer": -1,
            "algo": "rd", "path": "host", "start_ns": T0 + seq * 1000, "end_ns": T0 + seq * 1000 + 500 if result == 0
            else 0, "result": result, "steps": list(steps), "sent": 0, "recv": 0, "tag": "", "user_seq": 0}


def write(folder, ranks, reason):
    """ranks: {rank: [calls]}; reason: {rank: text}. Returns {rank: path}."""
    paths = {}
    for r, calls in ranks.items():
        hdr = {"header": 1, "comm": "c0", "rank": r, "nranks": 3, "host": "h%d" % r, "pid": 100 + r,
               "reason": reason[r], "time_ns": T0 + 10**9, "hosts": ["h0", "h1", "h2"]}
        paths[r] = os.path.join(folder, "dccl-rec.c0.r%d.jsonl" % r)
        with open(paths[r], "w") as f:
            f.write(json.dumps(hdr) + "\n")
            for c in calls:
                f.write(json.dumps(c) + "\n")
    return paths


def trace(*args, env=None):
    p = subprocess.run([sys.executable, tool, *args], capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0 and "Traceback" not in p.stderr, (args, p.returncode, p.stderr)
    return p


def expect(name, good, detail):
    global ok
    ok &= bool(good)
    print("%s %s%s" % ("ok  " if good else "FAIL", name, "" if good else ": " + str(detail)))


pend = lambda peer: [peer, "recv", 4096, T0 + 10, 0]
done = lambda peer, way: [peer, way, 4096, T0 + 10, T0 + 20]

# On demand: rank 0 alone (SIGUSR2), inside call 7 waiting for rank 1.
for reason in ("on demand (SIGUSR2)", "asked for through the store (request 1)"):
    with tempfile.TemporaryDirectory() as d:
        write(d, {0: [call(6, 0), call(7, -1, [done(1, "send"), pend(1)])]}, {0: reason})
        rep = json.loads(trace("--json", d).stdout)[0]
        c = rep["culprit"]
        expect("%s, one rank: the others not blamed" % reason, c is None or c["kind"] != "no dump", c)
        expect("%s, one rank: the others listed without a dump" % reason,
               [m["rank"] for m in rep["missing"]] == [1, 2] and rep.get("on_demand"), rep["missing"])
        text = trace(d).stdout
        expect("%s: the report says why they may lack one" % reason, "no dump from rank 1 on h1 (the dumps were "
               "taken on demand" in text, text)
# A failure's dumps still blame the rank that left none.
with tempfile.TemporaryDirectory() as d:
    write(d, {0: [call(7, 1, [pend(1)])], 2: [call(7, 1, [pend(1)])]},
          {0: "timeout: rank 0: timed out waiting for rank 1", 2: "timeout: rank 0: timed out waiting for rank 1"})
    c = json.loads(trace("--json", d).stdout)[0]["culprit"]
    expect("failure dumps: the rank without one is named", c and c["rank"] == 1 and c["kind"] == "no dump", c)

# Torn: rank 1's dump cut in the middle of call 6's line; ranks 0 and 2 wait in call 20 on it.
with tempfile.TemporaryDirectory() as d:
    why = {r: "failure: rank 2 (pid 102 on h2) exited" for r in range(3)}
    ranks = {0: [call(s, 0) for s in range(20)] + [call(20, 1, [pend(1)])],
             1: [call(s, 0) for s in range(20)] + [call(20, 1, [pend(2)])]}
    paths = write(d, ranks, why)
    text = open(paths[1]).read()
    cut = text.index('{"seq": 6,') + 40
    open(paths[1], "w").write(text[:cut])
    p = trace("--json", d)
    rep = json.loads(p.stdout)[0]
    warned = [l for l in p.stderr.splitlines() if "warning" in l]
    expect("torn: one warning naming the file and rank 1", len(warned) == 1 and paths[1] in warned[0]
           and "(rank 1)" in warned[0] and "torn" in warned[0], p.stderr)
    expect("torn: listed with its last complete call", rep.get("torn") == [
        {"rank": 1, "host": "h1", "file": paths[1], "last_seq": 5}], rep.get("torn"))
    expect("torn: its rank is not 'not entered'", not rep["not_entered"] and rep["culprit"]["kind"] != "not entered",
           rep["culprit"])
    expect("torn: rank 2 (no dump, named by the failures) is the culprit",
           rep["culprit"]["rank"] == 2 and rep["culprit"]["kind"] == "no dump", rep["culprit"])

with tempfile.TemporaryDirectory() as d:
    # Transfers: the timeline's names. No transfers: the PNG says so.
    write(d, {r: [call(1, 0, [done(1 - r, "send"), done(1 - r, "recv")])] for r in (0, 1)},
          {0: "on demand (SIGUSR2)", 1: "on demand (SIGUSR2)"})
    tl = os.path.join(d, "t.json")
    trace("--timeline", tl, d)
    names = {e["name"] for e in json.load(open(tl))["traceEvents"] if e.get("cat") == "step"}
    expect("timeline: step names", names == {"send 4096 B to rank 1", "recv 4096 B from rank 1",
                                             "send 4096 B to rank 0", "recv 4096 B from rank 0"}, names)
    bare = os.path.join(d, "bin")
    os.mkdir(bare)
    kept = os.path.join(d, "kept.gp")
    with open(os.path.join(bare, "gnuplot"), "w") as f:
        f.write("#!/bin/sh\ncp \"$1\" %s\n" % kept)
    os.chmod(os.path.join(bare, "gnuplot"), 0o755)
    env = dict(os.environ, PATH=bare + os.pathsep + os.environ.get("PATH", ""))
    trace("--png", os.path.join(d, "x.png"), d, env=env)
    script = open(kept).read()
    expect("png with transfers: bandwidth drawn", "no transfers" not in script and "with boxes" in script, script)
    for f in os.listdir(d):
        if f.endswith(".jsonl"):
            os.unlink(os.path.join(d, f))
    write(d, {r: [call(1, 0)] for r in (0, 1)}, {0: "on demand (SIGUSR2)", 1: "on demand (SIGUSR2)"})
    trace("--png", os.path.join(d, "x.png"), d, env=env)
    script = open(kept).read()
    expect("png without transfers: says so", "'no transfers'" in script and "plot 0 notitle" not in script, script)
print("trace_dumps_check:", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)

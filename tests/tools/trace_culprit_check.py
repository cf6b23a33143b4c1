"""dccl-trace's culprit for a host whose link was cut, from synthetic dumps of 3 ranks
(one per host): the rank whose status records stopped reaching the store seconds
before its failure while the others' still did is named "cut off"; without status
records, a rank that received nothing in a call whose sender's data reached another
rank is named, not the sender; when nothing tells them apart the sender stays named
("data lost").
usage: trace_culprit_check.py SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

tool = os.path.join(sys.argv[1], "tools", "dccl-trace", "dccl-trace")
S = 1_000_000_000
T0 = 1_700_000_000 * S


def call(seq, result, steps):
    return {"seq": seq, "coll": "all_reduce", "count": 1024, "type": "float32", "op": "sum", "root": -1, "peer": -1,
            "algo": "rd", "path": "host", "start_ns": T0 + seq * 1000, "end_ns": T0 + seq * 1000 + 500 if result == 0
            else 0, "result": result, "steps": steps, "sent": 0, "recv": 0, "tag": "", "user_seq": seq}


def done(peer, kind):
    return [peer, kind, 4096, T0 + 10, T0 + 20]


def pending(peer, kind):
    return [peer, kind, 4096, T0 + 10, 0]


def culprit(folder, ranks, store_gap_s):
    """ranks: {rank: [calls]}; store_gap_s: {rank: seconds} (None: no status records)."""
    for r, calls in ranks.items():
        hdr = {"header": 1, "comm": "c0", "rank": r, "nranks": 3, "host": "h%d" % r, "pid": 100 + r,
               "reason": "timeout: rank %d: timed out" % r, "time_ns": T0 + 4 * S, "hosts": ["h0", "h1", "h2"]}
        if store_gap_s is not None:
            hdr["store_ns"] = hdr["time_ns"] - int(store_gap_s[r] * S)
        with open(os.path.join(folder, "dccl-rec.c0.r%d.jsonl" % r), "w") as f:
            f.write(json.dumps(hdr) + "\n")
            for c in calls:
                f.write(json.dumps(c) + "\n")
    p = subprocess.run([sys.executable, tool, "--json", folder], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    return json.loads(p.stdout)[0]["culprit"]


ok = True


def expect(name, c, rank, kind, why=None, not_why=None):
    global ok
    good = c is not None and c["rank"] == rank and c["kind"] == kind
    good = good and (why is None or why in c["why"]) and (not_why is None or not_why not in c["why"])
    ok &= good
    print("%s %s: %s" % ("ok  " if good else "FAIL", name, json.dumps(c)))


# Rank 2's link is cut in call 5: rank 1 finished it (its send to 2 left, its data from 0
# arrived; rank 0 received rank 1's), rank 2 waits for rank 1; in call 6 ranks 0 and 1
# wait on each other and on rank 2.
cut = {
    0: [call(4, 0, [done(1, "send"), done(1, "recv")]), call(5, 0, [done(1, "send"), done(1, "recv")]),
        call(6, 1, [done(1, "send"), pending(1, "recv")])],
    1: [call(4, 0, [done(0, "recv"), done(2, "send")]), call(5, 0, [done(0, "recv"), done(0, "send"), done(2, "send")]),
        call(6, 1, [pending(2, "recv")])],
    2: [call(4, 0, [done(1, "recv")]), call(5, 1, [done(1, "send"), pending(1, "recv")])],
}
with tempfile.TemporaryDirectory() as d:
    expect("status records stopped on rank 2", culprit(d, cut, {0: 0.05, 1: 0.2, 2: 3.0}), 2, "cut off",
           why="status record reached the store 3.0 s before")
with tempfile.TemporaryDirectory() as d:
    expect("no status records: rank 2 received nothing while rank 0 got rank 1's data", culprit(d, cut, None), 2,
           "cut off", why="received nothing in all_reduce #5")
with tempfile.TemporaryDirectory() as d:
    expect("every rank reached the store lately: the transfers decide", culprit(d, cut, {0: 0.05, 1: 0.2, 2: 0.1}),
           2, "cut off", not_why="status record")
# Nothing shows rank 1's data reaching anyone in call 5: the sender stays named.
alone = {r: [dict(c, steps=[s for s in c["steps"] if not (r == 0 and s[0] == 1 and s[1] == "recv")])
             for c in calls] for r, calls in cut.items()}
with tempfile.TemporaryDirectory() as d:
    expect("rank 1's data reached nobody: the sender is named", culprit(d, alone, None), 1, "data lost")
print("trace_culprit_check:", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)

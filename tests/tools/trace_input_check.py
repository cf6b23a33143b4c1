"""dccl-trace on bad input: a missing path, an unreadable (binary) file, a dump whose
header has no rank, JSON lines that are not records, records without their
fields, an empty dump and an empty folder; a
--png or --timeline that cannot be written, gnuplot missing or failing. Each
exits 1 with one line on stderr naming the path and the cause, never a Python
traceback; a valid dump beside the junk is still read.
usage: trace_input_check.py SOURCE_DIR"""
import json
import os
import subprocess
import sys
import tempfile

tool = os.path.join(sys.argv[1], "tools", "dccl-trace", "dccl-trace")


def run(*paths):
    p = subprocess.run([sys.executable, tool, *paths], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in p.stderr, (paths, p.stderr)
    return p


def refused(path, why, *more):
    p = run(path, *more)
    assert p.returncode == 1, (path, p.returncode, p.stdout, p.stderr)
    line = p.stderr.strip()
    assert line.startswith("dccl-trace: ") and path in line and why in line, (path, line)


with tempfile.TemporaryDirectory() as tmp:
    refused(os.path.join(tmp, "nonexistent"), "no such file or folder")
    binary = os.path.join(tmp, "dccl-rec.bin.r0.jsonl")
    open(binary, "wb").write(b"\xff\xfe\x00\x9c" * 64)
    refused(binary, "cannot read it")
    norank = os.path.join(tmp, "norank.jsonl")
    open(norank, "w").write(json.dumps({"header": True, "comm": "c0", "nranks": 2}) + "\n")
    refused(norank, "header has no rank")
    empty = os.path.join(tmp, "empty")
    os.mkdir(empty)
    refused(empty, "no flight-recorder dumps")
    # Lines that are JSON but not records (a list, a number, an object without seq) are skipped.
    good = os.path.join(tmp, "dccl-rec.c1.r0.jsonl")
    with open(good, "w") as f:
        f.write(json.dumps({"header": True, "comm": "c1", "rank": 0, "nranks": 1, "host": "h0",
                            "reason": "on demand", "hosts": ["h0"]}) + "\n")
        f.write("[1, 2]\n7\n{\"note\": 1}\n")
        f.write(json.dumps({"seq": 0, "coll": "all_reduce", "count": 4, "type": "float32", "op": "sum", "root": -1,
                            "peer": -1, "algo": "rd", "path": "host", "start_ns": 1000, "end_ns": 2000, "result": 0,
                            "steps": [], "sent": 0, "recv": 0}) + "\n")
    p = run("--json", good)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert len(rep) == 1 and rep[0]["comm"] == "c1", rep
    # An empty dump (cut off before its header) is named and left out; alone, it is refused.
    blank = os.path.join(tmp, "dccl-rec.c1.r1.jsonl")
    open(blank, "w").close()
    p = run("--json", good, blank)
    assert p.returncode == 0 and blank in p.stderr and "empty" in p.stderr, p.stderr
    refused(blank, "no flight-recorder dumps")
    os.unlink(blank)
    # A call record without its fields, or with malformed steps, is named and left out
    # (it once ended in a KeyError traceback); the complete record beside it is read.
    partial = os.path.join(tmp, "dccl-rec.c2.r0.jsonl")
    with open(partial, "w") as f:
        f.write(json.dumps({"header": True, "comm": "c2", "rank": 0, "nranks": 2, "host": "h0",
                            "reason": "timeout", "hosts": ["h0", "h1"]}) + "\n")
        f.write(json.dumps({"seq": 0, "coll": "all_reduce", "count": 4, "type": "float32", "root": -1,
                            "start_ns": 1000, "end_ns": 2000, "result": 0, "steps": []}) + "\n")
        f.write(json.dumps({"seq": 1, "coll": "all_reduce"}) + "\n")
        f.write(json.dumps({"seq": 2, "coll": "all_reduce", "count": 4, "type": "float32", "root": -1,
                            "start_ns": 3000, "end_ns": 0, "result": -1, "steps": [[1, "recv"]]}) + "\n")
    p = run("--json", partial)
    assert p.returncode == 0, p.stderr
    assert "line 3 is a call record without all its fields" in p.stderr and "line 4" in p.stderr, p.stderr
    rep = json.loads(p.stdout)
    assert rep[0]["comm"] == "c2" and rep[0]["calls_recorded"] == 1, rep
    os.unlink(partial)

    # Outputs that cannot be written, gnuplot missing or failing: one line, exit 1.
    def out_refused(why, *args, env=None):
        p = subprocess.run([sys.executable, tool, *args, good], capture_output=True, text=True, timeout=60, env=env)
        line = p.stderr.strip()
        assert p.returncode == 1 and "Traceback" not in p.stderr, (args, p.returncode, p.stderr)
        assert line.startswith("dccl-trace: ") and "\n" not in line and why in line, (args, line)
    out_refused("cannot write --png /nonexistent/x.png: no folder", "--png", "/nonexistent/x.png")
    out_refused("cannot write --timeline /nonexistent/t.json: no folder", "--timeline", "/nonexistent/t.json")
    out_refused("cannot write --timeline %s: it is a folder" % tmp, "--timeline", tmp)
    # An empty file name is refused, not taken for "no timeline".
    out_refused("cannot write --timeline '': no file name given", "--timeline=")
    out_refused("cannot write --png '': no file name given", "--png", "")
    bare = os.path.join(tmp, "bin")  # a PATH without gnuplot
    os.mkdir(bare)
    env = dict(os.environ, PATH=bare)
    out_refused("--png needs gnuplot, which is not on PATH", "--png", os.path.join(tmp, "x.png"), env=env)
    with open(os.path.join(bare, "gnuplot"), "w") as f:  # a gnuplot that fails
        f.write("#!/bin/sh\necho 'line 2: cannot open the output' >&2\nexit 1\n")
    os.chmod(os.path.join(bare, "gnuplot"), 0o755)
    out_refused("gnuplot could not draw %s (exit status 1): line 2: cannot open the output" % os.path.join(tmp, "x.png"),
                "--png", os.path.join(tmp, "x.png"), env=env)
# --help describes every option.
p = subprocess.run([sys.executable, tool, "--help"], capture_output=True, text=True, timeout=60,
                   env=dict(os.environ, COLUMNS="200"))  # one line per option
assert p.returncode == 0, p.stderr
for opt, words in (("--json", "as JSON"), ("--timeline FILE", "Chrome trace-format"), ("--png FILE", "gnuplot"),
                   ("--all", "every communicator")):
    assert any(opt in line and words in line for line in p.stdout.splitlines()), (opt, p.stdout)
print("dccl-trace: bad paths, files and outputs refused with their names; non-record lines skipped")

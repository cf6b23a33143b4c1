"""bench/model/run on bad input: a --runs folder or file that does not exist, a
--flow-window that is no number, a negative --cap-buckets, --default-flows 0. Each
exits 2 with a line naming the option and the cause, never a Python traceback;
valid values still run (~2 s).
usage: model_run_input_check.py SOURCE_DIR"""
import os
import subprocess
import sys
import tempfile

run = os.path.join(sys.argv[1], "bench", "model", "run")


def refused(why, *args):
    p = subprocess.run([sys.executable, run, *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, (args, p.returncode, p.stderr)
    assert why in p.stderr.strip().splitlines()[-1], (args, p.stderr)


with tempfile.TemporaryDirectory() as tmp:
    refused("--runs /nonexistent: no such folder", "--vm", "--runs", "/nonexistent")
    refused("--runs %s: no runs.jsonl or ceiling.json in it" % tmp, "--vm", "--runs", tmp)
    refused("--runs /nonexistent.jsonl: no such file", "--fabric", "--runs", "/nonexistent.jsonl")
    refused("--runs %s: a folder" % tmp, "--fabric", "--runs", tmp)
    refused("--flow-window 'bogus': bytes", "--fabric", "--flow-window", "bogus")
    refused("--flow-window '-1': bytes", "--fabric", "--flow-window", "-1")
    refused("--cap-buckets -3: a count of buckets", "--fabric", "--cap-buckets", "-3")
    refused("--default-flows 0: a peer has at least 1 flow", "--fabric", "--default-flows", "0")
    # A runs file that is not JSON lines: one line naming it, exit 1.
    junk = os.path.join(tmp, "runs.jsonl")
    open(junk, "w").write("not json\n")
    p = subprocess.run([sys.executable, run, "--fabric", "--runs", junk], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "Traceback" not in p.stderr and junk in p.stderr, (p.returncode, p.stderr)
    p = subprocess.run([sys.executable, run, "--fabric", "--flow-window", "rule", "--cap-buckets", "16",
                        "--default-flows", "2"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
print("bench/model/run: bad --runs, --flow-window, --cap-buckets, --default-flows refused with their names")

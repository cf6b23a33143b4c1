"""bench/model/run on bad input: a --runs folder or file that does not exist, a
--flow-window that is no number, a negative --cap-buckets, --default-flows 0, an --out
folder that cannot be made. Each
exits 2 with a line naming the option and the cause, never a Python traceback;
runs and ceilings that parse but hold nothing usable exit 1, naming the file;
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
    # An --out folder that cannot be made: named at once (was a traceback after the fit).
    refused("--out /dev/null/x: cannot make the folder: Not a directory", "--out", "/dev/null/x")
    refused("--out /dev/null/x: cannot make the folder: Not a directory", "--vm", "--runs",
            os.path.join(sys.argv[1], "bench", "results", "2026-12-03-d"), "--out", "/dev/null/x")
    # A runs file that is not JSON lines: one line naming it, exit 1.
    junk = os.path.join(tmp, "runs.jsonl")
    open(junk, "w").write("not json\n")
    p = subprocess.run([sys.executable, run, "--fabric", "--runs", junk], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "Traceback" not in p.stderr and junk in p.stderr, (p.returncode, p.stderr)
    # Runs that parse but hold nothing to compare, or a ceiling the fit cannot use: one line
    # naming the file and the cause, exit 1 (were a traceback, or an empty table and exit 0).
    def unusable(why, *args):
        p = subprocess.run([sys.executable, run, *args], capture_output=True, text=True, timeout=120)
        assert p.returncode == 1 and "Traceback" not in p.stderr, (args, p.returncode, p.stderr)
        assert why in p.stderr.strip().splitlines()[-1], (args, p.stderr)

    fab = os.path.join(tmp, "fab.jsonl")
    open(fab, "w").write("")
    unusable("no row of 1 MiB or more", "--fabric", "--runs", fab)
    row = ('{"op": "all_reduce", "hosts": 2, "per_host": 1, "rails": 1, "variant": "flat", "size": 16777216,'
           ' "net": {"rate": "1gbit", "fabric": true, "spines": 2, "flow_rate": "250mbit"},'
           ' "time_us": 1000, "busbw_gbps": %s}\n')
    open(fab, "w").write(row % "0")
    unusable(fab + " line 1: busbw_gbps 0 is not a positive number", "--fabric", "--runs", fab)
    vmd = os.path.join(tmp, "vm")
    os.makedirs(vmd)
    shm = ('{"key": "dccl-shm", "nranks": 2, "size": %d, "mem": "host", "in_place": {"time_us": %s}}\n')
    ceiling = os.path.join(vmd, "ceiling.json")
    runs = os.path.join(vmd, "runs.jsonl")
    good_ceiling = '[{"size": 8, "memcpy_gbps": 1, "reduce_gbps": 1}, {"size": 1048576, "memcpy_gbps": 9, "reduce_gbps": 5}]'
    for runs_text, ceiling_text, why in [
            ('{"key": "gloo", "nranks": 2, "size": 8, "in_place": {"time_us": 5}}\n', good_ceiling,
             runs + ": no dccl-shm or dccl-tcp row"),
            (shm % (8, "0"), good_ceiling, runs + " line 1: in_place time_us 0 is not a positive number"),
            (shm % (8, "2.5"), "[]", ceiling + ": not a list of rows"),
            (shm % (8, "2.5"), "{}", ceiling + ": not a list of rows"),
            (shm % (8, "2.5"), '[{"size": 8, "memcpy_gbps": 1}]', ceiling + " row 0: needs positive size")]:
        open(runs, "w").write(runs_text)
        open(ceiling, "w").write(ceiling_text)
        unusable(why, "--vm", "--runs", vmd)
    # A blank line (a trailing newline too many) is no row, not an error.
    open(runs, "w").write(shm % (8, "2.5") + "\n" + shm % (1024, "3.0") + "\n")
    open(ceiling, "w").write(good_ceiling)
    p = subprocess.run([sys.executable, run, "--vm", "--runs", vmd, "--limit", "1000"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and "| dccl-shm | 2 | 1K |" in p.stdout, (p.returncode, p.stderr)
    p = subprocess.run([sys.executable, run, "--fabric", "--flow-window", "rule", "--cap-buckets", "16",
                        "--default-flows", "2"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
print("bench/model/run: bad --runs, --flow-window, --cap-buckets, --default-flows refused with their names")

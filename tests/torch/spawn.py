"""Starts N ranks of a check script as processes of their own (not under
torchrun, whose agent ends every rank when one dies) with a tcp:// rendezvous
port, and collects their exit codes within a bound.

    spawn.main(__file__, __doc__, run_rank, want)

runs `run_rank(rank, n, port)` in a rank process (`SCRIPT --rank R N PORT`), or
launches N ranks (`SCRIPT N`) and exits 0 when their exit codes are want(n).
"""
import socket
import subprocess
import sys
import time


def launch(script, n, want, name):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, script, "--rank", str(r), str(n), str(port)]) for r in range(n)]
    deadline = time.monotonic() + 150
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            codes.append("hung")
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    print(f"{name}: exit codes {codes}, expected {want}", flush=True)
    return 0 if codes == want else 1


def main(script, doc, run_rank, want):
    if len(sys.argv) == 5 and sys.argv[1] == "--rank":
        sys.exit(run_rank(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
    if len(sys.argv) != 2 or int(sys.argv[1]) < 2:
        sys.exit(doc)
    n = int(sys.argv[1])
    sys.exit(launch(script, n, want(n), script.rsplit("/", 1)[-1].removesuffix(".py")))

#!/usr/bin/env python3
"""ab.py [--perf] K SIZE ITERS REPS NR label=kind:arg ...
kinds: dccl:BUILD[,ENV=V...][,nobind] (BUILD/tools/dccl-run, dccl-perf; shared memory), mpich-shm, ompi-shm.
K spinning processes run beside every launch; launches interleave (order reversed every other
repeat); prints the median time per call (us) per label, and with --perf the median CPU time
(perf stat task-clock, every process of the launch) and context switches per call."""
import os, statistics, subprocess, sys, tempfile
PEERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../../build-peers/bench")
args = sys.argv[1:]
perf = args and args[0] == "--perf"
if perf: args = args[1:]
K, SZ, N, R, NR = int(args[0]), args[1], args[2], int(args[3]), args[4]
cfgs = [a.split("=", 1) for a in args[5:]]
F = ["all_reduce", "-b", SZ, "-e", SZ, "-n", N, "-w", "2", "-c", "0"]
def argv(kind):
    k, _, arg = kind.partition(":")
    if k == "dccl":
        parts = arg.split(",")
        t = parts[0] + "/tools"; ea = [x for e in ["DCCL_PROVIDER=shm"] + parts[1:] if e != "nobind" for x in ("--env", e)]
        bind = ["--bind-to", "none"] if "nobind" in parts else []
        return [t + "/dccl-run", "-n", NR] + bind + ea + [t + "/dccl-perf"] + F + ["-z", "1"]
    if k == "ompi-shm":
        return ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", NR, "--mca", "pml", "ob1",
                "--mca", "btl", "vader,self", PEERS + "/ompi-perf"] + F
    if k == "mpich-shm":
        return ["mpirun.mpich", "-np", NR, PEERS + "/mpich-perf"] + F
    raise SystemExit("unknown kind " + kind)
sp = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(K)]
res = {l: [] for l, _ in cfgs}
cpu = {l: [] for l, _ in cfgs}
cs = {l: [] for l, _ in cfgs}
calls = int(N) + 2
try:
    for rep in range(R):
        for label, kind in (cfgs if rep % 2 == 0 else cfgs[::-1]):
            env = {k: v for k, v in os.environ.items() if not k.startswith(("DCCL_", "OMPI_", "FI_"))}
            cmd = argv(kind)
            pf = tempfile.NamedTemporaryFile(delete=False, suffix=".perf").name
            if perf: cmd = ["perf", "stat", "-x,", "-e", "task-clock,context-switches", "-o", pf] + cmd
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env).stdout
            except subprocess.TimeoutExpired:
                out = ""
            t = None
            for line in out.splitlines():
                f = line.replace("[0]", "").split()
                if len(f) > 6 and f[0].isdigit() and "sum" in f:
                    t = float(f[f.index("sum") + 2]); break
            res[label].append(t)
            if perf:
                for line in open(pf):
                    f = line.split(",")
                    if len(f) > 2 and f[2] == "task-clock": cpu[label].append(float(f[0]) * 1000 / calls)
                    if len(f) > 2 and f[2] == "context-switches": cs[label].append(float(f[0]) / calls)
            os.unlink(pf)
finally:
    for p in sp: p.kill()
    for p in sp: p.wait()
med = lambda v: statistics.median(v) if v else float("nan")
for label, _ in cfgs:
    v = [x for x in res[label] if x is not None]
    extra = f" cpu_us/call {med(cpu[label]):9.0f} cs/call {med(cs[label]):7.1f}" if perf else ""
    print(f"K={K} {SZ} {NR}r {label:10s} median {med(v):>10.1f}{extra} : {' '.join(str(x) for x in res[label])}")
print("load", open("/proc/loadavg").read().split()[:3])

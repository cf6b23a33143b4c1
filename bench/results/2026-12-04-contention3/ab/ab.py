#!/usr/bin/env python3
"""ab.py K SIZE ITERS REPS NR label=kind:arg ...  kinds: dccl:TOOLS[,ENV=V...] ompi-shm ompi-tcp mpich-shm mpich-tcp gloo"""
import subprocess, sys, statistics, os, re
K, SZ, N, R, NR = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
cfgs = [a.split("=", 1) for a in sys.argv[6:]]
P = "/work/wt-busy/build-peers/bench"
F = ["all_reduce", "-b", SZ, "-e", SZ, "-n", N, "-w", "2", "-c", "0"]
def argv(kind):
    k, _, arg = kind.partition(":")
    if k == "dccl":
        parts = arg.split(",")
        t = parts[0]; ea = [x for e in parts[1:] for x in ("--env", e)]
        return [t + "/dccl-run", "-n", NR] + ea + [t + "/dccl-perf"] + F + ["-z", "1"]
    if k.startswith("ompi"):
        return ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-np", NR, "--mca", "pml", "ob1", "--mca", "btl",
                "vader,self" if k == "ompi-shm" else "tcp,self", P + "/ompi-perf"] + F
    if k == "mpich-shm":
        return ["mpirun.mpich", "-np", NR, P + "/mpich-perf"] + F
    if k == "mpich-tcp":
        return ["mpirun.mpich", "-np", NR, "-genv", "MPIR_CVAR_NOLOCAL", "1", "-genv", "UCX_TLS", "tcp", P + "/mpich-perf"] + F
    if k == "gloo":
        return ["/work/main/build/tools/dccl-run", "-n", NR, "--bind-to", "none", P + "/gloo-perf"] + F + ["--algo", "ring"]
sp = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(K)]
res = {l: [] for l, _ in cfgs}
try:
    for rep in range(R):
        order = cfgs if rep % 2 == 0 else cfgs[::-1]
        for label, kind in order:
            env = {k: v for k, v in os.environ.items() if not k.startswith(("DCCL_", "OMPI_", "FI_"))}
            try:
                out = subprocess.run(argv(kind), capture_output=True, text=True, timeout=300, env=env).stdout
            except subprocess.TimeoutExpired:
                out = ""
            t = None
            for line in out.splitlines():
                f = line.replace("[0]", "").split()
                if len(f) > 6 and f[0].isdigit() and "sum" in f:
                    t = float(f[f.index("sum") + 2]); break
            res[label].append(t)
finally:
    for p in sp: p.kill()
    for p in sp: p.wait()
for label, _ in cfgs:
    v = [x for x in res[label] if x is not None]
    print(f"K={K} {SZ} {NR}r {label:12s} median {statistics.median(v) if v else 'FAIL':>10} : {' '.join(str(x) for x in res[label])}")
print("load", open("/proc/loadavg").read().split()[:3])

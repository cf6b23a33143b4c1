import sys, time, os
r = os.environ.get("DCCL_RANK", "x")
out = open(f"/tmp/txs.{r}", "w")
f = open("/proc/net/dev")
t_end = time.time() + float(sys.argv[1])
while time.time() < t_end:
    f.seek(0)
    for line in f.read().splitlines():
        if line.strip().startswith("eth0:"):
            v = line.split(":", 1)[1].split()
            out.write(f"{time.monotonic_ns()} {v[8]} {v[0]}\n")
    time.sleep(0.002)

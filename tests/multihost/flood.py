#!/usr/bin/env python3
"""Connection flood for flood.sh: holds up to PER connections to every ip:port
listed in TARGETS (rewritten by the test as ranks' listening sockets come and go),
never saying anything, for SECONDS or until STOP exists. Connections to targets no
longer listed are closed. Prints how many connections it opened.
usage: flood.py TARGETS PER SECONDS STOP"""
import os
import resource
import socket
import sys
import time

targets_file, per, secs, stop = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = {}
opened = 0
end = time.time() + secs
while time.time() < end and not os.path.exists(stop):
    try:
        with open(targets_file) as f:
            targets = set(f.read().split())
    except OSError:
        targets = set()
    for t in list(held):
        if t not in targets:
            for s in held.pop(t):
                s.close()
    for t in targets:
        ip, port = t.rsplit(":", 1)
        socks = held.setdefault(t, [])
        while len(socks) < per:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect((ip, int(port)))
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                break
            socks.append(s)
            opened += 1
    time.sleep(0.02)
print(f"flood from {socket.gethostname()}: {opened} connections opened", flush=True)

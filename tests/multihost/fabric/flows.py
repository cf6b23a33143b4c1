#!/usr/bin/env python3
"""TCP flows for measuring the emulated fabric (no iperf here).

  flows.py serve PORT SECONDS [COUNT]
      accepts connections for SECONDS (with COUNT: until COUNT connections came, for
      at most SECONDS + 30, so that senders slowed by a loaded machine still
      count), reads and discards; then prints one line per
      connection: "flow SPORT BYTES SECONDS MBITS" (the receiver's count, from the
      first byte to the last), sorted by the sender's port
  flows.py send HOST PORT SECONDS SPORT [SPORT...]
      one flow per SPORT (bound as the source port, so that the tests pick the
      port hash), each sending for SECONDS
"""
import socket
import sys
import threading
import time


def serve(port, seconds, count=None):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(64)
    ls.settimeout(0.2)
    stats, threads = {}, []

    def reader(conn, sport):
        first = last = None
        total = 0
        while True:
            try:
                b = conn.recv(1 << 20)
            except OSError:
                break
            if not b:
                break
            now = time.monotonic()
            first = first or now
            last = now
            total += len(b)
        conn.close()
        stats[sport] = (total, (last - first) if first else 0.0)

    end = time.monotonic() + seconds + (30 if count else 0)
    while time.monotonic() < end and (count is None or len(threads) < count):
        try:
            conn, addr = ls.accept()
        except socket.timeout:
            continue
        t = threading.Thread(target=reader, args=(conn, addr[1]))
        t.start()
        threads.append(t)
    for t in threads:
        t.join(30)
    for sport in sorted(stats):
        total, dt = stats[sport]
        print("flow %d %d %.3f %.1f" % (sport, total, dt, total * 8 / dt / 1e6 if dt > 0 else 0.0))


def send(host, port, seconds, sports):
    buf = b"\0" * (1 << 18)
    errors = []

    def sender(sport):
        try:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("0.0.0.0", sport))
            give_up = time.monotonic() + 10  # the receiver may still be starting
            while True:
                try:
                    s.connect((host, port))
                    break
                except ConnectionRefusedError:
                    if time.monotonic() > give_up:
                        raise
                    time.sleep(0.05)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                s.sendall(buf)
            s.close()
        except OSError as e:
            errors.append("flow from port %d: %s" % (sport, e))

    threads = [threading.Thread(target=sender, args=(p,)) for p in sports]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit("\n".join(errors))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "serve":
        serve(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) >= 5 else None)
    elif len(sys.argv) >= 6 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), [int(p) for p in sys.argv[5:]])
    else:
        sys.exit(__doc__)

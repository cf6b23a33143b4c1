#!/usr/bin/env python3
"""The soak's network tools (bench/soak runs them inside emulated namespaces).

    soak_net.py sniff IFACE IP PORT OUT SECONDS
        capture what the first client to connect to IP:PORT sends (its first
        4 KiB, or what it sent in its first second), from a raw socket on IFACE;
        written to OUT. Exit 1 when nothing was seen within SECONDS.
    soak_net.py garbage IP:PORT...
        to each target, 3 connections each sending 1 B to 8 KiB of random bytes
        then closing; prints one line per target.
    soak_net.py replay FILE IP:PORT
        one connection that sends FILE's bytes as they were captured and prints
        what came back within 1 s (the store's answer).
"""
import os
import random
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003


def sniff(iface, ip, port, out, seconds):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((iface, 0))
    s.settimeout(0.2)
    print("sniff: watching %s" % iface, flush=True)  # bench/soak starts the job after this line
    dst = socket.inet_aton(ip)
    flow, isn, data, first = None, None, {}, None
    end = time.time() + seconds
    while time.time() < end:
        if first is not None and (time.time() - first > 1.0 or sum(len(v) for v in data.values()) >= 4096):
            break
        try:
            frame, addr = s.recvfrom(65536 + 64)
        except socket.timeout:
            continue
        if addr[2] == socket.PACKET_OUTGOING or len(frame) < 14 + 20 or frame[12:14] != b"\x08\x00":
            continue
        iph = frame[14:]
        ihl = (iph[0] & 15) * 4
        if iph[9] != 6 or iph[16:20] != dst:
            continue
        tot = struct.unpack("!H", iph[2:4])[0]
        tcp = iph[ihl:tot]
        sport, dport, seq = struct.unpack("!HHI", tcp[:8])
        if dport != port:
            continue
        src = (iph[12:16], sport)
        flags = tcp[13]
        if flow is None and flags & 0x02 and not flags & 0x10:  # the first SYN
            flow, isn = src, seq + 1
            continue
        if src != flow:
            continue
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload:
            data.setdefault((seq - isn) & 0xFFFFFFFF, payload)
            if first is None:
                first = time.time()
    if not data:
        print("sniff: no client data to %s:%d within %s s" % (ip, port, seconds))
        return 1
    stream, at = b"", 0
    for off in sorted(data):  # reassemble; a gap ends the capture
        if off > at:
            break
        stream += data[off][at - off:]
        at = len(stream)
    with open(out, "wb") as f:
        f.write(stream[:4096])
    print("sniff: %d bytes from %s:%d to %s:%d" % (min(len(stream), 4096), socket.inet_ntoa(flow[0]), flow[1], ip,
                                                   port))
    return 0


def target(t):
    host, port = t.rsplit(":", 1)
    return host, int(port)


def garbage(targets):
    for t in targets:
        sent, refused, closed = 0, 0, 0
        for _ in range(3):
            try:
                c = socket.create_connection(target(t), timeout=1.0)
            except OSError:
                refused += 1
                continue
            try:
                n = random.randint(1, 8192)
                c.sendall(os.urandom(n))
                sent += n
                c.settimeout(0.1)
                try:
                    if c.recv(4096) == b"":
                        closed += 1
                except socket.timeout:
                    pass
            except OSError:
                closed += 1
            c.close()
        print("garbage: %s: %d B sent, %d connections refused, %d closed by the listener" % (t, sent, refused, closed))
    return 0


def replay(path, t):
    with open(path, "rb") as f:
        data = f.read()
    try:
        c = socket.create_connection(target(t), timeout=1.0)
    except OSError as e:
        print("replay: %s: cannot connect: %s" % (t, e))
        return 0
    got = b""
    try:
        c.sendall(data)
        c.settimeout(1.0)
        end = time.time() + 1.0
        while time.time() < end:
            b = c.recv(4096)
            if not b:
                break
            got += b
    except OSError:
        pass
    c.close()
    text = "".join(chr(x) if 32 <= x < 127 else "." for x in got[:200])
    print("replay: %s: %d B sent, answer %d B: %s" % (t, len(data), len(got), text))
    return 0


def main(argv):
    if len(argv) >= 7 and argv[1] == "sniff":
        return sniff(argv[2], argv[3], int(argv[4]), argv[5], float(argv[6]))
    if len(argv) >= 2 and argv[1] == "garbage":
        return garbage(argv[2:])
    if len(argv) == 4 and argv[1] == "replay":
        return replay(argv[2], argv[3])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))

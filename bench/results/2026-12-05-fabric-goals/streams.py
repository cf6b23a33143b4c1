import os, socket, threading, time, sys
r = int(os.environ['DCCL_RANK']); n = int(os.environ['DCCL_WORLD_SIZE'] if 'DCCL_WORLD_SIZE' in os.environ else os.environ.get('DCCL_NRANKS', '4'))
F = int(sys.argv[1]); TOTAL = int(sys.argv[2]) << 20; ring = sys.argv[3] == 'ring'
leafmode = sys.argv[4] if len(sys.argv) > 4 else 'own'
def addr(h): return f"198.18.{h}.{h+1}"
nxt = (r + 1) % n
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((addr(r), 6000)); srv.listen(64)
got = [0]*F
def recv_all(c, i):
    b = bytearray(1 << 20)
    while True:
        k = c.recv_into(b)
        if not k: break
        got[i] += k
recvs = []
def acceptor():
    if not ring and r != 1: return
    for i in range(F):
        c, _ = srv.accept(); t = threading.Thread(target=recv_all, args=(c, i)); t.start(); recvs.append(t)
at = threading.Thread(target=acceptor); at.start()
time.sleep(1.0)
sent_t = []
if ring or r == 0:
    socks = [socket.create_connection((addr(nxt), 6000)) for _ in range(F)]
    per = TOTAL // F; d = bytes(1 << 20)
    fin = []
    def send(s):
        left = per
        while left > 0:
            k = min(left, len(d)); s.sendall(d[:k]); left -= k
        s.shutdown(socket.SHUT_WR); fin.append(time.time())
    t0 = time.time()
    ts = [threading.Thread(target=send, args=(s,)) for s in socks]
    [t.start() for t in ts]
at.join()
if ring or r == 1:
    t0r = time.time()
    [t.join() for t in recvs]
if ring or r == 0:
    [t.join() for t in ts]
    # wait for receiver done via sleep barrier-less: measure send completion (kernel acked mostly)
    el = time.time() - t0
    fs = sorted(f - t0 for f in fin); src=[s.getsockname()[1] for s in socks]
    print(f"RATE rank{r} F={F} {TOTAL/el/1e6:.1f} MB/s frac={TOTAL/el/125e6:.3f} first_done={fs[0]:.2f}s last={fs[-1]:.2f}s allbusy_frac={TOTAL/fs[-1]/125e6:.3f} firstfin_frac={per*F/fs[0]/125e6:.3f} b1_4={[(p>>1)%16 for p in src]}", flush=True)
if ring or r == 1:
    print(f"GOT rank{r} " + " ".join(f"{g>>20}" for g in got), flush=True)

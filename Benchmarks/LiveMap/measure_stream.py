#!/usr/bin/env python3
"""Usage: measure_stream.py LOCGATE CLIENTS SECONDS. Runs locgate with a UDP source fed at 10 Hz
and the API on 127.0.0.1:17380; measures (1) the latency from sending the datagram that releases
epoch n (the source emits an epoch when the next one begins) to reading position n on /events,
(2) CPU and RSS of locgate over SECONDS with CLIENTS event streams connected."""
import json, os, socket, subprocess, sys, threading, time
binary, clients, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
udp, api = 17301, 17380
cfg = {"settings": {"stats_interval": False}, "api": {"listen": "127.0.0.1:%d" % api},
       "sources": {"gps": {"type": "udp", "bind": "127.0.0.1", "port": udp, "device": "probe"}},
       "sinks": {"out": {"type": "file", "inputs": ["gps"], "path": "/dev/null"}}}
import tempfile
config_path = os.path.join(tempfile.mkdtemp(), "pipeline.json")
open(config_path, "w").write(json.dumps(cfg))
gw = subprocess.Popen([binary, "run", config_path], stderr=subprocess.DEVNULL)
time.sleep(1)
def cs(s):
    c = 0
    for ch in s: c ^= ord(ch)
    return "$%s*%02X\r\n" % (s, c)
def epoch(n):
    t = "12%02d%02d.%d0" % ((n // 600) % 60, (n // 10) % 60, n % 10)
    lat = "5231.%04d" % (n % 10000)
    return (cs("GPRMC,%s,A,%s,N,01324.0000,E,1.5,90.0,010326,,,A" % (t, lat)) + cs("GPGGA,%s,%s,N,01324.0000,E,1,09,0.9,34.0,M,40.0,M,," % (t, lat))).encode()
sent = {}
received = {}
def reader(i):
    s = socket.create_connection(("127.0.0.1", api))
    s.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
    buf = b""
    while True:
        d = s.recv(65536)
        if not d: return
        now = time.monotonic()
        if i != 0: continue
        buf += d
        *lines, buf = buf.split(b"\n")
        for l in lines:
            if b'"type":"position"' in l:
                lat = json.loads(l[l.index(b"{"):].decode())["point"][0]
                received.setdefault(round(lat, 6), now)
for i in range(clients):
    threading.Thread(target=reader, args=(i,), daemon=True).start()
time.sleep(1)
def cpu():
    f = open("/proc/%d/stat" % gw.pid).read().split(")")[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
def rss():
    for l in open("/proc/%d/status" % gw.pid):
        if l.startswith("VmRSS"): return int(l.split()[1])
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c0, t0 = cpu(), time.monotonic()
n = 0
while time.monotonic() - t0 < seconds:
    u.sendto(epoch(n), ("127.0.0.1", udp))
    # the source emits epoch n-1 when epoch n begins (its epoch assembler closes an epoch on a new time)
    if n > 0: sent[round(52 + (31 + ((n - 1) % 10000) / 10000) / 60, 6)] = time.monotonic()
    n += 1
    time.sleep(0.1)
c1, t1 = cpu(), time.monotonic()
time.sleep(0.5)
lat = sorted((received[k] - sent[k]) * 1000 for k in sent if k in received)
print("clients=%d epochs=%d cpu=%.1f%% rss=%d KiB threads=%d" % (clients, n, (c1 - c0) / (t1 - t0) * 100, rss(), len(os.listdir("/proc/%d/task" % gw.pid))))
if lat:
    print("latency ms (datagram that releases epoch n sent -> position n's SSE line read by client 0): n=%d median=%.2f p95=%.2f max=%.2f" % (len(lat), lat[len(lat)//2], lat[int(len(lat)*0.95)], lat[-1]))
gw.terminate(); gw.wait()

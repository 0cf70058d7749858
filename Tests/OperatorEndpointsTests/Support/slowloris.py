#!/usr/bin/env python3
"""Opens COUNT connections to 127.0.0.1:PORT at once; each sends the start of a request line
("GET /he") and then one more byte of it every INTERVAL seconds, so no request ever completes and
no connection is ever idle for long. Prints "OPEN <connected>" once connected, keeps trickling
until stdin closes, then closes everything and prints "DONE <connections the server closed>"."""
import resource
import selectors
import socket
import sys
import time

port, count, interval = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, count + 64)), hard))

line = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
start = 7  # "GET /he"

sel = selectors.DefaultSelector()
conns = {}
for i in range(count):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    sel.register(s, selectors.EVENT_WRITE, i)

pending = count
while pending:
    events = sel.select(timeout=10)
    if not events:
        break
    for key, _ in events:
        s = key.fileobj
        pending -= 1
        sel.unregister(s)
        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
            s.close()
            continue
        try:
            s.send(line[:start])
            conns[s] = start
            sel.register(s, selectors.EVENT_READ, key.data)
        except OSError:
            s.close()
print(f"OPEN {len(conns)}", flush=True)

closed = 0
sel.register(sys.stdin, selectors.EVENT_READ, -1)
done = False
trickled = time.monotonic()
while not done:
    for key, _ in sel.select(timeout=max(0, trickled + interval - time.monotonic())):
        if key.data == -1:
            if not sys.stdin.buffer.read1(1):
                done = True
            continue
        s = key.fileobj
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:  # the server closed it
            closed += 1
            sel.unregister(s)
            conns.pop(s, None)
            s.close()
    if time.monotonic() < trickled + interval:
        continue
    trickled = time.monotonic()
    # One more byte on every connection still open, never the whole request.
    for s, sent in list(conns.items()):
        if sent < len(line) - 1:
            try:
                s.send(line[sent:sent + 1])
                conns[s] = sent + 1
            except OSError:
                pass

for s in conns:
    s.close()
print(f"DONE {closed}", flush=True)

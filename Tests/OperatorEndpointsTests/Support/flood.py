#!/usr/bin/env python3
"""Opens COUNT connections to 127.0.0.1:PORT at once: every other one sends GET /metrics, the
rest stay silent. Prints "OPEN <connected>", holds them all until stdin closes, then closes them
and prints "DONE <answered with 200> <other answers or resets>"."""
import resource
import selectors
import socket
import sys

port, count = int(sys.argv[1]), int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, count + 64)), hard))

sel = selectors.DefaultSelector()
conns = []
for i in range(count):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    conns.append(s)
    sel.register(s, selectors.EVENT_WRITE, ("connecting", i))

connected = 0
pending = count
while pending:
    events = sel.select(timeout=10)
    if not events:
        break
    for key, _ in events:
        s, (_, i) = key.fileobj, key.data
        pending -= 1
        sel.unregister(s)
        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
            continue
        connected += 1
        if i % 2 == 0:
            try:
                s.send(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                sel.register(s, selectors.EVENT_READ, ("reading", i))
            except OSError:
                pass
print(f"OPEN {connected}", flush=True)

answers = {}
sel.register(sys.stdin, selectors.EVENT_READ, ("control", -1))
done = False
while not done:
    for key, _ in sel.select(timeout=1):
        kind, i = key.data
        if kind == "control":
            if not sys.stdin.buffer.read1(1):
                done = True
            continue
        try:
            data = key.fileobj.recv(65536)
        except OSError:
            data = b""
        if data:
            answers[i] = answers.get(i, b"") + data
        else:
            sel.unregister(key.fileobj)

for s in conns:
    s.close()
ok = sum(1 for a in answers.values() if a.startswith(b"HTTP/1.1 200"))
print(f"DONE {ok} {count // 2 - ok}", flush=True)

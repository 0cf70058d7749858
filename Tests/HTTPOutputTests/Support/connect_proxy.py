#!/usr/bin/env python3
"""A minimal HTTP CONNECT proxy for the http sink's tests, loopback only.

Usage: connect_proxy.py --record FILE [--port 0]   prints "PORT <n>" once listening; appends the target of
every CONNECT (and the first line of any plain proxied request) to FILE, one per line.
"""
import argparse
import select
import signal
import socket
import threading


def pipe(a, b):
    try:
        while True:
            ready, _, _ = select.select([a, b], [], [], 30)
            if not ready:
                return
            for s in ready:
                data = s.recv(65536)
                if not data:
                    return
                (b if s is a else a).sendall(data)
    except OSError:
        pass
    finally:
        a.close()
        b.close()


def handle(client, record):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = client.recv(4096)
        if not chunk:
            client.close()
            return
        head += chunk
    first = head.split(b"\r\n", 1)[0].decode()
    with open(record, "a") as f:
        f.write(first + "\n")
    method, target, _ = first.split(" ", 2)
    if method != "CONNECT":
        client.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
        client.close()
        return
    host, port = target.rsplit(":", 1)
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]"):
        client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
        client.close()
        return
    upstream = socket.create_connection((host.strip("[]"), int(port)))
    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    pipe(client, upstream)


def main():
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    ap = argparse.ArgumentParser()
    ap.add_argument("--record", required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", args.port))
    server.listen(16)
    print("PORT %d" % server.getsockname()[1], flush=True)
    while True:
        client, _ = server.accept()
        threading.Thread(target=handle, args=(client, args.record), daemon=True).start()


if __name__ == "__main__":
    main()

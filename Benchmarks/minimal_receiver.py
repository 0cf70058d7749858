#!/usr/bin/env python3
"""The smallest HTTP receiver for the http sink benchmark: reads each body, answers 200, counts.

Usage: minimal_receiver.py COUNT_FILE   prints "PORT <n>" once listening on 127.0.0.1.
It does no JSON parsing (a position is counted by its `"id":` key), so the receiver is not the
limit of the benchmark, as the recording test receiver (~11,000 positions/s) was. COUNT_FILE
holds the number of positions received so far, rewritten after each request.
"""
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

count = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in one write with TCP_NODELAY: otherwise Nagle's algorithm and the
    # client's delayed ACK add ~40 ms to every answer and the receiver is the limit again.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_POST(self):
        global count
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        count += body.count(b'"id":')
        with open(sys.argv[1], "w") as f:
            f.write(str(count))
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}")


signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("PORT %d" % server.server_address[1], flush=True)
server.serve_forever()

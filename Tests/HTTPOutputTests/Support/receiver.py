#!/usr/bin/env python3
"""Test receiver for the http sink: records request bodies and misbehaves on request.

Usage: receiver.py --record FILE [--port 0] [--fail N] [--status CODE] [--delay S]
                   [--retry-after S] [--drop N] [--error-body]
                   [--tls-cert PEM --tls-key PEM [--tls-client-ca PEM]]

With --tls-cert it serves HTTPS; with --tls-client-ca it requires a client certificate signed by
that CA (mutual TLS).

Prints "PORT <n>" on stdout once listening (port 0 picks a free one), loopback only.

Every request to any path but /_control is answered by the first matching rule, else the
default (200 {"code":0,"resultInteger":1}), and recorded as one JSON line in FILE:
{"n": 1, "status": 200, "headers": {...lowercase...}, "body": "<text, gunzipped>"}.
A dropped connection is recorded with status 0.

Rules (consumed in order; "times" -1 = forever, default 1):
  {"times": 3, "status": 500}                         fail three times
  {"status": 429, "retry_after": "1"}                 429 with Retry-After
  {"match": "\"id\":\"x-17\"", "status": 400}          400 for a body containing the text
  {"status": 200, "body": {"code": 1}}                200 with an error inside
  {"delay": 0.5}                                      answer late (then as the default)
  {"hold": "/path/to/file"}                           answer once that file exists (a test's go-ahead)
  {"drop": true}                                      close the connection without an answer
  {"status": 308, "location": "/final"}               redirect
POST /_control with {"rules": [...], "default": {...}} replaces them; GET /_control returns
{"requests": n, "rules_left": [...]}.
"""
import argparse
import gzip
import json
import os
import signal
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
state = {"rules": [], "default": {"status": 200, "body": {"code": 0, "resultInteger": 1}}, "n": 0}
record_file = None


def take_rule(body_text):
    with lock:
        for i, rule in enumerate(state["rules"]):
            match = rule.get("match")
            if match is not None and match not in body_text:
                continue
            times = rule.get("times", 1)
            if times != -1:
                if times <= 1:
                    state["rules"].pop(i)
                else:
                    rule["times"] = times - 1
            return rule
        return state["default"]


def record(status, headers, body_text):
    with lock:
        state["n"] += 1
        line = json.dumps({"n": state["n"], "status": status, "headers": headers, "body": body_text})
        record_file.write(line + "\n")
        record_file.flush()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, extra=None):
        data = json.dumps(body).encode() if not isinstance(body, (bytes, str)) else (body.encode() if isinstance(body, str) else body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        length = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(length) if length else b""
        if self.headers.get("Content-Encoding", "") == "gzip":
            data = gzip.decompress(data)
        return data.decode("utf-8", "replace")

    def do_GET(self):
        if self.path == "/_control":
            with lock:
                self.answer(200, {"requests": state["n"], "rules_left": state["rules"]})
        else:
            self.answer(404, {"error": "not found"})

    def do_POST(self):
        body = self.read_body()
        if self.path == "/_control":
            spec = json.loads(body or "{}")
            with lock:
                state["rules"] = spec.get("rules", [])
                if "default" in spec:
                    state["default"] = spec["default"]
            self.answer(200, {"ok": True})
            return
        rule = take_rule(body)
        headers = {k.lower(): v for k, v in self.headers.items()}
        if rule.get("delay"):
            time.sleep(float(rule["delay"]))
        if rule.get("hold"):
            while not os.path.exists(rule["hold"]):
                time.sleep(0.01)
        if rule.get("drop"):
            record(0, headers, body)
            self.close_connection = True
            try:
                import socket
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        status = int(rule.get("status", state["default"].get("status", 200)))
        answer = rule.get("body", state["default"].get("body", {}) if status < 300 else {"error": "status %d" % status})
        extra = {}
        if "retry_after" in rule:
            extra["Retry-After"] = str(rule["retry_after"])
        if "location" in rule:
            extra["Location"] = str(rule["location"])
        record(status, headers, body)
        self.answer(status, answer, extra)

    do_PUT = do_POST


def main():
    global record_file
    # A parent (a Swift test process) may hand down a mask that blocks these.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    ap = argparse.ArgumentParser()
    ap.add_argument("--record", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fail", type=int, default=0, help="answer --status (default 500) to the first N requests")
    ap.add_argument("--status", type=int, default=500)
    ap.add_argument("--retry-after")
    ap.add_argument("--delay", type=float, default=0, help="delay every answer by S seconds")
    ap.add_argument("--drop", type=int, default=0, help="drop the connection of the first N requests")
    ap.add_argument("--error-body", action="store_true", help="answer 200 {\"code\":1,\"resultInteger\":0} to everything")
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--tls-client-ca")
    args = ap.parse_args()
    record_file = open(args.record, "a")
    rules = []
    if args.drop:
        rules.append({"times": args.drop, "drop": True})
    if args.fail:
        r = {"times": args.fail, "status": args.status}
        if args.retry_after is not None:
            r["retry_after"] = args.retry_after
        rules.append(r)
    if args.delay:
        rules.append({"times": -1, "delay": args.delay})
    state["rules"] = rules
    if args.error_body:
        state["default"] = {"status": 200, "body": {"code": 1, "resultInteger": 0}}
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        if args.tls_client_ca:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(args.tls_client_ca)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print("PORT %d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

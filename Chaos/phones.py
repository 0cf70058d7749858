#!/usr/bin/env python3
"""Phones that post their tracks to a gateway's http_server source, as Traccar Client or
OwnTracks do: each keeps a position until the gateway answered 2xx for it (the gateway answers
only once the position is committed to its sinks' outboxes), retrying forever on a refused
connection, a cut one, a timeout or an error status. So when the gateway is killed with kill -9,
what it answered must still come out of its outboxes; what it did not answer is sent again.

Usage: phones.py URL RATE TRACK.jsonl...
  Each track is one device's positions (JSON Lines, with time); they are posted BATCH (10) at a
  time, paced RATE times faster than the positions' times, and a phone that fell behind (the
  gateway was down) sends its backlog as fast as the gateway answers.
Prints a line per device when it is done; exit 0 once every position was answered.
"""
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime

BATCH = 10
# Straight to the gateway on loopback, whatever http_proxy says.
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def epoch(t):
    return datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ").timestamp()


def phone(url, rate, path, start, results):
    with open(path) as f:
        positions = [json.loads(l) for l in f]
    t0 = epoch(positions[0]["time"])
    attempts = failures = 0
    for i in range(0, len(positions), BATCH):
        batch = positions[i:i + BATCH]
        due = start + (epoch(batch[-1]["time"]) - t0) / rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        body = json.dumps(batch).encode()
        while True:
            attempts += 1
            try:
                req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
                with DIRECT.open(req, timeout=15) as r:
                    r.read()
                    if 200 <= r.status < 300:
                        break
            except (urllib.error.URLError, OSError, ValueError):
                pass
            failures += 1
            time.sleep(0.2)
    results[path] = (len(positions), attempts, failures)
    print("phones: %s: %d positions answered, %d requests, %d failed and sent again"
          % (positions[0]["device"], len(positions), attempts, failures), flush=True)


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    url, rate, tracks = sys.argv[1], float(sys.argv[2].rstrip("x")), sys.argv[3:]
    start, results = time.monotonic(), {}
    threads = [threading.Thread(target=phone, args=(url, rate, t, start, results), daemon=True) for t in tracks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0 if len(results) == len(tracks) else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A locgate `exec` plugin in Python: prints a random walk as JSON Lines positions.

Each line on stdout is one JSON object in locgate's position schema (gpsd TPV names: time, lat,
lon, altMSL, speed, track, mode, uSat, hdop, eph, device, ...). Anything on stderr ends up in
locgate's log at warning level. Exit whenever you like: locgate restarts the program with backoff.

    {"sources": {"walk": {"type": "exec", "format": "jsonl",
                          "command": ["python3", "Docs/examples/exec-random-walk.py", "--count", "10"]}}}

Options: --interval SECONDS (default 1), --count N (default: forever), --seed N (or $WALK_SEED),
--start LAT,LON (default 52.52,13.405), --device ID (default random-walk).
"""
import argparse
import datetime
import json
import math
import os
import random
import signal
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("WALK_SEED", "1")))
    parser.add_argument("--start", default="52.52,13.405")
    parser.add_argument("--device", default="random-walk")
    args = parser.parse_args()

    # SIGTERM from locgate at shutdown: finish cleanly instead of dying mid-line.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    rng = random.Random(args.seed)
    lat, lon = (float(v) for v in args.start.split(","))
    track = rng.uniform(0, 360)
    print(f"random walk from {lat},{lon} seed {args.seed}", file=sys.stderr, flush=True)
    n = 0
    while args.count == 0 or n < args.count:
        speed = rng.uniform(0.5, 2.0)  # m/s, a walker
        track = (track + rng.uniform(-30, 30)) % 360
        step = speed * max(args.interval, 1.0)
        lat += step * math.cos(math.radians(track)) / 111_320
        lon += step * math.sin(math.radians(track)) / (111_320 * math.cos(math.radians(lat)))
        # The fix time is the time of the reading: locgate derives ids from it.
        when = datetime.datetime.now(datetime.timezone.utc)
        print(json.dumps({
            "class": "TPV",
            "device": args.device,
            "time": when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z",
            "mode": 3,
            "lat": round(lat, 7),
            "lon": round(lon, 7),
            "altMSL": 34.0,
            "speed": round(speed, 2),
            "track": round(track, 1),
            "uSat": 9,
            "hdop": 0.9,
        }), flush=True)
        n += 1
        if args.interval > 0:
            time.sleep(args.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())

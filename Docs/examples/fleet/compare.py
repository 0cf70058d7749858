#!/usr/bin/env python3
"""Compares the partitioned aggregators' output with the reference aggregator's: every
position published must be in the partitioned output (nothing lost), and each device's
geofence enter/exit events must be the same. Prints one summary line; exit 1 on a difference.

No allowance for an aggregator killed and restarted, nor for a partition moved to another
aggregator: the geofence state is saved in a JetStream Key-Value bucket the aggregators share
once the positions that changed it are acknowledged, so a device inside a fence is not entered
again and one that left during the restart or the move is still seen leaving.

Usage: compare.py EXPECTED_POSITIONS REFERENCE.jsonl PART.jsonl..."""
import json
import sys


def read(paths):
    positions, events, duplicates = {}, {}, 0
    for path in paths:
        with open(path) as f:
            for line in f:
                try:
                    p = json.loads(line)
                except ValueError:
                    continue          # a line cut by kill -9: its message was never acknowledged
                device = p.get("device", "")
                if "event" in p:
                    key = (p["event"]["type"], p["event"]["fence"], p["time"])
                    events.setdefault(device, set()).add(key)
                else:
                    ids = positions.setdefault(device, set())
                    if p["id"] in ids:
                        duplicates += 1
                    ids.add(p["id"])
    return positions, events, duplicates


def main():
    args = sys.argv[1:]
    expected, reference, parts = int(args[0]), args[1], args[2:]
    ref_pos, ref_events, _ = read([reference])
    pos, events, duplicates = read(parts)
    total = sum(len(v) for v in pos.values())
    ref_total = sum(len(v) for v in ref_pos.values())
    missing_events = sum(len(ref_events[d] - events.get(d, set())) for d in ref_events)
    extra_events = sum(len(events[d] - ref_events.get(d, set())) for d in events)
    n_events = sum(len(v) for v in ref_events.values())
    ok = total == expected and ref_total == expected and missing_events == 0 and extra_events == 0 and n_events > 0
    print("positions %d/%d (reference %d), duplicates %d, devices %d, events %d, missing events %d, extra events %d: %s"
          % (total, expected, ref_total, duplicates, len(pos), n_events, missing_events, extra_events,
             "SAME" if ok else "DIFFERENT"))
    sys.exit(0 if ok else 1)


main()

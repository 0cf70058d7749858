#!/usr/bin/env python3
"""The chaos run's checker: for every output path, classifies each generated position id per
device as delivered, lost, duplicated (extra copies counted) or out of order, prints a table
(one row per output path and device, then totals) and exits 1 when any id is lost.

Usage: check.py WORK_DIRECTORY

It reads what chaos.py left in WORK_DIRECTORY:
  data/<device>.jsonl       the generated tracks: every id that was offered to a gateway
  aggregator-*.jsonl        the aggregators' file sinks (path "nats→aggregator file")
  mqtt.txt                  mosquitto_sub -v output, "topic payload" per line (path "mqtt subscriber")
  http.jsonl                the HTTP receiver's record, one request per line (path "http receiver");
                            only requests it answered 200 count

Delivery is at-least-once: duplicates are allowed and counted, never a failure. An id is out of
order when its first copy arrived after the first copy of a later id of its device (reported,
not a failure: positions re-sent after a fault may come behind newer ones). Geofence events in
the outputs are counted separately. The lost ids, as ranges per path and device, go to
WORK_DIRECTORY/lost.txt, the out-of-order ones to out_of_order.txt.
"""
import glob
import json
import os
import sys

# A line cut short by a kill -9 (of an aggregator or of the receiver) runs into the next record
# written after the restart; each record starts with one of these, so the last one on a line
# that does not parse is where the intact record begins.
RECORD_STARTS = ('{"class":', '{"n": ')


def parse_line(line):
    """The JSON object on a line, or the intact record after a cut-off prefix; None if neither."""
    line = line.strip()
    if not line:
        return None
    try:
        return json.loads(line)
    except ValueError:
        pass
    for start in RECORD_STARTS:
        i = line.rfind(start)
        if i > 0:
            try:
                return json.loads(line[i:])
            except ValueError:
                continue
    return None


class Tail:
    """Reads a growing file incrementally, complete lines only (a line being written waits)."""

    def __init__(self, path):
        self.path, self.offset, self.rest = path, 0, b""

    def new_lines(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        data = self.rest + data
        lines = data.split(b"\n")
        self.rest = lines.pop()
        return [l.decode("utf-8", "replace") for l in lines]

    def final_lines(self):
        """New lines plus an unterminated last one (read once everything stopped)."""
        lines = self.new_lines()
        if self.rest:
            lines.append(self.rest.decode("utf-8", "replace"))
            self.rest = b""
        return lines


class Output:
    """One output path: the ids of positions in arrival order, per device."""

    def __init__(self, name, paths, kind):
        self.name, self.kind = name, kind
        self.tails = [Tail(p) for p in paths]
        self.arrivals = {}      # device -> [id, ...] in arrival order
        self.events = 0
        self.unreadable = 0

    def positions_in(self, line):
        if self.kind == "mqtt":
            topic, _, payload = line.partition(" ")
            records = [parse_line(payload)]
        elif self.kind == "http":
            request = parse_line(line)
            if not isinstance(request, dict) or request.get("status") != 200:
                return []
            try:
                body = json.loads(request.get("body", ""))
            except ValueError:
                self.unreadable += 1
                return []
            records = body if isinstance(body, list) else [body]
        else:
            records = [parse_line(line)]
        out = []
        for r in records:
            if not isinstance(r, dict) or "id" not in r:
                self.unreadable += 1
                continue
            if "event" in r:
                self.events += 1
                continue
            out.append(r)
        return out

    def read(self, final=False):
        for t in self.tails:
            for line in (t.final_lines() if final else t.new_lines()):
                for p in self.positions_in(line):
                    device = p.get("device") or p["id"].rsplit(":", 1)[0]
                    self.arrivals.setdefault(device, []).append(p["id"])

    def distinct(self):
        return sum(len(set(v)) for v in self.arrivals.values())

    def total(self):
        return sum(len(v) for v in self.arrivals.values())


def outputs(work):
    return [
        Output("nats→aggregator file", sorted(glob.glob(os.path.join(work, "aggregator-*.jsonl"))), "file"),
        Output("mqtt subscriber", [os.path.join(work, "mqtt.txt")], "mqtt"),
        Output("http receiver", [os.path.join(work, "http.jsonl")], "http"),
    ]


def expected_ids(work):
    """device -> [id, ...] in generated (fix-time) order."""
    expected = {}
    for path in sorted(glob.glob(os.path.join(work, "data", "*.jsonl"))):
        with open(path) as f:
            for line in f:
                p = json.loads(line)
                expected.setdefault(p["device"], []).append(p["id"])
    return expected


def ranges(seqs):
    """[3, 4, 5, 9] -> "3-5, 9"."""
    out, start, prev = [], None, None
    for s in sorted(seqs):
        if start is None:
            start = prev = s
        elif s == prev + 1:
            prev = s
        else:
            out.append("%d" % start if start == prev else "%d-%d" % (start, prev))
            start = prev = s
    if start is not None:
        out.append("%d" % start if start == prev else "%d-%d" % (start, prev))
    return ", ".join(out)


def classify(expected, arrivals):
    """Counts for one device on one path: delivered, lost ids, extra copies, out of order."""
    order = {pid: i for i, pid in enumerate(expected)}
    seen, duplicates, out_of_order, newest, unexpected = set(), 0, [], -1, 0
    for pid in arrivals:
        if pid not in order:
            unexpected += 1
            continue
        if pid in seen:
            duplicates += 1
            continue
        seen.add(pid)
        if order[pid] < newest:
            out_of_order.append((order[pid], newest))
        newest = max(newest, order[pid])
    lost = [pid for pid in expected if pid not in seen]
    return {"expected": len(expected), "delivered": len(seen), "lost": lost, "duplicates": duplicates,
            "out_of_order": out_of_order, "unexpected": unexpected}


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    work = sys.argv[1]
    expected = expected_ids(work)
    if not expected:
        print("check: no generated tracks in %s/data" % work, file=sys.stderr)
        return 2
    rows, lost_lines, late_lines = [], [], []
    totals_all = {"expected": 0, "delivered": 0, "lost": 0, "duplicates": 0, "out_of_order": 0, "unexpected": 0}
    extras = []
    for out in outputs(work):
        out.read(final=True)
        path_total = dict.fromkeys(totals_all, 0)
        for device in sorted(expected):
            c = classify(expected[device], out.arrivals.get(device, []))
            rows.append((out.name, device, c["expected"], c["delivered"], len(c["lost"]), c["duplicates"], len(c["out_of_order"])))
            for k in path_total:
                path_total[k] += len(c[k]) if k in ("lost", "out_of_order") else c[k]
            if c["out_of_order"]:
                # Grouped by the newest seq that had already arrived: "280-329 after 419".
                groups = {}
                for seq, after in c["out_of_order"]:
                    groups.setdefault(after, []).append(seq)
                late_lines.append("%s %s: %s" % (out.name, device, "; ".join(
                    "%s after %d" % (ranges(v), k) for k, v in sorted(groups.items()))))
            if c["lost"]:
                seqs = [int(pid.rsplit(":", 1)[1]) for pid in c["lost"]]
                lost_lines.append("%s %s: %d lost, seq %s" % (out.name, device, len(seqs), ranges(seqs)))
        unknown = [d for d in out.arrivals if d not in expected]
        rows.append((out.name, "(all)", path_total["expected"], path_total["delivered"], path_total["lost"],
                     path_total["duplicates"], path_total["out_of_order"]))
        for k in totals_all:
            totals_all[k] += path_total[k]
        extras.append("%s: %d geofence event(s), %d unreadable record(s), %d id(s) not generated%s"
                      % (out.name, out.events, out.unreadable, path_total["unexpected"],
                         (", unknown devices: " + ", ".join(sorted(unknown))) if unknown else ""))
    rows.append(("TOTAL", "", totals_all["expected"], totals_all["delivered"], totals_all["lost"],
                 totals_all["duplicates"], totals_all["out_of_order"]))

    header = ("output path", "device", "expected", "delivered", "lost", "duplicates", "out of order")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    fmt = "| " + " | ".join("%-" + str(w) + "s" if i < 2 else "%" + str(w) + "s" for i, w in enumerate(widths)) + " |"
    print(fmt % header)
    print("|" + "|".join("-" * (w + 2) if i < 2 else "-" * (w + 1) + ":" for i, w in enumerate(widths)) + "|")
    for r in rows:
        print(fmt % r)
    print()
    for e in extras:
        print("  " + e)
    print("  Duplicates are allowed (at-least-once delivery: re-sends after a crash or a lost")
    print("  acknowledgement) and only counted; out of order is reported, not a failure; a lost id fails.")
    with open(os.path.join(work, "lost.txt"), "w") as f:
        f.write("".join(l + "\n" for l in lost_lines))
    with open(os.path.join(work, "out_of_order.txt"), "w") as f:
        f.write("".join(l + "\n" for l in late_lines))
    if late_lines:
        print("\nOut of order (first copies, seq ranges that arrived after a newer seq of their device):")
        for l in late_lines:
            print("  " + l)
    if totals_all["lost"]:
        print("\nLOST: %d position(s) (ids are <device>:<seq>):" % totals_all["lost"])
        for l in lost_lines:
            print("  " + l)
        return 1
    print("\nPASS: every generated position reached every output path.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

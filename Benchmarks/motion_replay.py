#!/usr/bin/env python3
"""Motion benchmark: the NMEA replay (file source at max rate -> JSON Lines file) with the
`motion` transform against the same replay without it, in the same run, on the corpus of the
replay benchmark (gen_nmea_corpus.py: 1M sentences, 1% corrupt, a drive whose speed changes
every second, so the device keeps starting and abandoning stops). Target: motion <= 1.3x.

Every figure is the median of RUNS interleaved runs, by CPU time (user + sys) of each process;
the ratio is also given paired (the median of the ratios within each round), as in
nmea_replay.py, whose helpers this uses.

usage: motion_replay.py LOCGATE_BINARY [SENTENCES]
environment: RUNS (default 5)
"""
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nmea_replay import corpus_file, count_lines, measure  # noqa: E402


def config(work, name, corpus, motion):
    """A replay configuration with `motion` (its options) or without it; returns (config, output)."""
    out = os.path.join(work, f"{name}.jsonl")
    document = {
        "settings": {"stats_interval": False},
        "sources": {"corpus": {"type": "file", "path": corpus, "rate": "max", "progress": False, "device": "van-7"}},
        "sinks": {"out": {"type": "file", "inputs": ["motion" if motion is not None else "corpus"], "path": out, "mode": "truncate"}},
    }
    if motion is not None:
        document["transforms"] = {"motion": dict({"type": "motion", "inputs": ["corpus"]}, **motion)}
    path = os.path.join(work, f"{name}.json")
    with open(path, "w") as f:
        json.dump(document, f)
    return path, out


def main():
    binary = sys.argv[1]
    sentences = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    runs = int(os.environ.get("RUNS", "5"))
    with tempfile.TemporaryDirectory(prefix="locgate-motion-bench-") as work:
        corpus = corpus_file(work, sentences)
        setups = {
            "replay": config(work, "replay", corpus, None),
            "+ motion": config(work, "motion", corpus, {}),
            # Every kind tracked: a limit the drive exceeds every few seconds, and short stops.
            "+ motion, all": config(work, "motion-all", corpus, {"speed_limit_kmh": 40, "min_stop_duration": "20s",
                                                                 "min_trip_duration": "20s", "overspeed_min_duration": "0s"}),
        }

        def run(name):
            path, out = setups[name]
            if os.path.exists(out):
                os.truncate(out, 0)
            return measure([binary, "run", path, "--log-level", "warning"])

        samples = {name: [] for name in setups}
        for r in range(runs):
            for name in (list(setups) if r % 2 == 0 else list(reversed(setups))):
                samples[name].append(run(name))
        median = {name: tuple(statistics.median(s[i] for s in rows) for i in range(3)) for name, rows in samples.items()}
        lines = {name: count_lines(out) for name, (_, out) in setups.items()}
        events = {name: count_lines(out, b'"event":{') for name, (_, out) in setups.items()}

        print(f"\ncorpus: {sentences:,} sentences; medians of {runs} interleaved runs")
        print(f"{'pipeline':<15} {'wall s':>7} {'CPU s':>7} {'peak RSS MiB':>13} {'positions':>10} {'events':>7}")
        for name, (wall, cpu, rss) in median.items():
            print(f"{name:<15} {wall:7.3f} {cpu:7.3f} {rss:13.1f} {lines[name] - events[name]:10,} {events[name]:7,}")

        def paired(a, b):
            return statistics.median(x[1] / y[1] for x, y in zip(samples[a], samples[b]))

        base = median["replay"][1]
        for name in ("+ motion", "+ motion, all"):
            print(f"ratio replay {name} / replay: CPU {median[name][1] / base:.2f}x (paired {paired(name, 'replay'):.2f}x; target <= 1.3)")


if __name__ == "__main__":
    main()

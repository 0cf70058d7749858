#!/usr/bin/env python3
"""NMEA replay benchmark: locgate (file source at max rate → JSON Lines file) beside gpsd's
gpsdecode on the same corpus, and `wc -l` as the floor. Prints sentences/s, MB/s, peak RSS
and ratios; runs a second, 4x larger corpus to show whether memory stays flat.

usage: nmea_replay.py LOCGATE_BINARY [SENTENCES]
"""
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(argv, stdin=None, stdout=None):
    """Runs a command; returns (seconds, peak RSS in MiB, exit status)."""
    start = time.perf_counter()
    p = subprocess.Popen(argv, stdin=stdin, stdout=stdout or subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    elapsed = time.perf_counter() - start
    err = p.stderr.read().decode(errors="replace")
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"{argv[0]} failed ({p.returncode}):\n{err}")
    return elapsed, usage.ru_maxrss / 1024, err


def run(binary, sentences, work):
    corpus = os.path.join(work, f"corpus-{sentences}.nmea")
    if not os.path.exists(corpus):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_nmea_corpus.py"), corpus, str(sentences), "0.01", "42"], check=True)
    size = os.path.getsize(corpus)
    out = os.path.join(work, "out.jsonl")
    config = os.path.join(work, "bench.json")
    with open(config, "w") as f:
        json.dump({
            "settings": {"stats_interval": False},
            "sources": {"corpus": {"type": "file", "path": corpus, "rate": "max", "progress": False}},
            "sinks": {"out": {"type": "file", "inputs": ["corpus"], "path": out, "mode": "truncate"}},
        }, f)
    results = {}
    results["locgate"] = measure([binary, "run", config, "--log-level", "warning"])
    with open(out) as f:
        positions = sum(1 for _ in f)
    with open(corpus, "rb") as src, open(os.path.join(work, "gpsdecode.out"), "wb") as dst:
        results["gpsdecode"] = measure(["gpsdecode"], stdin=src, stdout=dst)
    with open(os.path.join(work, "gpsdecode.out"), "rb") as f:
        gpsd_tpv = sum(1 for line in f if b'"class":"TPV"' in line)
    with open(corpus, "rb") as src:
        results["wc -l"] = measure(["wc", "-l"], stdin=src)
    mb = size / 1e6
    print(f"\ncorpus: {sentences:,} sentences, {mb:.1f} MB; locgate wrote {positions:,} positions, gpsdecode {gpsd_tpv:,} TPV reports")
    print(f"{'tool':<10} {'seconds':>8} {'sentences/s':>14} {'MB/s':>8} {'peak RSS MiB':>13}")
    for name, (secs, rss, _) in results.items():
        print(f"{name:<10} {secs:8.3f} {sentences / secs:14,.0f} {mb / secs:8.1f} {rss:13.1f}")
    lg, gd, wc = results["locgate"][0], results["gpsdecode"][0], results["wc -l"][0]
    print(f"ratio: locgate is {gd / lg:.1f}x faster than gpsdecode; wc -l is {lg / wc:.1f}x faster than locgate")
    return results["locgate"][1]


def main():
    binary = sys.argv[1]
    sentences = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    with tempfile.TemporaryDirectory(prefix="locgate-bench-") as work:
        rss_small = run(binary, sentences, work)
        rss_large = run(binary, sentences * 4, work)
        print(f"\nmemory: peak RSS {rss_small:.1f} MiB at {sentences:,} sentences, {rss_large:.1f} MiB at {sentences * 4:,} "
              f"({'flat' if rss_large < rss_small * 1.25 + 2 else 'GROWS'})")


if __name__ == "__main__":
    main()

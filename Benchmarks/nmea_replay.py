#!/usr/bin/env python3
"""NMEA replay benchmark: locgate (file source at max rate → JSON Lines file) beside gpsd's
gpsdecode and a C checksum-only scan (nmea_checksum_scan.c, the floor) on the same corpus;
the same replay through four light transforms (quality_filter, coordinates to GCJ-02,
geofence annotate with one fence, set); the same four-transform replay into a durable http sink
(a minimal receiver, minimal_receiver.py) beside the file sink, compared by the CPU time of the
pipeline's thread, where the source and the transforms run (the durable queue must not slow
them: target within 10%); and peak RSS on a corpus 8x larger.

The machine may be shared, so every figure is the median of RUNS interleaved runs and the
ratios use CPU time (user + sys) of each process, not wall time. Noise on a shared machine comes
in phases that last longer than one round: each ratio is also printed paired, as the median of
the ratios within each round (the runs of one round are adjacent in time).

usage: nmea_replay.py LOCGATE_BINARY [SENTENCES]
environment: RUNS (default 5), LARGE (corpus multiplier for the memory check, default 8; 0 skips it)
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RSS_LIMIT_MIB = 40


def measure(argv, stdin=None, stdout=None):
    """Runs a command; returns (wall seconds, CPU seconds, peak RSS in MiB)."""
    start = time.perf_counter()
    p = subprocess.Popen(argv, stdin=stdin, stdout=stdout or subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    elapsed = time.perf_counter() - start
    err = p.stderr.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{argv[0]} failed ({code}):\n{err}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def measure_threads(argv):
    """Runs a command; returns (wall seconds, CPU seconds, peak RSS in MiB, CPU seconds of the
    pipeline's thread). That thread is named "locgate" (PipelineThreads), as is the main thread,
    and threads started from it inherit the name (libcurl's): it is the first one after the main
    thread. Its CPU time (schedstat, nanoseconds) is polled every 2 ms while the process runs; a
    thread's time after the last poll is lost (at most 2 ms)."""
    start = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = {}
    while True:
        try:
            tids = os.listdir(f"/proc/{p.pid}/task")
        except OSError:
            tids = []
        for tid in tids:
            try:
                with open(f"/proc/{p.pid}/task/{tid}/comm") as f:
                    comm = f.read().strip()
                with open(f"/proc/{p.pid}/task/{tid}/schedstat") as f:
                    ns = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            seen[int(tid)] = (comm, ns)
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid != 0:
            break
        time.sleep(0.002)
    elapsed = time.perf_counter() - start
    err = p.stderr.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"{argv[0]} failed ({code}):\n{err}")
    pipeline = [ns for tid, (comm, ns) in sorted(seen.items()) if comm == "locgate" and tid != p.pid]
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, (pipeline[0] / 1e9 if pipeline else float("nan"))


def start_receiver(work):
    """The minimal HTTP receiver (answers 200 to every request); returns (process, port)."""
    r = subprocess.Popen([sys.executable, os.path.join(HERE, "minimal_receiver.py"), os.path.join(work, "received.count")],
                         stdout=subprocess.PIPE)
    port = int(re.match(rb"PORT (\d+)", r.stdout.readline()).group(1))
    return r, port


def corpus_file(work, sentences):
    corpus = os.path.join(work, f"corpus-{sentences}.nmea")
    if not os.path.exists(corpus):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_nmea_corpus.py"), corpus, str(sentences), "0.01", "42"], check=True)
    return corpus


def config(work, name, corpus, transforms, state=None, http_port=None):
    """Writes a replay configuration; returns (config path, output path). With `state` (True or
    False) the transforms keep per-device state (geofence events, a distance filter) and the
    state store is on (an SQLite file) or off ("state": null). With `http_port` the sink is a
    durable http sink to that port instead of the file."""
    out = os.path.join(work, f"{name}.jsonl")
    sinks_input = ["corpus"]
    pipeline = {}
    if transforms:
        # The corpus starts at 31.2304 N 121.4737 E (Shanghai) and wanders: the fence (GCJ-02, like
        # the positions it tests) holds the start.
        fence = {"type": "FeatureCollection", "features": [{
            "type": "Feature", "properties": {"id": "depot", "name": "Depot"},
            "geometry": {"type": "Polygon", "coordinates": [[[121.46, 31.22], [121.49, 31.22], [121.49, 31.245], [121.46, 31.245], [121.46, 31.22]]]},
        }]}
        pipeline = {
            "quality": {"type": "quality_filter", "inputs": ["corpus"], "min_mode": "2d"},
            "gcj": {"type": "coordinates", "inputs": ["quality"], "to": "gcj02"},
            "fences": {"type": "geofence", "inputs": ["gcj"], "fences": fence, "fence_datum": "gcj02", "action": "annotate"},
            "tags": {"type": "set", "inputs": ["fences"], "device": "unit-1", "attributes": {"fleet": "north"}},
        }
        sinks_input = ["tags"]
        if state is not None:
            pipeline["fences"]["events"] = ["enter", "exit"]
            pipeline["moved"] = {"type": "distance_filter", "inputs": ["tags"], "min_distance_m": 1, "gap": "1h"}
            sinks_input = ["moved"]
    settings = {"stats_interval": False}
    if state is not None:
        settings["state"] = {"path": state_store(work)} if state else None
    sink = {"type": "file", "inputs": sinks_input, "path": out, "mode": "truncate"}
    if http_port is not None:
        settings["shutdown_timeout"] = "600s"
        sink = {"type": "http", "inputs": sinks_input, "url": f"http://127.0.0.1:{http_port}/track",
                "batch": {"max_positions": 500, "interval": "1s"}, "queue": {"path": http_queue(work)}}
    document = {
        "settings": settings,
        "sources": {"corpus": {"type": "file", "path": corpus, "rate": "max", "progress": False}},
        "sinks": {"out": sink},
    }
    if pipeline:
        document["transforms"] = pipeline
    path = os.path.join(work, f"{name}.json")
    with open(path, "w") as f:
        json.dump(document, f)
    return path, out


def state_store(work):
    return os.path.join(work, "state.sqlite")


def http_queue(work):
    return os.path.join(work, "http-queue.sqlite")


def forget_http_queue(work):
    """Each run starts with an empty queue (a run ends with it empty; a failed one would not)."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(http_queue(work) + suffix):
            os.remove(http_queue(work) + suffix)


def forget_state(work):
    """Each run starts without saved state, or the replay would find every fix older than the
    device's newest (late) after the first run."""
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(state_store(work) + suffix):
            os.remove(state_store(work) + suffix)


def count_lines(path, needle=None):
    with open(path, "rb") as f:
        return sum(1 for line in f if needle is None or needle in line)


def main():
    binary = sys.argv[1]
    sentences = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    runs = int(os.environ.get("RUNS", "5"))
    large = int(os.environ.get("LARGE", "8"))
    with tempfile.TemporaryDirectory(prefix="locgate-bench-") as work:
        receiver, port = start_receiver(work)
        try:
            run_all(work, binary, sentences, runs, large, port)
        finally:
            receiver.kill()
            receiver.wait()


def run_all(work, binary, sentences, runs, large, port):
    scan = os.path.join(work, "nmea_checksum_scan")
    subprocess.run(["cc", "-O2", "-o", scan, os.path.join(HERE, "nmea_checksum_scan.c")], check=True)
    corpus = corpus_file(work, sentences)
    bare, bare_out = config(work, "replay", corpus, transforms=False)
    four, four_out = config(work, "transforms", corpus, transforms=True)
    http, http_out = config(work, "transforms-http", corpus, transforms=True, http_port=port)
    kept, kept_out = config(work, "state-on", corpus, transforms=True, state=True)
    memory, memory_out = config(work, "state-off", corpus, transforms=True, state=False)
    gpsd_out = os.path.join(work, "gpsdecode.out")

    def gpsdecode():
        with open(corpus, "rb") as src, open(gpsd_out, "wb") as dst:
            return measure(["gpsdecode"], stdin=src, stdout=dst)

    def locgate(config, out, threads=False):
        # Emptied here, as gpsdecode's output is (by the redirection, in this process): the
        # kernel's freeing of the last run's pages is not the tool's work.
        if os.path.exists(out):
            os.truncate(out, 0)
        argv = [binary, "run", config, "--log-level", "warning"]
        return measure_threads(argv) if threads else measure(argv)

    tools = {
        "replay": lambda: locgate(bare, bare_out),
        "4 transforms": lambda: locgate(four, four_out, threads=True),
        "4 → http": lambda: (forget_http_queue(work), locgate(http, http_out, threads=True))[1],
        "state on": lambda: (forget_state(work), locgate(kept, kept_out))[1],
        "state off": lambda: locgate(memory, memory_out),
        "gpsdecode": gpsdecode,
        "C scan": lambda: measure([scan, corpus]),
    }
    samples = {name: [] for name in tools}
    for r in range(runs):
        # Alternating order: a tool does not always follow the same one.
        for name, tool in (tools.items() if r % 2 == 0 else reversed(tools.items())):
            samples[name].append(tool())
    median = {name: tuple(statistics.median(s[i] for s in rows) for i in range(3)) for name, rows in samples.items()}

    mb = os.path.getsize(corpus) / 1e6
    tpv = count_lines(gpsd_out, b'"class":"TPV"')
    print(f"\ncorpus: {sentences:,} sentences, {mb:.1f} MB; replay wrote {count_lines(bare_out):,} positions, "
          f"4 transforms {count_lines(four_out):,}, gpsdecode {tpv:,} TPV reports")
    print(f"medians of {runs} interleaved runs")
    print(f"{'tool':<13} {'wall s':>7} {'CPU s':>7} {'sentences/CPU s':>16} {'peak RSS MiB':>13}")
    for name, (wall, cpu, rss) in median.items():
        print(f"{name:<13} {wall:7.3f} {cpu:7.3f} {sentences / cpu:16,.0f} {rss:13.1f}")
    replay, four_t, gpsd, floor = (median[n][1] for n in ("replay", "4 transforms", "gpsdecode", "C scan"))

    def paired(a, b):
        """Median over rounds of CPU(a) / CPU(b)."""
        return statistics.median(x[1] / y[1] for x, y in zip(samples[a], samples[b]))

    print(f"ratio replay: gpsdecode CPU / locgate CPU = {gpsd / replay:.1f}x (paired {paired('gpsdecode', 'replay'):.1f}x; target >= 25); "
          f"locgate CPU / C scan CPU = {replay / floor:.1f}x (paired {paired('replay', 'C scan'):.1f}x; target <= 4)")
    print(f"ratio 4 transforms: CPU / bare replay CPU = {four_t / replay:.2f}x (paired {paired('4 transforms', 'replay'):.2f}x; target <= 1.3)")
    with open(os.path.join(work, "received.count")) as f:
        received = int(f.read())
    if received != runs * count_lines(four_out):
        sys.exit(f"the http receiver got {received:,} positions, expected {runs} x {count_lines(four_out):,}")
    file_thread = [x[3] for x in samples["4 transforms"]]
    http_thread = [x[3] for x in samples["4 → http"]]
    pairs = [h / f for h, f in zip(http_thread, file_thread)]
    print(f"ratio 4 transforms into a durable http sink / into a file sink, CPU of the pipeline's thread (source and transforms): "
          f"paired median {statistics.median(pairs):.2f}x, range {min(pairs):.2f} - {max(pairs):.2f} (target <= 1.1); "
          f"thread CPU s http {', '.join(f'{x:.3f}' for x in http_thread)}; file {', '.join(f'{x:.3f}' for x in file_thread)}; "
          f"whole process CPU {median['4 → http'][1]:.2f} s / {median['4 transforms'][1]:.2f} s")
    on, off = median["state on"][1], median["state off"][1]
    print(f"ratio stateful transforms (geofence events + distance filter), state store on / off: CPU {on / off:.2f}x "
          f"(paired {paired('state on', 'state off'):.2f}x; target <= 1.1); outputs {count_lines(kept_out):,} / {count_lines(memory_out):,} positions")

    if large > 0:
        big = corpus_file(work, sentences * large)
        big_config, _ = config(work, "replay-large", big, transforms=False)
        rss_small = max(s[2] for s in samples["replay"])
        _, cpu_big, rss_big = measure([binary, "run", big_config, "--log-level", "warning"])
        os.remove(big)
        verdict = "flat" if rss_big < RSS_LIMIT_MIB and rss_big < rss_small * 1.25 + 2 else "GROWS"
        print(f"ratio memory: peak RSS {rss_small:.1f} MiB at {sentences:,} sentences, {rss_big:.1f} MiB at "
              f"{sentences * large:,} = {rss_big / rss_small:.2f}x ({verdict}; limit {RSS_LIMIT_MIB} MiB); "
              f"CPU {cpu_big:.2f} s = {cpu_big / replay:.1f}x the {sentences:,} run")


if __name__ == "__main__":
    main()

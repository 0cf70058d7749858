#!/usr/bin/env python3
"""RTCM corrections at the serial port: how long after an NTRIP caster sends a frame it reaches
the receiver's port, through `locgate run` (a `serial` source with `corrections`) while the same
port delivers NAV-PVT at 10 Hz, beside RTKLIB's str2str relaying the same caster to a port.

One pass per tool, one after the other, each on fresh pieces:

- a socat pty pair: the tool opens one end as its serial port, this script holds the other raw
  (it is the receiver);
- an NTRIP 1 caster on 127.0.0.1 (this script): reads the request, answers `ICY 200 OK`, then
  sends the RTCM 3 frames of a real base-station log in bursts, one base epoch per burst (every
  frame up to the MSM whose multiple-message bit is clear) every INTERVAL, the log looped, each
  frame in its own send with its monotonic send time recorded; the first burst goes a second
  after the answer (and, for locgate, once its first position is out), so start-up is not measured;
- the receiver: NAV-PVT frames at 10 Hz into its end (locgate's pass only: str2str does not read
  its output port), and every byte the tool writes to the port read back, framed as RTCM 3
  (0xD3, 10-bit length, CRC-24Q) and stamped on arrival.

Everything runs in one thread around poll(), so a stamp is taken as soon as the bytes are
there; the caster's stamps and the receiver's are on one clock. Both tools pay the same socat hop.

Printed per tool: frames sent and arrived, whether the bytes at the port are exactly the
caster's frames in order with nothing foreign, caster send -> port arrival p50/p99/max; for
locgate the NAV-PVT frames written and positions decoded (each epoch once, by time and
latitude); then the ratios locgate / str2str. Exit 1 when a frame is lost, altered or foreign,
a position is missing, or a tool fails; latency is printed, never asserted.

usage: rtcm_port.py LOCGATE_BINARY PTYSHIM_SO [SECONDS]
environment: INTERVAL (seconds between bursts, default 0.1; 1 is a 1 Hz base station),
             RTCM_LOG (default Tests/ReceiverStreamTests/Fixtures/rtcm/rtcm3.2.log)
"""
import datetime
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGET_P99_MS = 20.0
# Time for the last frames and positions to come through once the caster stops.
DRAIN_SECONDS = 5.0
# A tool that has not opened its port or connected by then has failed.
START_SECONDS = 20.0
# The first burst waits this long after the caster's answer: start-up is not what is measured
# (str2str takes its first bytes about 300 ms after the answer, then relays within its cycle).
SETTLE_SECONDS = 1.0


# MARK: - RTCM 3

def _crc24q_table():
    table = []
    for i in range(256):
        c = i << 16
        for _ in range(8):
            c <<= 1
            if c & 0x1000000:
                c ^= 0x1864CFB
        table.append(c & 0xFFFFFF)
    return table


CRC24Q = _crc24q_table()


def crc24q(data):
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFFFF) ^ CRC24Q[(crc >> 16) ^ b]
    return crc


class RTCMFramer:
    """Whole RTCM 3 frames out of a byte stream; any byte that does not start a frame with a
    good CRC is counted as foreign and skipped, so one stray byte cannot hide the frames after it."""

    def __init__(self):
        self.buffer = bytearray()
        self.foreign = 0

    def feed(self, data):
        self.buffer += data
        frames = []
        b = self.buffer
        i = 0
        while len(b) - i >= 3:
            if b[i] != 0xD3 or b[i + 1] & 0xFC:
                self.foreign += 1
                i += 1
                continue
            total = 3 + (((b[i + 1] & 0x03) << 8) | b[i + 2]) + 3
            if len(b) - i < total:
                break
            frame = bytes(b[i:i + total])
            if crc24q(frame[:-3]) != int.from_bytes(frame[-3:], "big"):
                self.foreign += 1
                i += 1
                continue
            frames.append(frame)
            i += total
        del b[:i]
        return frames


def bits(payload, start, count):
    value = 0
    for k in range(start, start + count):
        value = (value << 1) | ((payload[k // 8] >> (7 - k % 8)) & 1)
    return value


def base_epochs(frames):
    """The frames grouped as a base station sends them: an epoch ends with the observations
    whose multiple-message (synchronous GNSS) bit is clear — after type 12, station 12 and epoch
    time 30 bits in an MSM (1071-1137) or GPS 1001-1004, 27 bits in GLONASS 1009-1012; what comes
    between epochs (ephemerides, station data) goes with the next one."""
    epochs, current = [], []
    for f in frames:
        current.append(f)
        payload = f[3:-3]
        kind = bits(payload, 0, 12) if len(payload) >= 2 else 0
        flag = 54 if 1071 <= kind <= 1137 or 1001 <= kind <= 1004 else 51 if 1009 <= kind <= 1012 else None
        if flag is not None and len(payload) * 8 > flag and bits(payload, flag, 1) == 0:
            epochs.append(current)
            current = []
    if current:
        epochs.append(current)
    return epochs


# MARK: - The receiver's NAV-PVT

UNIX_TO_GPS_MS = 315_964_800_000
GPS_LEAP_MS = 18_000
LAT0, LON0 = 482_000_000, 163_700_000  # 1e-7 degrees


def nav_pvt(unix_ms, index):
    """A UBX NAV-PVT for an epoch: time valid and fully resolved, 3D fix with gnssFixOK, 20
    satellites, the latitude growing by 1e-7 degrees per epoch so each position is known."""
    t = datetime.datetime.fromtimestamp(unix_ms / 1000, datetime.timezone.utc)
    itow = (unix_ms - UNIX_TO_GPS_MS + GPS_LEAP_MS) % 604_800_000
    p = bytearray(92)
    struct.pack_into("<IHBBBBBB", p, 0, itow, t.year, t.month, t.day, t.hour, t.minute, t.second, 0x07)
    struct.pack_into("<i", p, 16, (unix_ms % 1000) * 1_000_000)
    p[20] = 3          # fixType 3D
    p[21] = 0x01       # gnssFixOK
    p[23] = 20         # numSV
    struct.pack_into("<iiii", p, 24, LON0, LAT0 + index, 225_000, 180_000)
    struct.pack_into("<II", p, 40, 20, 30)  # hAcc, vAcc mm
    struct.pack_into("<H", p, 76, 120)      # pDOP 1.20
    body = bytes([0x01, 0x07]) + struct.pack("<H", len(p)) + bytes(p)
    a = b = 0
    for x in body:
        a = (a + x) & 0xFF
        b = (b + a) & 0xFF
    return b"\xb5\x62" + body + bytes([a, b])


def iso_ms(unix_ms):
    t = datetime.datetime.fromtimestamp(unix_ms / 1000, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{unix_ms % 1000:03d}Z"


# MARK: - Processes and pieces

class Children:
    """Every process started here, ended at exit whatever happens (SIGINT, then SIGKILL)."""

    def __init__(self):
        self.processes = []

    def start(self, argv, **kwargs):
        p = subprocess.Popen(argv, **kwargs)
        self.processes.append(p)
        return p

    def stop(self, p, grace=5.0):
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def stop_all(self):
        for p in reversed(self.processes):
            if p.poll() is None:
                p.kill()
                p.wait()


def wait_for(condition, seconds, step=0.02):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


class PtyPair:
    """socat's two ptys: `port` for the tool, `receiver` opened here raw and non-blocking."""

    def __init__(self, children, directory):
        self.port = os.path.join(directory, "ttyGNSS")
        self.receiver = os.path.join(directory, "receiver")
        self.process = children.start(
            ["socat", f"pty,raw,echo=0,link={self.receiver}", f"pty,raw,echo=0,link={self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not wait_for(lambda: os.path.exists(self.receiver) and os.path.exists(self.port), 10):
            raise Failure("socat did not create the pty pair")
        self.fd = os.open(self.receiver, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)

    def close(self):
        os.close(self.fd)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class Failure(Exception):
    pass


def free_listener():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    return s


# MARK: - One pass

class Pass:
    """One tool between the caster and the receiver, driven by one poll loop."""

    def __init__(self, name, bursts, seconds, interval, navpvt):
        self.name = name
        self.bursts = bursts
        self.seconds = seconds
        self.interval = interval
        self.navpvt = navpvt
        self.sent = []         # (frame, monotonic ns of its send)
        self.arrived = []      # (frame, monotonic ns of its arrival)
        self.framer = RTCMFramer()
        self.port_bytes = 0
        self.connections = 0
        self.epochs_written = []  # (unix ms, index) of every NAV-PVT written whole
        self.notes = []

    def run(self, pty, listener, tool, port_open, ready):
        """Serves the caster, writes NAV-PVT once `port_open()`, starts the bursts once `ready()`."""
        conn = None
        request = b""
        answered = None        # when the caster answered
        burst_start = None
        next_burst = 0
        burst_index = 0
        out = bytearray()      # NAV-PVT bytes not yet taken by the pty
        out_epochs = []        # (end offset in `out`, unix ms, index)
        pvt_start = None
        pvt_index = 0
        start_deadline = time.monotonic() + START_SECONDS
        drain_deadline = None
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        poller.register(pty.fd, select.POLLIN)
        while True:
            now = time.monotonic()
            if tool.poll() is not None:
                raise Failure(f"{self.name} exited ({tool.returncode}) during the run")
            if burst_start is None and now > start_deadline:
                raise Failure(f"{self.name} was not ready after {START_SECONDS:.0f} s "
                              f"(connected: {conn is not None}, port open: {port_open()})")
            if self.navpvt and pvt_start is None and port_open():
                # The receiver starts talking once the port is open: earlier bytes could be
                # flushed by the open and would count as lost positions.
                pvt_start = now
                first_ms = (int(time.time() * 1000) // 100 + 1) * 100
            if burst_start is None and answered is not None and now - answered >= SETTLE_SECONDS and ready():
                burst_start = now
                next_burst = now
            sending = burst_start is not None and now - burst_start < self.seconds
            if burst_start is not None and not sending and drain_deadline is None:
                drain_deadline = now + DRAIN_SECONDS
            if drain_deadline is not None:
                sent_bytes = sum(len(f) for f, _ in self.sent)
                if (self.port_bytes >= sent_bytes and not out) or now > drain_deadline:
                    break
            # NAV-PVT every 100 ms on the receiver's own schedule, while corrections flow and before.
            if pvt_start is not None and drain_deadline is None and now >= pvt_start + pvt_index * 0.1:
                unix_ms = first_ms + pvt_index * 100
                out += nav_pvt(unix_ms, pvt_index)
                out_epochs.append((len(out), unix_ms, pvt_index))
                pvt_index += 1
            if out:
                try:
                    n = os.write(pty.fd, out)
                except BlockingIOError:
                    n = 0
                del out[:n]
                done = 0
                for k, (end, unix_ms, index) in enumerate(out_epochs):
                    if end <= n:
                        self.epochs_written.append((unix_ms, index))
                        done = k + 1
                    else:
                        break
                out_epochs = [(end - n, ms, index) for end, ms, index in out_epochs[done:]]
            if sending and conn is not None and now >= next_burst:
                for frame in self.bursts[burst_index % len(self.bursts)]:
                    self.sent.append((frame, time.monotonic_ns()))
                    conn.sendall(frame)
                burst_index += 1
                next_burst += self.interval
            # Sleep until the next thing due, at most 10 ms (readiness checks look at files).
            due = [now + 0.01]
            if pvt_start is not None and drain_deadline is None:
                due.append(pvt_start + pvt_index * 0.1)
            if sending:
                due.append(next_burst)
            poller.modify(pty.fd, select.POLLIN | (select.POLLOUT if out else 0))
            for fd, events in poller.poll(max(0, int((min(due) - time.monotonic()) * 1000))):
                if fd == listener.fileno():
                    c, _ = listener.accept()
                    self.connections += 1
                    if conn is not None:
                        self.notes.append(f"{self.name} connected again (connection {self.connections}): frames sent on the old one are lost")
                        poller.unregister(conn)
                        conn.close()
                    conn = c
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    poller.register(conn, select.POLLIN)
                    request, answered = b"", None
                elif conn is not None and fd == conn.fileno():
                    data = conn.recv(4096)
                    if not data:
                        self.notes.append(f"{self.name} closed its caster connection during the run")
                        poller.unregister(conn)
                        conn.close()
                        conn = None
                        continue
                    if answered is None:
                        request += data
                        if b"\r\n\r\n" in request:
                            conn.sendall(b"ICY 200 OK\r\n")
                            answered = time.monotonic()
                elif fd == pty.fd and events & select.POLLIN:
                    try:
                        data = os.read(pty.fd, 65536)
                    except BlockingIOError:
                        continue
                    stamp = time.monotonic_ns()
                    self.port_bytes += len(data)
                    self.arrived += [(f, stamp) for f in self.framer.feed(data)]
        if conn is not None:
            conn.close()

    def report(self):
        """Prints the pass's figures; returns (latencies sorted in ms, problems)."""
        problems = list(self.notes)
        sent = [f for f, _ in self.sent]
        arrived = [f for f, _ in self.arrived]
        exact = arrived == sent and self.framer.foreign == 0 and not self.framer.buffer
        if not exact:
            first_bad = next((i for i, (a, s) in enumerate(zip(arrived, sent)) if a != s), min(len(arrived), len(sent)))
            problems.append(f"{self.name}: the port's bytes are not the caster's frames: {len(arrived)} of {len(sent)} frames arrived, "
                            f"first difference at frame {first_bad}, {self.framer.foreign} foreign byte(s), "
                            f"{len(self.framer.buffer)} byte(s) of an unfinished frame")
        latencies = sorted((t1 - t0) / 1e6 for (_, t0), (_, t1) in zip(self.sent, self.arrived))
        print(f"{self.name}: frames sent {len(sent)}, arrived {len(arrived)} ({self.port_bytes} bytes at the port); "
              f"exactly the caster's frames, in order, nothing foreign: {'yes' if exact else 'NO'}")
        if latencies:
            print(f"  caster send -> port arrival: p50 {percentile(latencies, 50):.2f} ms, p99 {percentile(latencies, 99):.2f} ms, "
                  f"max {latencies[-1]:.2f} ms")
        return latencies, problems


def percentile(sorted_values, p):
    """Nearest rank: the smallest value at or above p percent of them."""
    k = max(0, -(-len(sorted_values) * p // 100) - 1)
    return sorted_values[int(k)]


def read_positions(path):
    """(time, latitude in 1e-7 degrees) of each position in a JSON Lines file."""
    out = []
    try:
        with open(path) as f:
            for line in f:
                try:
                    o = json.loads(line)
                    out.append((o.get("time"), round(o.get("lat", 0) * 1e7)))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


# MARK: - The two tools

def locgate_pass(children, locgate, shim, bursts, seconds, interval, scratch):
    directory = tempfile.mkdtemp(dir=scratch, prefix="locgate-")
    pty = PtyPair(children, directory)
    listener = free_listener()
    out = os.path.join(directory, "positions.jsonl")
    log = os.path.join(directory, "locgate.log")
    config = {
        "sources": {"rx": {
            "type": "serial", "port": pty.port, "baud": 115200,
            "corrections": {"url": f"ntrip://bench:bench@127.0.0.1:{listener.getsockname()[1]}/BENCH", "version": 1, "gga": "never"},
        }},
        "sinks": {"out": {"type": "file", "inputs": ["rx"], "path": out}},
    }
    path = os.path.join(directory, "pipeline.json")
    with open(path, "w") as f:
        json.dump(config, f)
    env = dict(os.environ, LD_PRELOAD=shim)
    with open(log, "w") as err:
        tool = children.start([locgate, "run", path, "--log-level", "info"], env=env, stdout=subprocess.DEVNULL, stderr=err)

    def port_open():
        try:
            with open(log) as f:
                return "opened " in f.read()
        except OSError:
            return False

    # Frames queued before the read loop runs are dropped as stale (the queue is cleared at each
    # open): the caster starts once the first position is out, when the loop is surely running.
    def ready():
        return os.path.exists(out) and os.path.getsize(out) > 0

    run = Pass("locgate", bursts, seconds, interval, navpvt=True)
    try:
        run.run(pty, listener, tool, port_open, ready)
        # The last epoch leaves the decoder at its idle flush.
        expected = run.epochs_written
        wait_for(lambda: len(read_positions(out)) >= len(expected), DRAIN_SECONDS, 0.05)
    finally:
        code = children.stop(tool)
        listener.close()
        pty.close()
    latencies, problems = run.report()
    positions = read_positions(out)
    wanted = {(iso_ms(ms), LAT0 + index) for ms, index in expected}
    got = set(positions)
    complete = got == wanted and len(positions) == len(expected)
    print(f"  NAV-PVT written {len(expected)}, positions decoded {len(positions)}: {'complete' if complete else 'NOT complete'}")
    if not complete:
        problems.append(f"locgate: {len(wanted - got)} written epoch(s) missing, {len(got - wanted)} position(s) not written, "
                        f"{len(positions) - len(got)} repeated (log: {log})")
    if code not in (0, None):
        problems.append(f"locgate exited with {code} at shutdown (log: {log})")
    if problems:
        with open(log) as f:
            tail = f.read().splitlines()[-20:]
        print("  locgate's last log lines:\n    " + "\n    ".join(tail))
    return latencies, problems


def str2str_pass(children, bursts, seconds, interval, scratch):
    directory = tempfile.mkdtemp(dir=scratch, prefix="str2str-")
    pty = PtyPair(children, directory)
    listener = free_listener()
    # RTKLIB opens "/dev/" + the port it is given, so it gets the pty itself, not socat's link.
    device = os.path.relpath(os.path.realpath(pty.port), "/dev")
    log = os.path.join(directory, "str2str.log")
    with open(log, "w") as err:
        tool = children.start(["str2str", "-in", f"ntrip://bench:bench@127.0.0.1:{listener.getsockname()[1]}/BENCH",
                               "-out", f"serial://{device}:115200"], stdout=subprocess.DEVNULL, stderr=err, cwd=directory)
    # str2str opens its output ports before it connects: once it asked for the mountpoint, both ends are up.
    run = Pass("str2str", bursts, seconds, interval, navpvt=False)
    try:
        run.run(pty, listener, tool, lambda: True, lambda: True)
    finally:
        children.stop(tool)
        listener.close()
        pty.close()
    latencies, problems = run.report()
    if problems:
        with open(log) as f:
            print("  str2str's last log lines:\n    " + "\n    ".join(f.read().splitlines()[-10:]))
    return latencies, problems


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    locgate, shim = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 20.0
    interval = float(os.environ.get("INTERVAL", "0.1"))
    log_path = os.environ.get("RTCM_LOG", os.path.join(ROOT, "Tests/ReceiverStreamTests/Fixtures/rtcm/rtcm3.2.log"))
    for tool in ("socat", "str2str"):
        if shutil.which(tool) is None:
            sys.exit(f"rtcm_port: {tool} is missing (make deps installs socat and rtklib)")
    with open(log_path, "rb") as f:
        framer = RTCMFramer()
        frames = framer.feed(f.read())
    bursts = base_epochs(frames)
    sizes = sorted(len(b) for b in bursts)
    print(f"rtcm_port: {seconds:g} s per tool; {os.path.basename(log_path)}: {len(frames)} frames in {len(bursts)} base epochs "
          f"({sizes[0]}-{sizes[-1]} frames, {framer.foreign} junk bytes skipped), one epoch per burst every "
          f"{interval * 1000:g} ms, looped; NAV-PVT at 10 Hz on locgate's port")

    children = Children()
    scratch = tempfile.mkdtemp(prefix="locgate-rtcm-port-")

    def end(signum, frame):
        raise SystemExit(128 + signum)

    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, end)
    problems = []
    try:
        ours, p = locgate_pass(children, locgate, shim, bursts, seconds, interval, scratch)
        problems += p
        reference, p = str2str_pass(children, bursts, seconds, interval, scratch)
        problems += p
    except Failure as e:
        problems.append(str(e))
        ours = reference = []
    finally:
        children.stop_all()
        if not problems:
            shutil.rmtree(scratch, ignore_errors=True)
    if ours and reference:
        print(f"ratio locgate / str2str: p50 {percentile(ours, 50) / percentile(reference, 50):.2f}, "
              f"p99 {percentile(ours, 99) / percentile(reference, 99):.2f}")
    if ours:
        p99 = percentile(ours, 99)
        print(f"target: locgate p99 <= {TARGET_P99_MS:g} ms: {'met' if p99 <= TARGET_P99_MS else 'NOT met'} ({p99:.2f} ms)")
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems) + f"\n  (files kept in {scratch})")
        sys.exit(1)


if __name__ == "__main__":
    main()

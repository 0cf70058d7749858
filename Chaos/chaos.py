#!/usr/bin/env python3
"""The chaos run (`make chaos`): the fleet topology of Docs/examples/fleet under rolling faults,
then a check that no position was lost on any output path.

Usage: Chaos/chaos.py [LOCGATE_BINARY]
  Without a binary it builds one (swift build -c release --static-swift-stdlib --product locgate).
Environment:
  CHAOS_SECONDS  length of the run, faults and drain included (default 180; the setup adds a few seconds)
  CHAOS_SEED     seed of the fault schedule (default 1): the same seed, the same schedule
  CHAOS_RATE     replay speed of the gateways (default 20, i.e. "20x")
  CHAOS_WORK     a directory to use and keep (default a temporary one, removed after a pass and
                 kept after a failure, as evidence)

Everything runs on 127.0.0.1, on free ports, from a temporary directory: a 3-node nats-server
JetStream cluster with the partition mapping, mosquitto with persistence, a persistent
mosquitto_sub, the HTTP test receiver (Tests/HTTPOutputTests/Support/receiver.py), two gateways
and two aggregators. gateway-a replays four devices' seeded tracks from files; gateway-b's four
devices are phones (phones.py) posting to its http_server source and keeping each position
until it was answered. Both publish through a nats sink and an mqtt sink (QoS 1), each with a
durable queue. Each aggregator reads two of the four partitions through durable consumers, runs
a geofence with enter/exit events and writes to a file sink and to an http sink with a durable
queue. Faults roll through the run, each logged with its time (also to faults.log): kill -9 of
a nats node (once the stream leader) and its restart, kill -9 of each gateway and its restart,
kill -9 of each aggregator, down a few seconds, restarted and killed again as soon as it works
through its backlog, mosquitto stopped and started, the HTTP receiver flapping (kill -9, down a
few seconds, up again). Then everything drains (bounded), is stopped with SIGTERM, and check.py
prints the table. Exit status: check.py's (0 no loss, 1 loss), 2 when the run could not be set
up, 130 when interrupted.
"""
import ctypes
import json
import math
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RECEIVER = os.path.join(ROOT, "Tests", "HTTPOutputTests", "Support", "receiver.py")
GATEWAYS = {"gateway-a": ["van-1", "van-2", "van-3", "van-4"],
            "gateway-b": ["truck-1", "truck-2", "truck-3", "truck-4"]}
# gateway-a replays its devices' tracks from files; gateway-b's devices are phones that post
# to its http_server source and keep each position until it was answered (Chaos/phones.py), so
# its kill -9 tests what it acknowledged, not a replay that starts again from the beginning.
PHONE_GATEWAY = "gateway-b"
AGGREGATORS = {"aggregator-0": [0, 1], "aggregator-1": [2, 3]}
T0 = time.monotonic()


class SetupError(Exception):
    pass


def log(message):
    line = "chaos [+%6.1fs %s] %s" % (time.monotonic() - T0, time.strftime("%H:%M:%S"), message)
    print(line, flush=True)
    if FAULT_LOG:
        FAULT_LOG.write(line + "\n")
        FAULT_LOG.flush()


FAULT_LOG = None


def free_ports(n):
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def poll(condition, timeout, interval=0.2):
    """True once condition() holds, False after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


# Loopback only: a proxy from the environment (http_proxy) must not see these requests.
_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_json(url):
    try:
        with _direct.open(url, timeout=2) as r:
            return json.loads(r.read())
    except Exception:
        return None


_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    # A child is killed when this script dies, even by SIGKILL: nothing outlives the run.
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Proc:
    """One child process, its output appended to a log file in the work directory."""

    def __init__(self, name, argv, logfile, stdout=None):
        self.name, self.argv, self.logfile, self.stdout_path = name, argv, logfile, stdout
        self.p = None

    def start(self):
        out = open(self.stdout_path or self.logfile, "ab")
        err = open(self.logfile, "ab")
        self.p = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                  start_new_session=True, preexec_fn=_die_with_parent)
        out.close()
        err.close()
        return self

    @property
    def pid(self):
        return self.p.pid if self.p else None

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def kill9(self):
        if self.alive():
            self.p.send_signal(signal.SIGKILL)
        if self.p:
            self.p.wait()

    def term(self, timeout=30):
        """SIGTERM, then SIGKILL after timeout; returns the exit status (None if never started)."""
        if not self.p:
            return None
        if self.alive():
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                log("%s did not stop within %ds of SIGTERM: kill -9" % (self.name, timeout))
                self.p.kill()
                self.p.wait()
        return self.p.returncode


# --- the generated tracks ---------------------------------------------------------------------

def write_tracks(data, epochs):
    """One JSON Lines track per device, one position a second from 2024-05-01T00:00:00Z, each
    with a unique id <device>:<seq>; each device swings east and west across the fence."""
    os.makedirs(data, exist_ok=True)
    index = 0
    for devices in GATEWAYS.values():
        for device in devices:
            lat = 31.2 + index * 0.0004
            period = 90 + 7 * index
            with open(os.path.join(data, device + ".jsonl"), "w") as f:
                for i in range(epochs):
                    t = time.gmtime(1714521600 + i)
                    lon = 121.5 + 0.008 * math.sin(2 * math.pi * i / period + index)
                    f.write(json.dumps({"id": "%s:%06d" % (device, i), "device": device,
                                        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", t), "mode": 3,
                                        "lat": round(lat, 7), "lon": round(lon, 7), "speed": 3.3, "hdop": 0.9},
                                       separators=(",", ":")) + "\n")
            index += 1


FENCES = {"type": "FeatureCollection", "features": [
    {"type": "Feature", "properties": {"id": "depot", "name": "Depot"},
     "geometry": {"type": "Polygon", "coordinates": [[[121.497, 31.19], [121.503, 31.19], [121.503, 31.21],
                                                      [121.497, 31.21], [121.497, 31.19]]]}}]}


# --- the run ----------------------------------------------------------------------------------

class Chaos:
    def __init__(self, binary, work, seconds, seed, rate):
        self.binary, self.work, self.seconds, self.rate = binary, work, seconds, rate
        self.rng = random.Random(seed)
        self.seed = seed
        self.procs = []
        self.nats, self.gateways, self.aggregators = [], {}, {}
        self.mosquitto = self.subscriber = self.receiver = None
        # The replay spans 40% of the run, so a gateway restarted after kill -9 (its replay
        # starts again from the beginning) still ends within the fault window.
        self.epochs = int(0.4 * seconds * rate)

    def path(self, *names):
        return os.path.join(self.work, *names)

    def proc(self, name, argv, stdout=None):
        p = Proc(name, argv, self.path(name + ".log"), stdout)
        self.procs.append(p)
        return p

    # nats-server ---------------------------------------------------------------------------

    def setup_nats(self):
        ports = free_ports(9)
        self.nats_ports = [ports[i * 3:i * 3 + 3] for i in range(3)]   # client, cluster, http
        self.nats_urls = ["nats://127.0.0.1:%d" % p[0] for p in self.nats_ports]
        for i, (client, cluster, http) in enumerate(self.nats_ports):
            routes = ", ".join("nats-route://127.0.0.1:%d" % p[1] for j, p in enumerate(self.nats_ports) if j != i)
            with open(self.path("n%d.conf" % (i + 1)), "w") as f:
                f.write("""server_name: n%d
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream { store_dir: "%s" }
cluster { name: locgate-chaos, listen: 127.0.0.1:%d, routes: [%s] }
mappings = { "locgate.positions.*": "locgate.part.{{partition(4,1)}}.{{wildcard(1)}}" }
""" % (i + 1, client, http, self.path("n%d-store" % (i + 1)), cluster, routes))
            self.nats.append(self.proc("n%d" % (i + 1), ["nats-server", "-c", self.path("n%d.conf" % (i + 1))]))
        for n in self.nats:
            n.start()

        def meta_leader():
            for _, _, http in self.nats_ports:
                r = http_json("http://127.0.0.1:%d/jsz" % http)
                if not r or not (r.get("meta_cluster") or {}).get("leader"):
                    return False
            return True
        if not poll(meta_leader, 60):
            raise SetupError("the nats cluster elected no JetStream meta leader in 60 s; see %s/n*.log" % self.work)
        log("nats cluster up: %s" % " ".join(self.nats_urls))

    def nats_healthy(self, i):
        r = http_json("http://127.0.0.1:%d/healthz" % self.nats_ports[i][2])
        return bool(r) and r.get("status") == "ok"

    def stream_leader(self):
        for i, (_, _, http) in enumerate(self.nats_ports):
            if not self.nats[i].alive():
                continue
            r = http_json("http://127.0.0.1:%d/jsz?streams=true" % http) or {}
            for account in r.get("account_details") or []:
                for stream in account.get("stream_detail") or []:
                    if stream.get("name") == "LOCGATE":
                        leader = (stream.get("cluster") or {}).get("leader")
                        if leader:
                            return int(leader[1:]) - 1
        return None

    def stream_report(self):
        """Messages in the stream and each consumer's pending and unacknowledged counts, each as
        its own leader reports it (a follower's view lags)."""
        stream_text, consumers = "stream LOCGATE: no leader answered", {}
        for i, (_, _, http) in enumerate(self.nats_ports):
            me = "n%d" % (i + 1)
            r = http_json("http://127.0.0.1:%d/jsz?streams=true&consumers=true" % http) or {}
            for account in r.get("account_details") or []:
                for stream in account.get("stream_detail") or []:
                    if stream.get("name") != "LOCGATE":
                        continue
                    if (stream.get("cluster") or {}).get("leader") == me:
                        stream_text = "stream LOCGATE (leader %s): %s messages" % (me, (stream.get("state") or {}).get("messages"))
                    for c in stream.get("consumer_detail") or []:
                        if (c.get("cluster") or {}).get("leader") == me:
                            consumers[c.get("name")] = "%s (leader %s) pending %s unacked %s redelivered %s" % (
                                c.get("name"), me, c.get("num_pending"), c.get("num_ack_pending"), c.get("num_redelivered"))
        return "; ".join([stream_text] + [consumers[k] for k in sorted(consumers)])

    # mosquitto, its subscriber, the HTTP receiver --------------------------------------------

    def setup_mosquitto(self):
        self.mqtt_port = free_ports(1)[0]
        os.makedirs(self.path("mosquitto"))
        with open(self.path("mosquitto", "mosquitto.conf"), "w") as f:
            # Run as root, mosquitto drops to its own user, which cannot enter a private
            # temporary directory: "user root" keeps it as it was started (ignored otherwise).
            f.write(("user root\n" if os.geteuid() == 0 else "") + """persistence true
persistence_location %s/
autosave_interval 1
max_queued_messages 0
max_inflight_messages 0
log_type error
log_type warning
log_type notice
log_type subscribe
log_timestamp_format %%Y-%%m-%%dT%%H:%%M:%%S
listener %d 127.0.0.1
allow_anonymous true
""" % (self.path("mosquitto"), self.mqtt_port))
        self.mosquitto = self.proc("mosquitto", ["mosquitto", "-c", self.path("mosquitto", "mosquitto.conf")])
        self.start_mosquitto()
        # A persistent session (-c, fixed id) at QoS 1: what the broker accepted while the
        # subscriber was cut off (a broker restart) is delivered when it is back.
        self.subscriber = self.proc("mosquitto_sub", ["mosquitto_sub", "-h", "127.0.0.1", "-p", str(self.mqtt_port),
                                                      "-t", "chaos/#", "-q", "1", "-v", "-c", "-i", "chaos-recorder"],
                                    stdout=self.path("mqtt.txt"))
        self.subscriber.start()
        if not poll(lambda: "chaos-recorder 1 chaos/#" in open(self.path("mosquitto.log"), errors="replace").read(), 20):
            raise SetupError("mosquitto_sub did not subscribe; see %s/mosquitto.log" % self.work)

    def start_mosquitto(self):
        self.mosquitto.start()
        if not poll(lambda: accepts(self.mqtt_port), 20, 0.05):
            raise SetupError("mosquitto did not listen on %d; see %s/mosquitto.log" % (self.mqtt_port, self.work))

    def setup_receiver(self):
        self.http_port = free_ports(1)[0]
        self.receiver = self.proc("receiver", [sys.executable, RECEIVER, "--record", self.path("http.jsonl"),
                                               "--port", str(self.http_port)])
        self.start_receiver()

    def start_receiver(self):
        self.receiver.start()
        if not poll(lambda: accepts(self.http_port), 20, 0.05):
            raise SetupError("the HTTP receiver did not listen on %d; see %s/receiver.log" % (self.http_port, self.work))

    # locgate -------------------------------------------------------------------------------

    def write_configs(self):
        self.phones_port = free_ports(1)[0]
        with open(self.path("fences.geojson"), "w") as f:
            json.dump(FENCES, f)
        for name, devices in GATEWAYS.items():
            if name == PHONE_GATEWAY:
                # Its devices call in: an http_server that answers each request once committed.
                sources = {"phones": {"type": "http_server", "listen": "127.0.0.1:%d" % self.phones_port,
                                      "format": "json", "unknown_devices": "accept"}}
            else:
                sources = {d: {"type": "file", "path": self.path("data", d + ".jsonl"), "rate": "%gx" % self.rate,
                               "device": d} for d in devices}
            inputs = list(sources)
            config = {
                "settings": {"shutdown_timeout": "30s", "stats_interval": "10s"},
                "sources": sources,
                "sinks": {
                    "bus": {"type": "nats", "inputs": inputs, "servers": self.nats_urls,
                            "subject": "locgate.positions.{device}",
                            "stream": {"name": "LOCGATE", "subjects": ["locgate.part.>", "locgate.positions.>"],
                                       "replicas": 3, "duplicate_window": "10m"},
                            "queue": {"path": self.path(name + "-nats.sqlite")}},
                    "broker": {"type": "mqtt", "inputs": inputs, "url": "mqtt://127.0.0.1:%d" % self.mqtt_port,
                               "client_id": "chaos-" + name, "qos": 1, "topic": "chaos/{device}",
                               "keepalive": "5s", "reconnect_max": "2s",
                               "queue": {"path": self.path(name + "-mqtt.sqlite")}},
                },
            }
            with open(self.path(name + ".json"), "w") as f:
                json.dump(config, f, indent=1)
        for name, partitions in AGGREGATORS.items():
            sources = {"part-%d" % k: {"type": "nats", "servers": self.nats_urls, "stream": "LOCGATE",
                                       "consumer": "part-%d" % k, "filter_subject": "locgate.part.%d.>" % k,
                                       "ack_wait": "5s"} for k in partitions}
            config = {
                "settings": {"shutdown_timeout": "30s", "stats_interval": "10s",
                             "state": {"path": self.path(name + "-state.sqlite")}},
                "sources": sources,
                "transforms": {"depot": {"type": "geofence", "inputs": list(sources), "fences": self.path("fences.geojson"),
                                         "events": ["enter", "exit"]}},
                "sinks": {
                    "archive": {"type": "file", "inputs": ["depot"], "path": self.path(name + ".jsonl")},
                    "upload": {"type": "http", "inputs": ["depot"], "url": "http://127.0.0.1:%d/track" % self.http_port,
                               "proxy": "",
                               "batch": {"max_positions": 200, "interval": "500ms"},
                               "retry": {"initial": "200ms", "max": "2s"}, "connect_timeout": "1s", "timeout": "5s",
                               "queue": {"path": self.path(name + "-http.sqlite")}},
                },
            }
            with open(self.path(name + ".json"), "w") as f:
                json.dump(config, f, indent=1)
        for name in list(GATEWAYS) + list(AGGREGATORS):
            r = subprocess.run([self.binary, "validate", "--no-environment", self.path(name + ".json")],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise SetupError("locgate validate %s.json failed:\n%s%s" % (name, r.stdout, r.stderr))

    def setup_locgate(self):
        for name in AGGREGATORS:
            self.aggregators[name] = self.proc(name, [self.binary, "run", self.path(name + ".json")]).start()
        # --drain: the replaying gateway exits 0 once its replay ended and both outboxes are empty.
        for name in GATEWAYS:
            drain = [] if name == PHONE_GATEWAY else ["--drain", "%ds" % (3 * self.seconds)]
            self.gateways[name] = self.proc(name, [self.binary, "run", self.path(name + ".json")] + drain).start()
        if not poll(lambda: accepts(self.phones_port), 30):
            raise SetupError("%s's http_server did not listen on %d; see %s/%s.log" % (PHONE_GATEWAY, self.phones_port, self.work, PHONE_GATEWAY))
        self.phones = self.proc("phones", [sys.executable, os.path.join(HERE, "phones.py"),
                                           "http://127.0.0.1:%d/" % self.phones_port, "%g" % self.rate]
                                + [self.path("data", d + ".jsonl") for d in GATEWAYS[PHONE_GATEWAY]]).start()
        log("%s replays %s, %s's phones post %s: %d positions each at %gx; %d aggregators"
            % (", ".join(n for n in GATEWAYS if n != PHONE_GATEWAY),
               " ".join(d for n, ds in GATEWAYS.items() if n != PHONE_GATEWAY for d in ds),
               PHONE_GATEWAY, " ".join(GATEWAYS[PHONE_GATEWAY]), self.epochs, self.rate, len(AGGREGATORS)))

    # the faults ----------------------------------------------------------------------------

    def schedule(self):
        """(seconds after the gateways started, what, target, seconds down), seeded."""
        s, r = self.seconds, self.rng
        replay = [n for n in GATEWAYS if n != PHONE_GATEWAY][0]
        aggs = list(AGGREGATORS)
        r.shuffle(aggs)
        plan = [
            (0.08 * s, "nats", r.randrange(3), r.uniform(4, 10)),
            # The replaying gateway first: after kill -9 its replay starts again from the
            # beginning, and must still reach its end within the fault window.
            (0.14 * s, "gateway", replay, r.uniform(1, 3)),
            (0.20 * s, "aggregator", aggs[0], r.uniform(4, 8)),
            (0.26 * s, "mosquitto", None, r.uniform(2, 5)),
            (0.30 * s, "gateway", PHONE_GATEWAY, r.uniform(1, 3)),
            (0.36 * s, "nats", "leader", r.uniform(4, 10)),
            (0.44 * s, "aggregator", aggs[1], r.uniform(4, 8)),
            (0.50 * s, "mosquitto", None, r.uniform(2, 5)),
            (0.56 * s, "nats", r.randrange(3), r.uniform(4, 10)),
        ]
        # The HTTP receiver flaps through the whole window: up a while, killed, down a while.
        t = 0.05 * s
        while t < 0.6 * s:
            t += r.uniform(6, 12)
            plan.append((t, "receiver", None, r.uniform(2, 5)))
            t += plan[-1][3]
        return sorted(plan, key=lambda x: x[0])

    def run_faults(self):
        """Runs the schedule. A fault takes a component down and queues the step that brings it
        back; a step may queue a follow-up (an aggregator's second kill). Nothing here waits for
        long: every step is a check or an action, so faults stay on time."""
        start = time.monotonic()
        steps = []          # (due, callable returning None or (delay, callable))
        self.down = set()   # components killed and not yet restarted
        plan = self.schedule()
        log("fault schedule (seed %d): %s" % (self.seed, "; ".join(
            "%.0fs %s%s" % (t, what, "" if target is None else " " + str(target)) for t, what, target, _ in plan)))
        while plan or steps:
            now = time.monotonic() - start
            steps.sort(key=lambda x: x[0])
            if steps and steps[0][0] <= now:
                follow = steps.pop(0)[1]()
                if follow:
                    steps.append((time.monotonic() - start + follow[0], follow[1]))
                continue
            if plan and plan[0][0] <= now:
                _, what, target, down = plan.pop(0)
                restart = self.fault(what, target)
                if restart:
                    steps.append((now + down, restart))
                continue
            nxt = min([p[0] for p in plan[:1]] + [p[0] for p in steps])
            time.sleep(max(0.0, min(0.5, nxt - now)))

    def fault(self, what, target):
        """Performs one fault; returns the step that brings the component back."""
        key = (what, target if what != "nats" else "any")
        if key in self.down:
            log("skipped: %s %s is still down from the last fault" % (what, target or ""))
            return None
        if what == "nats":
            if any(not n.alive() for n in self.nats):
                log("skipped: kill -9 of a nats node while another is down (the cluster keeps a quorum)")
                return None
            i = target
            if i == "leader":
                i = self.stream_leader()
                if i is None:
                    i = self.rng.randrange(3)
                    log("no stream leader reported: killing n%d" % (i + 1))
            node = self.nats[i]
            log("FAULT kill -9 nats %s (pid %d)%s" % (node.name, node.pid, " — the stream leader" if target == "leader" else ""))
            node.kill9()
            self.down.add(key)

            def back():
                node.start()
                deadline = time.monotonic() + 60

                def healthy():
                    if self.nats_healthy(i):
                        log("restarted nats %s (pid %d), healthy" % (node.name, node.pid))
                    elif time.monotonic() < deadline:
                        return 0.25, healthy
                    else:
                        log("restarted nats %s (pid %d), NOT healthy after 60 s" % (node.name, node.pid))
                    self.down.discard(key)
                return healthy()
            return back
        if what in ("gateway", "aggregator"):
            p = (self.gateways if what == "gateway" else self.aggregators)[target]
            if not p.alive():
                log("skipped: kill -9 of %s, which already exited (status %s)" % (target, p.p.returncode))
                return None
            log("FAULT kill -9 %s (pid %d)" % (target, p.pid))
            p.kill9()
            self.down.add(key)

            def back():
                p.start()
                log("restarted %s (pid %d)" % (target, p.pid))
                if what != "aggregator":
                    self.down.discard(key)
                    return None
                # Down for seconds, an aggregator comes back to a backlog: killed again as soon
                # as its file grows, it dies with positions written, uploaded or in its outbox
                # and not yet acknowledged to the stream — the case an idle kill never hits.
                out = self.path(target + ".jsonl")
                size = os.path.getsize(out) if os.path.exists(out) else 0
                deadline = time.monotonic() + 30

                def catching_up():
                    grown = os.path.exists(out) and os.path.getsize(out) > size
                    if grown:
                        log("FAULT kill -9 %s again while it catches up (pid %d, %d bytes written since its restart)"
                            % (target, p.pid, os.path.getsize(out) - size))
                        p.kill9()
                        p.start()
                        log("restarted %s (pid %d)" % (target, p.pid))
                    elif time.monotonic() < deadline:
                        return 0.02, catching_up
                    else:
                        log("%s wrote nothing within 30 s of its restart: no second kill" % target)
                    self.down.discard(key)
                return catching_up()
            return back
        if what == "mosquitto":
            log("FAULT mosquitto stopped (SIGTERM; pid %d)" % self.mosquitto.pid)
            self.mosquitto.term(10)
            self.down.add(key)

            def back():
                self.start_mosquitto()
                log("restarted mosquitto (pid %d)" % self.mosquitto.pid)
                self.down.discard(key)
            return back
        if what == "receiver":
            log("FAULT kill -9 http receiver (pid %d)" % self.receiver.pid)
            self.receiver.kill9()
            self.down.add(key)

            def back():
                self.start_receiver()
                log("restarted http receiver (pid %d)" % self.receiver.pid)
                self.down.discard(key)
            return back
        raise ValueError(what)

    # the drain -----------------------------------------------------------------------------

    def drain(self, budget):
        """Waits until the gateways exited and every output holds every id, or nothing grew on any
        output for a while; at most budget seconds."""
        sys.path.insert(0, HERE)
        sys.dont_write_bytecode = True      # no __pycache__ left in the source tree
        import check
        expected = sum(len(v) for v in check.expected_ids(self.work).values())
        outputs = check.outputs(self.work)
        deadline = time.monotonic() + budget
        stall = 25          # longer than every retry interval, ack_wait and reconnect backoff
        last_change, last = time.monotonic(), None
        log("draining: waiting up to %ds for the replay and the phones to end and every output to hold %d positions" % (budget, expected))
        while time.monotonic() < deadline:
            for o in outputs:
                o.read()
            counts = tuple(o.distinct() for o in outputs) + tuple(o.total() for o in outputs)
            # Inputs are done when the replaying gateway exited (drained) and every phone was answered.
            gateways_done = not self.phones.alive() and not any(
                g.alive() for n, g in self.gateways.items() if n != PHONE_GATEWAY)
            if counts != last:
                last, last_change = counts, time.monotonic()
            if gateways_done and all(o.distinct() >= expected for o in outputs):
                log("drained: every output holds every position (%s)" % self.counts_text(outputs, expected))
                break
            if gateways_done and time.monotonic() - last_change > stall:
                log("drain stalled: nothing new for %ds (%s)" % (stall, self.counts_text(outputs, expected)))
                break
            time.sleep(1)
        else:
            log("drain budget of %ds used up (%s); still running: %s" % (
                budget, self.counts_text(outputs, expected),
                ", ".join(p.name for p in [self.phones] + list(self.gateways.values())
                          if p.alive() and p.name != PHONE_GATEWAY) or "none"))
        if not self.phones.alive():
            log("phones exited with status %s" % self.phones.p.returncode)
        for name, g in self.gateways.items():
            if not g.alive():
                log("%s exited with status %s%s" % (name, g.p.returncode, "" if g.p.returncode == 0 else " (see %s.log)" % name))

    @staticmethod
    def counts_text(outputs, expected):
        return ", ".join("%s %d/%d" % (o.name, o.distinct(), expected) for o in outputs)

    def queue_report(self):
        """What is left in every outbox (pending and dead letters): evidence after a loss."""
        lines = []
        for f in sorted(os.listdir(self.work)):
            if not f.endswith(".sqlite") or "state" in f:
                continue
            try:
                db = sqlite3.connect("file:%s?mode=ro" % self.path(f), uri=True, timeout=5)
                pending = db.execute("SELECT count(*) FROM pending").fetchone()[0]
                dead = db.execute("SELECT count(*) FROM dead_letters").fetchone()[0]
                db.close()
                lines.append("%s: %d pending, %d dead letters" % (f, pending, dead))
            except sqlite3.Error as e:
                lines.append("%s: %s" % (f, e))
        return lines

    # the whole run ---------------------------------------------------------------------------

    def run(self):
        started = time.monotonic()
        write_tracks(self.path("data"), self.epochs)
        self.setup_nats()
        self.setup_mosquitto()
        self.setup_receiver()
        self.write_configs()
        self.setup_locgate()
        self.run_faults()
        # Every component is back; what is left of the run is for draining.
        left = self.seconds - (time.monotonic() - started)
        self.drain(max(60, int(left)))
        log(self.stream_report())
        log("stopping: phones, gateways, aggregators, subscriber, receiver, mosquitto, nats (SIGTERM)")
        # SIGTERM to all of a tier at once, then one shared deadline: the stop stays bounded.
        locgates = [self.phones] + list(self.gateways.values()) + list(self.aggregators.values())
        for status, p in zip(self.term_all(locgates, 40), locgates):
            if status not in (0, None, -signal.SIGKILL):
                log("%s exited with status %s (see %s.log)" % (p.name, status, p.name))
        for line in self.queue_report():
            log("outbox " + line)
        self.term_all([self.subscriber, self.receiver, self.mosquitto] + self.nats, 15)
        log("run took %.0fs; checking" % (time.monotonic() - started))
        return subprocess.run([sys.executable, os.path.join(HERE, "check.py"), self.work]).returncode

    @staticmethod
    def term_all(procs, timeout):
        """SIGTERM to every process, then kill -9 of those still running after timeout seconds;
        their exit statuses."""
        for p in procs:
            if p.alive():
                p.p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        statuses = []
        for p in procs:
            if p.p is None:
                statuses.append(None)
                continue
            try:
                p.p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log("%s did not stop within %ds of SIGTERM: kill -9" % (p.name, timeout))
                p.p.kill()
                p.p.wait()
            statuses.append(p.p.returncode)
        return statuses

    def stop_all(self):
        for p in self.procs:
            if p.alive():
                p.kill9()


def build():
    log("no binary given: building one (swift build -c release --static-swift-stdlib --product locgate)")
    subprocess.run(["swift", "build", "-c", "release", "--static-swift-stdlib", "--product", "locgate"],
                   cwd=ROOT, check=True)
    return os.path.join(ROOT, ".build", "release", "locgate")


def main():
    global FAULT_LOG
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help")):
        print(__doc__)
        return 2
    seconds = int(os.environ.get("CHAOS_SECONDS", "180"))
    seed = int(os.environ.get("CHAOS_SEED", "1"))
    rate = float(os.environ.get("CHAOS_RATE", "20"))
    if seconds < 60:
        print("chaos: CHAOS_SECONDS must be at least 60 (the faults need room)", file=sys.stderr)
        return 2
    for tool in ("nats-server", "mosquitto", "mosquitto_sub"):
        if not shutil.which(tool):
            print("chaos: %s is not installed (make chaos installs it: nats-server mosquitto mosquitto-clients)" % tool,
                  file=sys.stderr)
            return 2
    binary = os.path.abspath(sys.argv[1]) if len(sys.argv) == 2 else build()
    if not os.access(binary, os.X_OK):
        print("chaos: %s is not an executable" % binary, file=sys.stderr)
        return 2
    keep = bool(os.environ.get("CHAOS_WORK"))
    work = os.environ.get("CHAOS_WORK") or tempfile.mkdtemp(prefix="locgate-chaos.")
    os.makedirs(work, exist_ok=True)
    FAULT_LOG = open(os.path.join(work, "faults.log"), "a")
    # Ctrl-C and SIGTERM end the run through the same cleanup as a failure.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    chaos = Chaos(binary, work, seconds, seed, rate)
    log("work directory %s, binary %s, %ds, seed %d" % (work, binary, seconds, seed))
    status = 2
    try:
        status = chaos.run()
    except SetupError as e:
        log("SETUP FAILED: %s" % e)
        keep = True
    except KeyboardInterrupt:
        log("interrupted")
        status = 130
    finally:
        chaos.stop_all()
    if status != 0:
        keep = True
    if keep:
        log("kept %s (logs, configs, outputs, outboxes, faults.log, lost.txt)" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Benchmark of the nats sink: positions/s from a replayed NMEA log through the sink with the
# durable outbox (SQLite, synchronous=full) into an R3 JetStream stream on a 3-node nats-server
# cluster on loopback, beside synchronous publishing (one PubAck awaited per message, the same
# JSON body and Nats-Msg-Id) into the same stream from the same machine.
#
#   Benchmarks/nats_sink.sh [EPOCHS]      (default 100000)
#
# The sink's figure is end to end: from the process start until it exits, which it does only
# once every position is acknowledged by the stream and deleted from the outbox.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
EPOCHS=${1:-100000}
SYNC_COUNT=${SYNC_COUNT:-20000}
# Always (incremental): a stale binary would measure old code.
swift build -c release --static-swift-stdlib --product locgate >&2
LOCGATE_BENCH=1 swift build -c release --static-swift-stdlib --product NATSBenchmark >&2
BIN=$ROOT/.build/release/locgate
TOOL=$ROOT/.build/release/NATSBenchmark
WORK=$(mktemp -d /tmp/locgate-nats-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

# Nine free loopback ports: client, cluster and monitoring for each node.
read -r -a PORTS <<<"$(python3 - <<'PY'
import socket
socks = []
for _ in range(9):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
)"
SERVERS=""
for i in 0 1 2; do
    SERVERS+="${SERVERS:+,}nats://127.0.0.1:${PORTS[$((i*3))]}"
done
for i in 0 1 2; do
    routes=""
    for j in 0 1 2; do [[ $j != "$i" ]] && routes+="${routes:+, }nats-route://127.0.0.1:${PORTS[$((j*3+1))]}"; done
    cat > "$WORK/n$i.conf" <<CONF
server_name: n$i
listen: 127.0.0.1:${PORTS[$((i*3))]}
http: 127.0.0.1:${PORTS[$((i*3+2))]}
jetstream { store_dir: "$WORK/n$i-store" }
cluster { name: bench, listen: 127.0.0.1:${PORTS[$((i*3+1))]}, routes: [$routes] }
CONF
    /usr/sbin/nats-server -c "$WORK/n$i.conf" > "$WORK/n$i.log" 2>&1 &
    PIDS+=($!)
    disown $!
done
# Wait (polling, up to 60 s) until every node knows the JetStream meta leader.
python3 - "${PORTS[2]}" "${PORTS[5]}" "${PORTS[8]}" <<'PY'
import json, sys, time, urllib.request
deadline = time.time() + 60
for port in sys.argv[1:]:
    while True:
        try:
            r = json.load(urllib.request.urlopen("http://127.0.0.1:%s/jsz" % port, timeout=2))
            if r.get("meta_cluster", {}).get("leader"): break
        except Exception:
            pass
        if time.time() > deadline: sys.exit("no JetStream meta leader after 60 s")
        time.sleep(0.1)
PY
"$TOOL" create-stream "$SERVERS" LOCGATE 'locgate.>' 3

python3 "$ROOT/Benchmarks/gen_rmc_gga.py" "$EPOCHS" "$WORK/log.nmea"

LIST=$(echo "$SERVERS" | sed 's/[^,]*/"&"/g')
cat > "$WORK/pipeline.json" <<JSON
{ "settings": { "shutdown_timeout": "600s", "stats_interval": "600s" },
  "sources": { "rx": { "type": "file", "path": "$WORK/log.nmea", "progress": false, "device": "bench" } },
  "sinks": { "bus": { "type": "nats", "inputs": ["rx"], "servers": [$LIST],
                      "subject": "locgate.positions.{device}", "expect_stream": "LOCGATE",
                      "max_pending": 1000, "queue": { "path": "$WORK/outbox.sqlite" } } } }
JSON
t0=$(date +%s%N)
"$BIN" run "$WORK/pipeline.json" 2> "$WORK/locgate.log"
t1=$(date +%s%N)
stored=$("$TOOL" count "$SERVERS" LOCGATE)
if [[ $stored != "$EPOCHS" ]]; then
    echo "nats_sink: the stream holds $stored messages, expected $EPOCHS" >&2
    tail -20 "$WORK/locgate.log" >&2
    exit 1
fi

read -r sync_n sync_s < <("$TOOL" sync-publish "$SERVERS" locgate.sync.bench "$SYNC_COUNT")

python3 - "$EPOCHS" "$t0" "$t1" "$sync_n" "$sync_s" <<'PY'
import sys
n, t0, t1, sn, ss = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
sink = n / ((t1 - t0) / 1e9)
sync = sn / ss
print("nats sink, durable outbox, JetStream R3 (3 nodes, loopback): %d positions in %.2f s = %.0f positions/s" % (n, (t1 - t0) / 1e9, sink))
print("synchronous js_Publish, one PubAck awaited per message:     %d messages in %.2f s = %.0f messages/s" % (sn, ss, sync))
print("ratio sink / synchronous publish: %.1f" % (sink / sync))
PY

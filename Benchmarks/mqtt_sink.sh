#!/usr/bin/env bash
# Benchmark of the mqtt sink: positions/s published at QoS 1 from the durable queue (SQLite,
# synchronous=full), beside `mosquitto_pub -q 1 -l` sending the same number of messages to the
# same broker in the same run. Both count a message only once its PUBACK arrived.
#
#   Benchmarks/mqtt_sink.sh [EPOCHS]      (default 50000)
#
# The locgate figure is end to end: read an NMEA log, decode, commit each batch, publish, delete
# on PUBACK, exit when the queue is empty, with the sink's defaults (max_inflight 100). The ratio
# (locgate / mosquitto_pub) should be ≥ 1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
EPOCHS=${1:-50000}
SYNC=${SYNC:-full}   # SYNC=normal: the queue survives a crash of the process, not a power loss
# The sink runs with the defaults a user gets; MAX_INFLIGHT=N sets its max_inflight.
INFLIGHT=${MAX_INFLIGHT:+, \"max_inflight\": $MAX_INFLIGHT}
BIN=$ROOT/.build/release/locgate
swift build -c release --static-swift-stdlib --product locgate >&2
WORK=$(mktemp -d /tmp/locgate-mqtt-bench.XXXXXX)
BROKER_PID=
cleanup() {
    if [[ -n $BROKER_PID ]]; then kill -9 "$BROKER_PID" 2>/dev/null; wait "$BROKER_PID" 2>/dev/null; fi || true
    rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$WORK/mosquitto.conf" <<CONF
listener $PORT 127.0.0.1
allow_anonymous true
max_inflight_messages 0
max_queued_messages 0
CONF
chmod 755 "$WORK"
/usr/sbin/mosquitto -c "$WORK/mosquitto.conf" 2> "$WORK/broker.log" &
BROKER_PID=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.05; done

python3 "$ROOT/Benchmarks/gen_rmc_gga.py" "$EPOCHS" "$WORK/log.nmea"
python3 - "$EPOCHS" "$WORK/lines.txt" <<'PY'
import sys
n, lines = int(sys.argv[1]), sys.argv[2]
with open(lines, "w") as pub:
    for i in range(n):
        t = 1714521600 + i
        # A payload of the size locgate publishes (a position object of ~230 bytes).
        pub.write('{"class":"TPV","id":"rx-%d000","source":"rx","device":"van-1","time":"2024-05-01T00:00:00.000Z","mode":3,"status":1,"lat":31.%07d,"lon":121.%07d,"altMSL":15.2,"speed":1.646,"track":87.5,"uSat":9,"hdop":0.9,"datum":"wgs84"}\n' % (t, i, i))
PY

ms() { date +%s%3N; }

t0=$(ms)
mosquitto_pub -h 127.0.0.1 -p "$PORT" -q 1 -t bench/pub -l < "$WORK/lines.txt"
t1=$(ms)
PUB_MS=$((t1 - t0))

cat > "$WORK/pipeline.json" <<JSON
{ "settings": { "shutdown_timeout": "600s", "stats_interval": "600s" },
  "sources": { "rx": { "type": "file", "path": "$WORK/log.nmea", "progress": false, "device": "van-1" } },
  "sinks": { "up": { "type": "mqtt", "inputs": ["rx"], "url": "mqtt://127.0.0.1:$PORT", "qos": 1,
                     "topic": "bench/{device}"$INFLIGHT,
                     "queue": { "path": "$WORK/queue.sqlite", "synchronous": "$SYNC" } } } }
JSON
t0=$(ms)
"$BIN" run "$WORK/pipeline.json" 2> "$WORK/locgate.log"
t1=$(ms)
LG_MS=$((t1 - t0))
LEFT=$(sqlite3 "$WORK/queue.sqlite" "SELECT count(*) FROM pending" 2>/dev/null || echo "?")

PUB_RATE=$(echo "$EPOCHS * 1000 / $PUB_MS" | bc -l)
LG_RATE=$(echo "$EPOCHS * 1000 / $LG_MS" | bc -l)
echo "mqtt sink benchmark: $EPOCHS messages at QoS 1, mosquitto on 127.0.0.1:$PORT"
printf 'mosquitto_pub -q 1 -l        %7d in %6d ms = %8.0f messages/s\n' "$EPOCHS" "$PUB_MS" "$PUB_RATE"
printf 'locgate mqtt (queue: %-6s)%7d in %6d ms = %8.0f positions/s   (left in queue: %s)\n' "$SYNC" "$EPOCHS" "$LG_MS" "$LG_RATE" "$LEFT"
printf 'ratio locgate / mosquitto_pub: %.2f\n' "$(echo "$LG_RATE / $PUB_RATE" | bc -l)"

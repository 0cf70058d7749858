#!/usr/bin/env bash
# Benchmark of the nats source: positions/s from a JetStream stream (durable pull consumer,
# explicit acks sent once the file sink flushed) through a geofence into a JSON Lines file,
# beside the same positions read from a JSON Lines file by the `file` source through the same
# geofence into the same kind of file. The ratio is the broker's cost. A third run reads the
# same stream (another consumer) with the geofence's per-device state kept in a JetStream
# Key-Value bucket on the same server (settings.state.nats): its rate over the second run's is
# the state store's cost (issue 30's target: at least 0.8).
#
#   Benchmarks/nats_source.sh [POSITIONS]      (default 100000)
#
# LOCGATE_BIN picks a binary (default: a release build made here). One nats-server on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
N=${1:-100000}
if [ -z "${LOCGATE_BIN:-}" ]; then
    swift build -c release --static-swift-stdlib --product locgate >&2
    LOCGATE_BIN=$ROOT/.build/release/locgate
fi
WORK=$(mktemp -d /tmp/locgate-nats-source-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

read -r PORT HTTP <<<"$(python3 -c 'import socket
a=socket.socket(); a.bind(("127.0.0.1",0)); b=socket.socket(); b.bind(("127.0.0.1",0))
print(a.getsockname()[1], b.getsockname()[1])')"
cat > "$WORK/nats.conf" <<CONF
listen: 127.0.0.1:$PORT
http: 127.0.0.1:$HTTP
jetstream { store_dir: "$WORK/store" }
CONF
nats-server -c "$WORK/nats.conf" > "$WORK/nats.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$HTTP/jsz" > /dev/null 2>&1 && break; sleep 0.1; done

# N positions of 8 devices crossing a fence, as JSON Lines (what a gateway's nats sink publishes).
python3 Docs/examples/fleet/gen_tracks.py "$WORK" $((N / 8)) d1 d2 d3 d4 d5 d6 d7 d8
SRC=""
for d in d1 d2 d3 d4 d5 d6 d7 d8; do
    SRC+="${SRC:+,} \"$d\": { \"type\": \"file\", \"path\": \"$WORK/$d.nmea\", \"device\": \"$d\" }"
done
INPUTS='"d1","d2","d3","d4","d5","d6","d7","d8"'
cat > "$WORK/to-jsonl.json" <<JSON
{ "sources": { $SRC }, "sinks": { "out": { "type": "file", "inputs": [$INPUTS], "path": "$WORK/positions.jsonl" } } }
JSON
"$LOCGATE_BIN" run "$WORK/to-jsonl.json" 2> "$WORK/to-jsonl.log"
TOTAL=$(wc -l < "$WORK/positions.jsonl")

# Fill the stream (not timed).
cat > "$WORK/fill.json" <<JSON
{ "settings": { "shutdown_timeout": "300s" },
  "sources": { "in": { "type": "file", "path": "$WORK/positions.jsonl" } },
  "sinks": { "bus": { "type": "nats", "inputs": ["in"], "servers": ["nats://127.0.0.1:$PORT"], "subject": "locgate.positions.{device}",
                      "stream": { "name": "LOCGATE", "subjects": ["locgate.positions.>"] }, "max_pending": 4000, "queue": null } } }
JSON
"$LOCGATE_BIN" run "$WORK/fill.json" 2> "$WORK/fill.log" || { tail -5 "$WORK/fill.log" >&2; exit 1; }
cp Docs/examples/fleet/fences.geojson "$WORK/fences.geojson"

now() { date +%s.%N; }

# B: the file source (ends by itself).
cat > "$WORK/file.json" <<JSON
{ "sources": { "in": { "type": "file", "path": "$WORK/positions.jsonl" } },
  "transforms": { "depot": { "type": "geofence", "inputs": ["in"], "fences": "fences.geojson", "events": ["enter", "exit"] } },
  "sinks": { "out": { "type": "file", "inputs": ["depot"], "path": "$WORK/file-out.jsonl" } } }
JSON
T0=$(now)
"$LOCGATE_BIN" run "$WORK/file.json" 2> "$WORK/file.log"
T1=$(now)

# A: the nats source (runs until stopped): timed until every position is in its file.
cat > "$WORK/nats.json" <<JSON
{ "sources": { "in": { "type": "nats", "servers": ["nats://127.0.0.1:$PORT"], "stream": "LOCGATE", "consumer": "bench",
                       "batch": 500, "max_unacked": 4000, "max_ack_pending": 8000 } },
  "transforms": { "depot": { "type": "geofence", "inputs": ["in"], "fences": "fences.geojson", "events": ["enter", "exit"] } },
  "sinks": { "out": { "type": "file", "inputs": ["depot"], "path": "$WORK/nats-out.jsonl" } } }
JSON
WANT=$(wc -l < "$WORK/file-out.jsonl")
T2=$(now)
"$LOCGATE_BIN" run "$WORK/nats.json" 2> "$WORK/nats-run.log" &
PID=$!
PIDS+=($PID)
while [ "$( [ -f "$WORK/nats-out.jsonl" ] && wc -l < "$WORK/nats-out.jsonl" || echo 0)" -lt "$WANT" ]; do sleep 0.02; done
T3=$(now)
kill -TERM "$PID"; wait "$PID" 2>/dev/null || true

# C: the nats source again (its own consumer), the geofence's state in a Key-Value bucket.
sed -e 's/"consumer": "bench"/"consumer": "bench-kv"/' -e "s|nats-out.jsonl|kv-out.jsonl|" \
    -e "s|^{ \"sources\"|{ \"settings\": { \"state\": { \"nats\": { \"servers\": [\"nats://127.0.0.1:$PORT\"], \"bucket\": \"bench-state\" } } },\n  \"sources\"|" \
    "$WORK/nats.json" > "$WORK/kv.json"
T4=$(now)
"$LOCGATE_BIN" run "$WORK/kv.json" 2> "$WORK/kv-run.log" &
PID=$!
PIDS+=($PID)
while [ "$( [ -f "$WORK/kv-out.jsonl" ] && wc -l < "$WORK/kv-out.jsonl" || echo 0)" -lt "$WANT" ]; do sleep 0.02; done
T5=$(now)
kill -TERM "$PID"; wait "$PID" 2>/dev/null || true
grep -q "from nats bucket bench-state" "$WORK/kv-run.log" || { echo "the state store was not used:" >&2; tail -5 "$WORK/kv-run.log" >&2; exit 1; }

python3 - "$TOTAL" "$T0" "$T1" "$T2" "$T3" "$T4" "$T5" <<'PY'
import sys
n = int(sys.argv[1]); t0, t1, t2, t3, t4, t5 = map(float, sys.argv[2:])
f = n / (t1 - t0); j = n / (t3 - t2); k = n / (t5 - t4)
print("positions: %d (8 devices), geofence with enter/exit events, into a JSON Lines file" % n)
print("file source (JSON Lines):          %10.0f positions/s  (%.2f s)" % (f, t1 - t0))
print("nats source (JetStream, acked):    %10.0f positions/s  (%.2f s)" % (j, t3 - t2))
print("nats source, state in JetStream KV: %9.0f positions/s  (%.2f s)" % (k, t5 - t4))
print("ratio nats / file: %.2f" % (j / f))
print("ratio KV state / no state: %.2f" % (k / j))
PY

#!/usr/bin/env bash
# Benchmark of the http sink: positions/s delivered to a local receiver with batches of 500,
# and the durable queue's write cost per position.
#
#   Benchmarks/http_sink.sh [EPOCHS]      (default 100000)
#   ROUNDS=N (default 5): rounds of the three runs, in alternating order
#
# Runs the release locgate on a generated NMEA log (RMC+GGA per epoch) three times against a
# minimal receiver (Benchmarks/minimal_receiver.py: reads the body, answers 200, so the receiver is
# not the limit): with a disk queue (synchronous=full),
# with a disk queue (synchronous=normal), and with "queue": null. The write cost is the extra
# time the source needs to be read to its end when every batch is committed to SQLite before it
# is acknowledged, divided by the positions. The ratio durable / memory (positions/s, target
# >= 0.7) is printed for each round (the runs of a round are adjacent in time: the machine's load
# moves in longer phases), then its median and range.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
EPOCHS=${1:-100000}
ROUNDS=${ROUNDS:-5}
BIN=$ROOT/.build/release/locgate
# Always (incremental): a stale binary would measure old code.
swift build -c release --static-swift-stdlib --product locgate >&2
WORK=$(mktemp -d /tmp/locgate-http-bench.XXXXXX)
RECEIVER_PID=
cleanup() {
    [[ -n $RECEIVER_PID ]] && kill "$RECEIVER_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

python3 "$ROOT/Benchmarks/gen_rmc_gga.py" "$EPOCHS" "$WORK/log.nmea"

python3 "$ROOT/Benchmarks/minimal_receiver.py" "$WORK/received.count" > "$WORK/port" &
RECEIVER_PID=$!
for _ in $(seq 100); do [[ -s $WORK/port ]] && break; sleep 0.05; done
PORT=$(awk '{print $2}' "$WORK/port")

ms() { date +%s%3N; }
# Milliseconds from the pipeline's start to "input ended" in a log (timestamps are ISO 8601).
ingest_ms() {
    python3 - "$1" <<'PY'
import sys, datetime
start = end = None
for line in open(sys.argv[1]):
    ts = line.split(" ", 1)[0]
    try:
        t = datetime.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        continue
    if "pipeline: starting" in line and start is None: start = t
    if "input ended" in line: end = t
print(int((end - start).total_seconds() * 1000) if start and end else -1)
PY
}

run() {  # run NAME QUEUE_JSON
    local name=$1 queue=$2
    rm -f "$WORK"/queue.sqlite*
    cat > "$WORK/$name.json" <<JSON
{ "settings": { "shutdown_timeout": "600s", "stats_interval": "600s" },
  "sources": { "rx": { "type": "file", "path": "$WORK/log.nmea", "progress": false } },
  "sinks": { "up": { "type": "http", "inputs": ["rx"], "url": "http://127.0.0.1:$PORT/track",
                     "batch": { "max_positions": 500, "interval": "1s" }, "queue": $queue } } }
JSON
    local before
    before=$(cat "$WORK/received.count" 2>/dev/null || echo 0)
    local t0 t1
    t0=$(ms)
    "$BIN" run "$WORK/$name.json" 2> "$WORK/$name.log"
    t1=$(ms)
    local delivered
    delivered=$(( $(cat "$WORK/received.count" 2>/dev/null || echo 0) - before ))
    local total=$((t1 - t0)) ingest
    ingest=$(ingest_ms "$WORK/$name.log")
    if [[ $delivered != "$EPOCHS" ]]; then
        echo "http_sink: $name delivered $delivered of $EPOCHS" >&2
        tail -5 "$WORK/$name.log" >&2
        exit 1
    fi
    printf '  %-12s delivered %7d in %6d ms = %8.0f positions/s   (source read to its end in %5d ms)\n' \
        "$name" "$delivered" "$total" "$(echo "$delivered * 1000 / $total" | bc -l)" "$ingest"
    eval "RATE_$name=$(echo "$delivered * 1000 / $total" | bc -l)"
    eval "INGEST_$name=$ingest"
}

echo "http sink benchmark: $EPOCHS positions, batches of 500, receiver on 127.0.0.1:$PORT; $ROUNDS rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)"
FULL=() NORMAL=() COST_FULL=() COST_NORMAL=()
for r in $(seq "$ROUNDS"); do
    echo "round $r"
    if (( r % 2 )); then order="disk_full disk_normal memory"; else order="memory disk_normal disk_full"; fi
    for q in $order; do
        case $q in
            disk_full) run disk_full '{ "path": "'"$WORK"'/queue.sqlite", "synchronous": "full" }' ;;
            disk_normal) run disk_normal '{ "path": "'"$WORK"'/queue.sqlite", "synchronous": "normal" }' ;;
            memory) run memory 'null' ;;
        esac
    done
    FULL+=("$(echo "$RATE_disk_full / $RATE_memory" | bc -l)")
    NORMAL+=("$(echo "$RATE_disk_normal / $RATE_memory" | bc -l)")
    COST_FULL+=("$(echo "($INGEST_disk_full - $INGEST_memory) * 1000 / $EPOCHS" | bc -l)")
    COST_NORMAL+=("$(echo "($INGEST_disk_normal - $INGEST_memory) * 1000 / $EPOCHS" | bc -l)")
    printf '  ratio durable / memory: full %.2f, normal %.2f\n' "${FULL[-1]}" "${NORMAL[-1]}"
done
python3 - "${FULL[*]}" "${NORMAL[*]}" "${COST_FULL[*]}" "${COST_NORMAL[*]}" <<'PY'
import statistics, sys
rows = [[float(x) for x in a.split()] for a in sys.argv[1:]]
def summary(v, fmt): return ("median " + fmt + ", range " + fmt + " - " + fmt) % (statistics.median(v), min(v), max(v))
print("ratio durable (synchronous full) / memory queue, positions/s: %s over %d rounds; target >= 0.7" % (summary(rows[0], "%.2f"), len(rows[0])))
print("ratio durable (synchronous normal) / memory queue, positions/s: %s" % summary(rows[1], "%.2f"))
print("queue write cost, µs per position: full %s; normal %s" % (summary(rows[2], "%.2f"), summary(rows[3], "%.2f")))
PY

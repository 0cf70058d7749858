#!/usr/bin/env bash
# Benchmark of the listening side: positions/s through the `teltonika` source (TCP, 100 devices,
# 10 records a frame, each frame answered only once the file sink flushed it — the device waits
# for every answer before sending its next frame) into a JSON Lines file, beside the same
# positions replayed from that JSON Lines file by the `file` source into the same kind of file.
# The ratio is the price of devices calling in (framing, CRC, the I/O loop, one round trip per
# frame) over reading the same positions from disk.
#
#   Benchmarks/trackers.sh [FRAMES_PER_DEVICE]     (default 200: 100 x 200 x 10 = 200,000 positions)
#
# ROUNDS (default 3) interleaved rounds; medians printed. LOCGATE_BIN picks a binary (default: a
# release build made here). The load is Benchmarks/tracker_load.c (C, one thread, poll), built here.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
FRAMES=${1:-200}
ROUNDS=${ROUNDS:-3}
CONNECTIONS=100
RECORDS=10
if [ -z "${LOCGATE_BIN:-}" ]; then
    swift build -c release --static-swift-stdlib --product locgate >&2
    LOCGATE_BIN=$ROOT/.build/release/locgate
fi
WORK=$(mktemp -d /tmp/locgate-trackers-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
gcc -O2 -o "$WORK/tracker_load" Benchmarks/tracker_load.c

now() { date +%s.%N; }
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

for round in $(seq 1 "$ROUNDS"); do
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    rm -f "$WORK/devices.jsonl" "$WORK/replayed.jsonl"
    cat > "$WORK/listen.json" <<JSON
{ "settings": { "stats_interval": false },
  "sources": { "fmb": { "type": "teltonika", "listen": "127.0.0.1:$PORT", "unknown_devices": "accept" } },
  "sinks": { "out": { "type": "file", "inputs": ["fmb"], "path": "$WORK/devices.jsonl" } } }
JSON
    "$LOCGATE_BIN" run "$WORK/listen.json" 2> "$WORK/listen.log" &
    PID=$!
    PIDS+=($PID)
    for _ in $(seq 1 100); do grep -q "listening for Teltonika" "$WORK/listen.log" && break; sleep 0.05; done
    RESULT=$("$WORK/tracker_load" "$PORT" "$CONNECTIONS" "$FRAMES" "$RECORDS")
    kill -INT "$PID"; wait "$PID" || true
    N=$(sed -E 's/.*records=([0-9]+).*/\1/' <<<"$RESULT")
    S=$(sed -E 's/.*seconds=([0-9.]+).*/\1/' <<<"$RESULT")
    LINES=$(wc -l < "$WORK/devices.jsonl")
    [ "$LINES" -eq "$N" ] || { echo "the file has $LINES positions, the devices were answered for $N" >&2; exit 1; }
    echo "$N / $S" | bc -l >> "$WORK/listen.rates"

    cat > "$WORK/replay.json" <<JSON
{ "settings": { "stats_interval": false },
  "sources": { "log": { "type": "file", "path": "$WORK/devices.jsonl" } },
  "sinks": { "out": { "type": "file", "inputs": ["log"], "path": "$WORK/replayed.jsonl" } } }
JSON
    T0=$(now)
    "$LOCGATE_BIN" run "$WORK/replay.json" 2> "$WORK/replay.log"
    T1=$(now)
    echo "$N / ($T1 - $T0)" | bc -l >> "$WORK/replay.rates"
    printf 'round %d: teltonika %.0f positions/s, replay %.0f positions/s\n' "$round" "$(tail -1 "$WORK/listen.rates")" "$(tail -1 "$WORK/replay.rates")"
done
L=$(median < "$WORK/listen.rates")
R=$(median < "$WORK/replay.rates")
printf 'teltonika (TCP, %d devices, %d records a frame, answered after the file sink flushed): %.0f positions/s\n' "$CONNECTIONS" "$RECORDS" "$L"
printf 'the same positions replayed from JSON Lines into the same sink:                     %.0f positions/s\n' "$R"
printf 'ratio teltonika / replay: %.2f (target >= 0.5)\n' "$(echo "$L / $R" | bc -l)"

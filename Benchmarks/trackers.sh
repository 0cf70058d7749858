#!/usr/bin/env bash
# Benchmark of the sources devices call into, each beside a replay of the same positions:
#
# - `teltonika`: 100 devices over TCP, 10 records a frame, each frame answered only once the file
#   sink flushed it (a device waits for every answer before its next frame);
# - `jt808`: 100 JT/T 808 terminals over TCP, each authenticated, then 0x0704 batches of 10
#   locations, each batch answered (0x8001) only once the file sink flushed it;
# - `http_server` (`format: "osmand"`): 100 Traccar Client phones on kept-alive connections, one
#   position per request, each request answered only once the file sink flushed it;
#
# into a JSON Lines file, and the same positions replayed from that JSON Lines file by the `file`
# source into the same kind of file. The ratio is the price of devices calling in (framing,
# checksums, HTTP, the I/O thread, one round trip per frame or request) over reading the same
# positions from disk.
#
#   Benchmarks/trackers.sh [FRAMES_PER_DEVICE] [REQUESTS_PER_PHONE]   (defaults 200 and 500:
#                                                  200,000 and 50,000 positions)
#
# Measured here (3 rounds, 2 cores, one shared machine): teltonika 128,287 positions/s beside a
# replay of 76,495 (ratio 1.68); jt808 198,610 beside 120,075 (ratio 1.65, 2026-12-06, teltonika
# 2.20 in the same run); http_server osmand 12,674 beside 95,168 (ratio 0.13, below the
# 0.5 aimed at). The osmand side is bound by libmicrohttpd's one event thread (80% of the samples:
# parsing, the epoll_ctl of each suspend and resume, one send per answer, the pool it clears per
# request), about 80 us a request with one position each; a second event thread gave 15-20%.
# Clients that post many positions per request (OwnTracks arrays, locgate json) pay it once.
#
# ROUNDS (default 3) interleaved rounds; medians printed. LOCGATE_BIN picks a binary (default: a
# release build made here). The loads are Benchmarks/tracker_load.c and osmand_load.c (C, one
# thread, poll), built here.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
FRAMES=${1:-200}
REQUESTS=${2:-500}
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
gcc -O2 -o "$WORK/osmand_load" Benchmarks/osmand_load.c
gcc -O2 -o "$WORK/jt808_load" Benchmarks/jt808_load.c

now() { date +%s.%N; }
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# listen NAME SOURCE_JSON LOAD_COMMAND...: runs the source into NAME.jsonl under the load, appends
# positions/s to NAME.rates, then replays NAME.jsonl and appends to NAME-replay.rates.
listen() {
    local name=$1 source=$2
    shift 2
    rm -f "$WORK/$name.jsonl" "$WORK/$name-replayed.jsonl"
    cat > "$WORK/$name.json" <<JSON
{ "settings": { "stats_interval": false },
  "sources": { "devices": $source },
  "sinks": { "out": { "type": "file", "inputs": ["devices"], "path": "$WORK/$name.jsonl" } } }
JSON
    "$LOCGATE_BIN" run "$WORK/$name.json" 2> "$WORK/$name.log" &
    local pid=$!
    PIDS+=($pid)
    for _ in $(seq 1 100); do grep -q "listening for" "$WORK/$name.log" && break; sleep 0.05; done
    local result n s lines
    result=$("$@")
    kill -INT "$pid"; wait "$pid" || true
    n=$(sed -E 's/.*(records|requests)=([0-9]+).*/\2/' <<<"$result")
    s=$(sed -E 's/.*seconds=([0-9.]+).*/\1/' <<<"$result")
    lines=$(wc -l < "$WORK/$name.jsonl")
    [ "$lines" -eq "$n" ] || { echo "$name: the file has $lines positions, the devices were answered for $n" >&2; exit 1; }
    echo "$n / $s" | bc -l >> "$WORK/$name.rates"

    cat > "$WORK/$name-replay.json" <<JSON
{ "settings": { "stats_interval": false },
  "sources": { "log": { "type": "file", "path": "$WORK/$name.jsonl" } },
  "sinks": { "out": { "type": "file", "inputs": ["log"], "path": "$WORK/$name-replayed.jsonl" } } }
JSON
    local t0 t1
    t0=$(now)
    "$LOCGATE_BIN" run "$WORK/$name-replay.json" 2> "$WORK/$name-replay.log"
    t1=$(now)
    echo "$n / ($t1 - $t0)" | bc -l >> "$WORK/$name-replay.rates"
    printf 'round %d: %s %.0f positions/s, replay %.0f positions/s\n' "$round" "$name" \
        "$(tail -1 "$WORK/$name.rates")" "$(tail -1 "$WORK/$name-replay.rates")"
}

for round in $(seq 1 "$ROUNDS"); do
    PORT=$(free_port)
    listen teltonika "{ \"type\": \"teltonika\", \"listen\": \"127.0.0.1:$PORT\", \"unknown_devices\": \"accept\" }" \
        "$WORK/tracker_load" "$PORT" "$CONNECTIONS" "$FRAMES" "$RECORDS"
    PORT=$(free_port)
    listen jt808 "{ \"type\": \"jt808\", \"listen\": \"127.0.0.1:$PORT\", \"unknown_devices\": \"accept\", \"auth\": \"phone\" }" \
        "$WORK/jt808_load" "$PORT" "$CONNECTIONS" "$FRAMES" "$RECORDS"
    PORT=$(free_port)
    listen osmand "{ \"type\": \"http_server\", \"format\": \"osmand\", \"listen\": \"127.0.0.1:$PORT\", \"unknown_devices\": \"accept\" }" \
        "$WORK/osmand_load" "$PORT" "$CONNECTIONS" "$REQUESTS"
done
for name in teltonika jt808 osmand; do
    L=$(median < "$WORK/$name.rates")
    R=$(median < "$WORK/$name-replay.rates")
    case $name in
        teltonika) what="teltonika (TCP, $CONNECTIONS devices, $RECORDS records a frame, answered after the file sink flushed)" ;;
        jt808) what="jt808 (TCP, $CONNECTIONS terminals, 0x0704 batches of $RECORDS, answered after the file sink flushed)" ;;
        osmand) what="http_server osmand ($CONNECTIONS phones, keep-alive, one position a request, answered after the file sink flushed)" ;;
    esac
    printf '%s: %.0f positions/s\n' "$what" "$L"
    printf '  the same positions replayed from JSON Lines into the same sink: %.0f positions/s; ratio %.2f (target >= 0.5)\n' \
        "$R" "$(echo "$L / $R" | bc -l)"
done

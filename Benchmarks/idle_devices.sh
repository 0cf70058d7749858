#!/usr/bin/env bash
# Benchmark of many idle devices on the `teltonika` source: 10,000 devices connect and identify,
# 1,000 of them send one record a second (each waiting for its answer), the rest stay silent.
# Prints locgate's peak RSS and CPU, then its CPU with every device idle, then 20,000 devices
# against max_connections 10,000 (how many are refused, and that none are below the limit).
#
#   Benchmarks/idle_devices.sh [SECONDS]      (default 30 per phase)
#
# LOCGATE_BIN picks a binary (default: a release build made here). The devices are
# Benchmarks/idle_devices.c (C, epoll, one thread per 10,000 devices), built here.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_PER_PHASE=${1:-30}
if [ -z "${LOCGATE_BIN:-}" ]; then
    swift build -c release --static-swift-stdlib --product locgate >&2
    LOCGATE_BIN=$ROOT/.build/release/locgate
fi
WORK=$(mktemp -d /tmp/locgate-idle-bench.XXXXXX)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
gcc -O2 -o "$WORK/idle_devices" Benchmarks/idle_devices.c
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$WORK/pipeline.json" <<JSON
{ "settings": { "stats_interval": false },
  "sources": { "fmb": { "type": "teltonika", "listen": "127.0.0.1:$PORT", "unknown_devices": "accept",
                        "max_connections": 10000, "max_connections_per_address": 0 } },
  "sinks": { "out": { "type": "file", "inputs": ["fmb"], "path": "$WORK/positions.jsonl" } } }
JSON
"$LOCGATE_BIN" run "$WORK/pipeline.json" 2> "$WORK/locgate.log" &
PID=$!
PIDS+=($PID)
for _ in $(seq 1 100); do grep -q "listening for Teltonika" "$WORK/locgate.log" && break; sleep 0.05; done
TICKS=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$PID/stat"; }
rss_kib() { awk '/VmRSS/ { print $2 }' "/proc/$PID/status"; }
hwm_kib() { awk '/VmHWM/ { print $2 }' "/proc/$PID/status"; }
echo "locgate at start: RSS $(( $(rss_kib) / 1024 )) MiB"

C0=$(cpu)
RESULT=$("$WORK/idle_devices" "$PORT" 10000 1000 "$SECONDS_PER_PHASE")
C1=$(cpu)
echo "10,000 devices, 1,000 sending a record a second, ${SECONDS_PER_PHASE} s: $RESULT"
printf '  locgate CPU %.1f%% of one core; peak RSS %d MiB (target <= 150)\n' \
    "$(echo "($C1 - $C0) * 100 / $TICKS / $SECONDS_PER_PHASE" | bc -l)" "$(( $(hwm_kib) / 1024 ))"

# Idle: measured from 5 s after the devices connected (connecting and logging in cost CPU once).
sleep 2
"$WORK/idle_devices" "$PORT" 10000 0 $((SECONDS_PER_PHASE + 5)) > "$WORK/idle.out" &
CLIENT=$!
sleep 5
C0=$(cpu)
sleep "$SECONDS_PER_PHASE"
C1=$(cpu)
wait $CLIENT
echo "10,000 devices, all idle, ${SECONDS_PER_PHASE} s after they connected: $(cat "$WORK/idle.out")"
printf '  locgate CPU %.2f%% of one core; peak RSS %d MiB\n' \
    "$(echo "($C1 - $C0) * 100 / $TICKS / $SECONDS_PER_PHASE" | bc -l)" "$(( $(hwm_kib) / 1024 ))"

# 20,000 devices against max_connections 10,000: two clients of 10,000 (one process may hold
# fewer descriptors than that here), once the idle ones are gone.
sleep 2
"$WORK/idle_devices" "$PORT" 10000 0 10 > "$WORK/a.out" &
A=$!
sleep 2
"$WORK/idle_devices" "$PORT" 10000 0 8 > "$WORK/b.out"
wait $A
echo "20,000 devices against max_connections 10,000: first $(cat "$WORK/a.out"); then $(cat "$WORK/b.out")"
printf '  peak RSS %d MiB\n' "$(( $(hwm_kib) / 1024 ))"
kill -INT "$PID"; wait "$PID" || true
grep -E "refusing|error" "$WORK/locgate.log" | head -3 || true

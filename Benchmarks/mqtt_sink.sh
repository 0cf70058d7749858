#!/usr/bin/env bash
# Benchmark of the mqtt sink: positions/s published at QoS 1 from the durable queue (SQLite,
# synchronous=full), beside `mosquitto_pub -q 1 -l` sending the same messages to the same broker
# in the same run. Both count a message only once its PUBACK arrived.
#
#   Benchmarks/mqtt_sink.sh [EPOCHS]      (default 50000)
#   ROUNDS=N (default 5)  MAX_INFLIGHT=N (the sink's max_inflight, default its own 100)
#   SYNC=normal (the queue survives a crash of the process, not a power loss)
#   PLACEMENT=apart (default: the broker pinned to CPU 0, the client to CPU 1), same (both on
#   CPU 0) or free (no pinning, as before)
#
# The locgate figure is end to end: read an NMEA log, decode, commit each batch, publish, delete
# on PUBACK, exit when the queue is empty. The ratio (locgate / mosquitto_pub) should be ≥ 1.
#
# What makes the two comparable (a single pair of runs moved from 0.27 to 1.85 on the shared
# machine):
# - The same bytes: mosquitto_pub publishes the very messages the sink publishes (its payloads,
#   written by a file sink from the same log), to the same topic.
# - The same window: `-M` is the sink's max_inflight (mosquitto_pub's own default is 20).
# - The same socket options: the sink's connection has TCP_NODELAY, so mosquitto_pub gets
#   `--nodelay`; the broker gets `set_tcp_nodelay true`, so neither client waits for PUBACKs held
#   back by Nagle's algorithm until the delayed-ACK timer of its own side fires.
# - The same placement on the CPUs. mosquitto_pub's rate is bimodal with where the scheduler puts
#   it beside the broker: on one CPU, 50,000 messages took 0.34-0.38 s (client 0.12-0.13 s of
#   CPU, broker 0.10-0.12); on two, 0.83-0.87 s (client 0.31-0.33 s, broker 0.30-0.32: each message a
#   wake-up on each side), pinned with taskset, four runs each. Unpinned, the scheduler picks
#   one or the other as the machine's other load comes and goes, so the reference alone moved by
#   2.4x between rounds. Both clients are pinned the same way (locgate's threads share the
#   client's CPU). Apart is the default: a gateway's broker is on another machine, and does not
#   take the client's CPU; with both on one CPU the ratio is close to the ratio of CPU times
#   (both placements, five rounds each: apart 0.99-1.12, same 0.39-0.71, free 0.60-1.74).
# - Rounds: the machine's load moves in phases longer than one run, so each round runs both,
#   back to back, in alternating order, and the ratio of each round is printed; the summary is
#   the median and range over the rounds. CPU time (user + sys, from wait4) of the client
#   process beside it moves far less than wall time with the load.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
EPOCHS=${1:-50000}
ROUNDS=${ROUNDS:-5}
SYNC=${SYNC:-full}
WINDOW=${MAX_INFLIGHT:-100}
PLACEMENT=${PLACEMENT:-apart}
case $PLACEMENT in
    same) ON_BROKER=(taskset -c 0) ON_CLIENT=(taskset -c 0) ;;
    apart) ON_BROKER=(taskset -c 0) ON_CLIENT=(taskset -c 1) ;;
    free) ON_BROKER=() ON_CLIENT=() ;;
    *) echo "mqtt_sink: PLACEMENT is same, apart or free" >&2; exit 2 ;;
esac
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
set_tcp_nodelay true
CONF
chmod 755 "$WORK"
"${ON_BROKER[@]}" /usr/sbin/mosquitto -c "$WORK/mosquitto.conf" 2> "$WORK/broker.log" &
BROKER_PID=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.05; done

python3 "$ROOT/Benchmarks/gen_rmc_gga.py" "$EPOCHS" "$WORK/log.nmea"
# The sink's payloads (format json is the position object a jsonl file sink writes, one a line).
cat > "$WORK/payloads.json" <<JSON
{ "settings": { "stats_interval": false },
  "sources": { "rx": { "type": "file", "path": "$WORK/log.nmea", "progress": false, "device": "van-1" } },
  "sinks": { "out": { "type": "file", "inputs": ["rx"], "path": "$WORK/lines.txt", "mode": "truncate" } } }
JSON
"$BIN" run "$WORK/payloads.json" --log-level warning
LINES=$(wc -l < "$WORK/lines.txt")
[[ $LINES == "$EPOCHS" ]] || { echo "mqtt_sink: $LINES payloads for $EPOCHS epochs" >&2; exit 1; }

cat > "$WORK/pipeline.json" <<JSON
{ "settings": { "shutdown_timeout": "600s", "stats_interval": "600s" },
  "sources": { "rx": { "type": "file", "path": "$WORK/log.nmea", "progress": false, "device": "van-1" } },
  "sinks": { "up": { "type": "mqtt", "inputs": ["rx"], "url": "mqtt://127.0.0.1:$PORT", "qos": 1,
                     "topic": "bench/{device}"$INFLIGHT,
                     "queue": { "path": "$WORK/queue.sqlite", "synchronous": "$SYNC" } } } }
JSON

# Runs a command; prints "wall_s cpu_s" (CPU: user + sys of the process and its children).
measure() {
    python3 - "$@" <<'PY'
import os, subprocess, sys, time
stdin = open(os.environ["MEASURE_STDIN"], "rb") if os.environ.get("MEASURE_STDIN") else subprocess.DEVNULL
err = open(os.environ["MEASURE_STDERR"], "ab")
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdin=stdin, stderr=err)
_, status, usage = os.wait4(p.pid, 0)
wall = time.perf_counter() - t0
if os.waitstatus_to_exitcode(status) != 0:
    sys.exit("%s failed (%d)" % (sys.argv[1], os.waitstatus_to_exitcode(status)))
print("%.3f %.3f" % (wall, usage.ru_utime + usage.ru_stime))
PY
}
# CPU seconds the broker used so far (utime + stime in clock ticks, proc(5)).
broker_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$BROKER_PID/stat"; }

run_pub() {
    MEASURE_STDIN=$WORK/lines.txt MEASURE_STDERR=$WORK/pub.log \
        measure "${ON_CLIENT[@]}" mosquitto_pub -h 127.0.0.1 -p "$PORT" -q 1 -t bench/van-1 -l -M "$WINDOW" --nodelay
}
run_locgate() {
    rm -f "$WORK"/queue.sqlite*
    MEASURE_STDERR=$WORK/locgate.log measure "${ON_CLIENT[@]}" "$BIN" run "$WORK/pipeline.json"
}
# Checked in the script's own shell (run_locgate runs in a subshell, where exit would not stop it).
check_queue() {
    local left
    left=$(sqlite3 "$WORK/queue.sqlite" "SELECT count(*) FROM pending" 2>&1) || true
    [[ $left == 0 ]] || { echo "mqtt_sink: the queue still holds: $left" >&2; tail -5 "$WORK/locgate.log" >&2; exit 1; }
}

echo "mqtt sink benchmark: $EPOCHS messages at QoS 1 (${LINES} payloads of $(($(wc -c < "$WORK/lines.txt") / LINES - 1)) bytes on average), window $WINDOW, mosquitto $(/usr/sbin/mosquitto -h 2>&1 | awk 'NR==1{print $3}') with set_tcp_nodelay on 127.0.0.1:$PORT; placement $PLACEMENT; $ROUNDS rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %-6s %10s %8s %7s %10s %8s %7s %7s %9s\n' round first "pub msg/s" "pub s" "CPU s" "lg pos/s" "lg s" "CPU s" ratio "CPU ratio"
RATIOS=()
CPU_RATIOS=()
for r in $(seq "$ROUNDS"); do
    b0=$(broker_cpu)
    if (( r % 2 )); then
        read -r pw pc < <(run_pub); b1=$(broker_cpu)
        read -r lw lc < <(run_locgate); b2=$(broker_cpu); first=pub; check_queue
        bp=$(echo "$b1 - $b0" | bc); bl=$(echo "$b2 - $b1" | bc)
    else
        read -r lw lc < <(run_locgate); b1=$(broker_cpu); check_queue
        read -r pw pc < <(run_pub); b2=$(broker_cpu); first=locgate
        bl=$(echo "$b1 - $b0" | bc); bp=$(echo "$b2 - $b1" | bc)
    fi
    ratio=$(echo "scale=4; $pw / $lw" | bc)
    cpu_ratio=$(echo "scale=4; $pc / $lc" | bc)
    RATIOS+=("$ratio"); CPU_RATIOS+=("$cpu_ratio")
    printf '%-5s %-6s %10.0f %8.2f %7.2f %10.0f %8.2f %7.2f %7.2f %9.2f   (broker CPU %s s / %s s)\n' "$r" "$first" \
        "$(echo "$EPOCHS / $pw" | bc -l)" "$pw" "$pc" "$(echo "$EPOCHS / $lw" | bc -l)" "$lw" "$lc" "$ratio" "$cpu_ratio" "$bp" "$bl"
done
python3 - "${RATIOS[*]}" "${CPU_RATIOS[*]}" <<'PY'
import statistics, sys
r = [float(x) for x in sys.argv[1].split()]
c = [float(x) for x in sys.argv[2].split()]
print("ratio locgate / mosquitto_pub (rate): median %.2f, range %.2f - %.2f over %d rounds; target >= 1.0" % (statistics.median(r), min(r), max(r), len(r)))
print("CPU ratio mosquitto_pub / locgate (client process): median %.2f, range %.2f - %.2f" % (statistics.median(c), min(c), max(c)))
PY

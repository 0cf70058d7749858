#!/usr/bin/env bash
# Benchmark of the nats sink: positions/s from a replayed NMEA log through the sink with the
# durable outbox (SQLite, synchronous=full) into an R3 JetStream stream on a 3-node nats-server
# cluster on loopback, beside the same sink with `"queue": null` (the memory queue) and, as the
# ceiling, asynchronous publishing of the same bodies from C (nats_async_pub.c, libnats'
# js_PublishMsgAsync with the same window), into the same stream; after the rounds, synchronous
# publishing (one PubAck awaited per message) for scale.
#
#   Benchmarks/nats_sink.sh [EPOCHS]      (default 100000)
#   ROUNDS=N (default 5): rounds of the three runs, in alternating order; the ratio durable /
#   memory (target >= 0.8) per round, then its median and range.
#
# The sink's figure is end to end: from the process start until it exits, which it does only
# once every position is acknowledged by the stream and deleted from the outbox.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
EPOCHS=${1:-100000}
SYNC_COUNT=${SYNC_COUNT:-20000}
ROUNDS=${ROUNDS:-5}
MAX_PENDING=${MAX_PENDING:-1000}
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
# The sink's message bodies (the position object a jsonl file sink writes, one a line), for the C publisher.
cat > "$WORK/payloads.json" <<JSON
{ "settings": { "stats_interval": false },
  "sources": { "rx": { "type": "file", "path": "$WORK/log.nmea", "progress": false, "device": "bench" } },
  "sinks": { "out": { "type": "file", "inputs": ["rx"], "path": "$WORK/lines.txt", "mode": "truncate" } } }
JSON
"$BIN" run "$WORK/payloads.json" --log-level warning
gcc -O2 -o "$WORK/nats_async_pub" "$ROOT/Benchmarks/nats_async_pub.c" -lnats

LIST=$(echo "$SERVERS" | sed 's/[^,]*/"&"/g')
# pipeline RUN QUEUE_JSON: the source is named after the run, so its position ids (the
# Nats-Msg-Id) are new to the stream's duplicate window in every run.
pipeline() {
    cat > "$WORK/$1.json" <<JSON
{ "settings": { "shutdown_timeout": "600s", "stats_interval": "600s" },
  "sources": { "$1": { "type": "file", "path": "$WORK/log.nmea", "progress": false, "device": "bench" } },
  "sinks": { "bus": { "type": "nats", "inputs": ["$1"], "servers": [$LIST],
                      "subject": "locgate.positions.{device}", "expect_stream": "LOCGATE",
                      "max_pending": $MAX_PENDING, "queue": $2 } } }
JSON
}
STORED=0
# Checks that the stream gained EPOCHS messages in the last run.
check_stored() {
    local now
    now=$("$TOOL" count "$SERVERS" LOCGATE)
    if [[ $now != $((STORED + EPOCHS)) ]]; then
        echo "nats_sink: $1: the stream holds $now messages, expected $((STORED + EPOCHS))" >&2
        tail -20 "$WORK/locgate.log" >&2
        exit 1
    fi
    STORED=$now
}
seconds() { python3 -c 'import sys; print("%.3f" % ((int(sys.argv[2]) - int(sys.argv[1])) / 1e9))' "$1" "$2"; }
run_sink() {  # run_sink RUN QUEUE_JSON: prints seconds
    pipeline "$1" "$2"
    rm -f "$WORK"/outbox.sqlite*
    local t0 t1
    t0=$(date +%s%N)
    "$BIN" run "$WORK/$1.json" 2> "$WORK/locgate.log"
    t1=$(date +%s%N)
    seconds "$t0" "$t1"
}

echo "nats sink benchmark: $EPOCHS positions into an R3 JetStream stream (3 nodes, loopback), max_pending $MAX_PENDING; $ROUNDS rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %12s %12s %12s %9s %9s\n' round "durable/s" "memory/s" "async C/s" "dur/mem" "dur/C"
DM=() DC=()
for r in $(seq "$ROUNDS"); do
    if (( r % 2 )); then order="durable memory async"; else order="async memory durable"; fi
    for what in $order; do
        case $what in
            durable) d=$(run_sink "d$r" "{ \"path\": \"$WORK/outbox.sqlite\" }"); check_stored "durable" ;;
            memory) m=$(run_sink "m$r" null); check_stored "memory" ;;
            async) read -r _ c < <("$WORK/nats_async_pub" "$SERVERS" locgate.positions.bench "$WORK/lines.txt" "c$r" "$MAX_PENDING"); check_stored "async C" ;;
        esac
    done
    dr=$(echo "$EPOCHS / $d" | bc -l); mr=$(echo "$EPOCHS / $m" | bc -l); cr=$(echo "$EPOCHS / $c" | bc -l)
    DM+=("$(echo "$dr / $mr" | bc -l)"); DC+=("$(echo "$dr / $cr" | bc -l)")
    printf '%-5s %12.0f %12.0f %12.0f %9.2f %9.2f\n' "$r" "$dr" "$mr" "$cr" "${DM[-1]}" "${DC[-1]}"
done

read -r sync_n sync_s < <("$TOOL" sync-publish "$SERVERS" locgate.sync.bench "$SYNC_COUNT")
python3 - "${DM[*]}" "${DC[*]}" "$sync_n" "$sync_s" <<'PY'
import statistics, sys
dm = [float(x) for x in sys.argv[1].split()]
dc = [float(x) for x in sys.argv[2].split()]
print("ratio durable / \"queue\": null, positions/s: median %.2f, range %.2f - %.2f over %d rounds; target >= 0.8" % (statistics.median(dm), min(dm), max(dm), len(dm)))
print("ratio durable / async C publisher (the ceiling): median %.2f, range %.2f - %.2f" % (statistics.median(dc), min(dc), max(dc)))
print("synchronous js_Publish, one PubAck awaited per message: %s messages in %.2f s = %.0f messages/s" % (sys.argv[3], float(sys.argv[4]), int(sys.argv[3]) / float(sys.argv[4])))
PY

#!/usr/bin/env bash
# Benchmark of the sources devices call into, each beside a replay of the same positions:
#
# - `teltonika`: 100 devices over TCP, 10 records a frame, each frame answered only once the sink
#   took it over (a device waits for every answer before its next frame);
# - `jt808`: 100 JT/T 808 terminals over TCP, each authenticated, then 0x0704 batches of 10
#   locations, each batch answered (0x8001) only once the sink took it over;
# - `gt06`: 100 GT06 devices over TCP, each logged in, then one 0x22 position a frame, each frame
#   answered only once the sink took it over (the most answers per position);
# - `http_server` (`format: "osmand"`): 100 Traccar Client phones on kept-alive connections, one
#   position per request, each request answered only once the sink took it over;
#
# each into two sinks, in turn:
#
# - `file`: a JSON Lines file; "taken over" is the flush. The same positions are then replayed
#   from that file by the `file` source into the same kind of file. The ratio is the price of
#   devices calling in (framing, checksums, HTTP, the I/O thread, one round trip per frame or
#   request) over reading the same positions from disk.
# - `durable`: an `http` sink with a durable SQLite queue (`synchronous` full, the default) to a
#   local receiver (Benchmarks/minimal_receiver.py); "taken over" is the commit, synced. This is
#   the path Docs/Architecture.md ("A tracker frame, from socket to answer") follows hop by hop:
#   a device's answer waits for the queue's thread, then for the loop's. After each run the
#   script waits until the receiver has every answered position, so nothing answered is missing.
#
# For each: positions/s, answers/s, and each answer's latency (from the frame's write to the end
# of its answer, at the device: p50, p99), medians of the rounds.
#
#   Benchmarks/trackers.sh [FRAMES_PER_DEVICE] [REQUESTS_PER_PHONE]   (defaults 200 and 500:
#                                                  200,000, 20,000 (gt06) and 50,000 positions)
#
# Measured here (3 rounds, 2 cores, one shared machine): teltonika 128,287 positions/s beside a
# replay of 76,495 (ratio 1.68); jt808 198,610 beside 120,075 (ratio 1.65, 2026-12-06, teltonika
# 2.20 in the same run); http_server osmand 12,674 beside 95,168 (ratio 0.13, below the
# 0.5 aimed at). The osmand side is bound by libmicrohttpd's one event thread (80% of the samples:
# parsing, the epoll_ctl of each suspend and resume, one send per answer, the pool it clears per
# request), about 80 us a request with one position each; a second event thread gave 15-20%.
# Clients that post many positions per request (OwnTracks arrays, locgate json) pay it once.
# The durable sink's figures are in Benchmarks/README.md.
#
# ROUNDS (default 3) interleaved rounds; medians printed. LOADS (default "teltonika jt808 gt06
# osmand") and SINKS (default "file durable") pick what runs, e.g. SINKS=durable for the durable
# path alone. LOCGATE_BIN picks a binary (default: a release build made here). The loads are
# Benchmarks/tracker_load.c, jt808_load.c, gt06_load.c and osmand_load.c (C, one thread, poll),
# built here.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
FRAMES=${1:-200}
REQUESTS=${2:-500}
ROUNDS=${ROUNDS:-3}
LOADS=${LOADS:-teltonika jt808 gt06 osmand}
SINKS=${SINKS:-file durable}
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
    # Reaped here, so bash does not report each as "Killed".
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
for load in tracker_load osmand_load jt808_load gt06_load; do
    gcc -O2 -o "$WORK/$load" "Benchmarks/$load.c"
done

now() { date +%s.%N; }
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# field NAME LINE: the value of NAME=… in a load's line of figures.
field() { sed -E "s/(^|.* )$1=([0-9.]+).*/\2/" <<<"$2"; }

RECEIVED=$WORK/received.count
if [[ " $SINKS " == *" durable "* ]]; then
    python3 Benchmarks/minimal_receiver.py "$RECEIVED" > "$WORK/receiver.port" &
    PIDS+=($!)
    for _ in $(seq 100); do [[ -s $WORK/receiver.port ]] && break; sleep 0.05; done
    RECEIVER_PORT=$(awk '{print $2}' "$WORK/receiver.port")
fi
received() { cat "$RECEIVED" 2>/dev/null || echo 0; }

# listen NAME SINK SOURCE_JSON LOAD_COMMAND...: runs the source into SINK (file or durable) under
# the load and appends positions/s, answers/s and the answer latencies to NAME-SINK.*; after a
# file run, replays NAME-file.jsonl and appends to NAME-replay.rates.
listen() {
    local name=$1 sink=$2 source=$3
    shift 3
    local run=$name-$sink sink_json
    rm -f "$WORK/$run.jsonl" "$WORK/$name-replayed.jsonl" "$WORK/$run".sqlite* "$WORK"/state-"$run".sqlite*
    case $sink in
        file) sink_json="{ \"type\": \"file\", \"inputs\": [\"devices\"], \"path\": \"$WORK/$run.jsonl\" }" ;;
        durable) sink_json="{ \"type\": \"http\", \"inputs\": [\"devices\"], \"url\": \"http://127.0.0.1:$RECEIVER_PORT/track\",
                   \"batch\": { \"max_positions\": 500, \"interval\": \"1s\" }, \"queue\": { \"path\": \"$WORK/$run.sqlite\" } }" ;;
    esac
    cat > "$WORK/$run.json" <<JSON
{ "settings": { "stats_interval": false },
  "sources": { "devices": $source },
  "sinks": { "out": $sink_json } }
JSON
    local before
    before=$(received)
    "$LOCGATE_BIN" run "$WORK/$run.json" 2> "$WORK/$run.log" &
    local pid=$!
    PIDS+=($pid)
    for _ in $(seq 1 100); do grep -q "listening for" "$WORK/$run.log" && break; sleep 0.05; done
    local result n s answers
    result=$("$@")
    n=$(sed -E 's/.*(records|requests)=([0-9]+).*/\2/' <<<"$result")
    s=$(field seconds "$result")
    answers=$(sed -E 's/.*(answers_ok|ok)=([0-9]+).*/\2/' <<<"$result")
    if [ "$sink" = durable ]; then
        # Every answered position reaches the receiver (the queue then empty), so the next run
        # does not share the machine with this one's deliveries.
        for _ in $(seq 1 1200); do (( $(received) - before >= n )) && break; sleep 0.05; done
        (( $(received) - before == n )) || { echo "$run: the receiver has $(( $(received) - before )) positions, the devices were answered for $n" >&2; exit 1; }
    fi
    kill -INT "$pid"; wait "$pid" || true
    if [ "$sink" = file ]; then
        local lines
        lines=$(wc -l < "$WORK/$run.jsonl")
        [ "$lines" -eq "$n" ] || { echo "$run: the file has $lines positions, the devices were answered for $n" >&2; exit 1; }
    fi
    echo "$n / $s" | bc -l >> "$WORK/$run.rates"
    echo "$answers / $s" | bc -l >> "$WORK/$run.answers"
    field p50_ms "$result" >> "$WORK/$run.p50"
    field p99_ms "$result" >> "$WORK/$run.p99"
    printf 'round %d: %-9s %-7s %7.0f positions/s, %6.0f answers/s, answer p50 %6.3f ms, p99 %7.3f ms' "$round" "$name" "$sink" \
        "$(tail -1 "$WORK/$run.rates")" "$(tail -1 "$WORK/$run.answers")" "$(tail -1 "$WORK/$run.p50")" "$(tail -1 "$WORK/$run.p99")"
    if [ "$sink" = durable ]; then printf '\n'; return; fi

    cat > "$WORK/$name-replay.json" <<JSON
{ "settings": { "stats_interval": false },
  "sources": { "log": { "type": "file", "path": "$WORK/$run.jsonl" } },
  "sinks": { "out": { "type": "file", "inputs": ["log"], "path": "$WORK/$name-replayed.jsonl" } } }
JSON
    local t0 t1
    t0=$(now)
    "$LOCGATE_BIN" run "$WORK/$name-replay.json" 2> "$WORK/$name-replay.log"
    t1=$(now)
    echo "$n / ($t1 - $t0)" | bc -l >> "$WORK/$name-replay.rates"
    printf '; replay %.0f positions/s\n' "$(tail -1 "$WORK/$name-replay.rates")"
}

for round in $(seq 1 "$ROUNDS"); do
    # Alternate the order of the sinks from round to round: the machine's load moves in phases.
    if (( round % 2 )); then order=$SINKS; else order=$(tr ' ' '\n' <<<"$SINKS" | tac | tr '\n' ' '); fi
    for name in $LOADS; do
        for sink in $order; do
            PORT=$(free_port)
            case $name in
                teltonika) listen teltonika "$sink" "{ \"type\": \"teltonika\", \"listen\": \"127.0.0.1:$PORT\", \"unknown_devices\": \"accept\" }" \
                    "$WORK/tracker_load" "$PORT" "$CONNECTIONS" "$FRAMES" "$RECORDS" ;;
                jt808) listen jt808 "$sink" "{ \"type\": \"jt808\", \"listen\": \"127.0.0.1:$PORT\", \"unknown_devices\": \"accept\", \"auth\": \"phone\" }" \
                    "$WORK/jt808_load" "$PORT" "$CONNECTIONS" "$FRAMES" "$RECORDS" ;;
                gt06) listen gt06 "$sink" "{ \"type\": \"gt06\", \"listen\": \"127.0.0.1:$PORT\", \"unknown_devices\": \"accept\" }" \
                    "$WORK/gt06_load" "$PORT" "$CONNECTIONS" "$FRAMES" ;;
                osmand) listen osmand "$sink" "{ \"type\": \"http_server\", \"format\": \"osmand\", \"listen\": \"127.0.0.1:$PORT\", \"unknown_devices\": \"accept\" }" \
                    "$WORK/osmand_load" "$PORT" "$CONNECTIONS" "$REQUESTS" ;;
                *) echo "unknown load $name" >&2; exit 2 ;;
            esac
        done
    done
done
for name in $LOADS; do
    case $name in
        teltonika) what="teltonika (TCP, $CONNECTIONS devices, $RECORDS records a frame)" ;;
        jt808) what="jt808 (TCP, $CONNECTIONS terminals, 0x0704 batches of $RECORDS)" ;;
        gt06) what="gt06 (TCP, $CONNECTIONS devices, one position a frame)" ;;
        osmand) what="http_server osmand ($CONNECTIONS phones, keep-alive, one position a request)" ;;
    esac
    echo "$what, medians of $ROUNDS rounds:"
    for sink in $SINKS; do
        run=$name-$sink
        case $sink in
            file) how="file sink, answered after its flush" ;;
            durable) how="http sink, durable queue, answered after the synced commit" ;;
        esac
        printf '  %-58s %7.0f positions/s, %6.0f answers/s, answer p50 %6.3f ms, p99 %7.3f ms\n' "$how:" \
            "$(median < "$WORK/$run.rates")" "$(median < "$WORK/$run.answers")" "$(median < "$WORK/$run.p50")" "$(median < "$WORK/$run.p99")"
        if [ "$sink" = file ]; then
            L=$(median < "$WORK/$run.rates")
            R=$(median < "$WORK/$name-replay.rates")
            printf '    the same positions replayed from JSON Lines into the same sink: %.0f positions/s; ratio %.2f (target >= 0.5)\n' \
                "$R" "$(echo "$L / $R" | bc -l)"
        fi
    done
done

#!/usr/bin/env bash
# A whole fleet on this machine, loopback only: a 3-node nats-server cluster whose subject
# mapping partitions locgate.positions.<device> into locgate.part.<0-3>.<device>; two gateways
# replaying NMEA logs into the nats sink; two aggregators (partitions 0+1 and 2+3, one durable
# consumer per partition) and a reference aggregator reading every partition, each running a
# geofence and writing positions and enter/exit events to a file. The two partitioned
# aggregators keep their geofence state in one JetStream Key-Value bucket (settings.state.nats).
# Aggregator 1 is killed with kill -9 while it consumes and started again (FLEET_KILL=0 skips
# that); then partition 3 moves from aggregator 1 to aggregator 0: aggregator 1 is restarted
# without it (aggregator-1-moved.json), then aggregator 0 with it (aggregator-0-moved.json),
# and aggregator 0 continues its devices from the state aggregator 1 left in the bucket
# (FLEET_MOVE=0 skips that). Then the outputs are compared (compare.py) and everything is stopped.
#
# Usage: Docs/examples/fleet/fleet.sh [LOCGATE_BINARY]   (default .build/debug/locgate)
# Environment: FLEET_EPOCHS (positions per device, 600), FLEET_RATE (gateway replay rate, "20x"),
# FLEET_KILL (1), FLEET_MOVE (1), FLEET_WORK (a directory to keep; default a temporary one, removed at the end).
# Exit status 0 when the partitioned aggregators saw every position and the reference's events.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
locgate=$(realpath "${1:-$root/.build/debug/locgate}")
epochs=${FLEET_EPOCHS:-600}
export FLEET_RATE=${FLEET_RATE:-20x}
kill_one=${FLEET_KILL:-1}
move_one=${FLEET_MOVE:-1}
keep=${FLEET_WORK:+1}
export FLEET_WORK=${FLEET_WORK:-$(mktemp -d /tmp/locgate-fleet.XXXXXX)}
export FLEET_DATA=$FLEET_WORK/data
mkdir -p "$FLEET_DATA"
pids=()

stop_all() {
  local status=$?
  # Every process this script started, by its own id.
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  # A failed run shows why before its work directory goes.
  if [ "$status" != 0 ]; then
    for f in "$FLEET_WORK"/*.log; do [ -f "$f" ] && { echo "== ${f##*/} (last lines)" >&2; tail -n 15 "$f" >&2; }; done
  fi
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "$keep" ] || rm -rf "$FLEET_WORK"
}
trap stop_all EXIT

log() { echo "fleet: $*" >&2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

# --- the cluster: one config per node, with the partition mapping --------------------------
declare -a client cluster http
for i in 1 2 3; do client[$i]=$(free_port); cluster[$i]=$(free_port); http[$i]=$(free_port); done
for i in 1 2 3; do
  routes=""
  for j in 1 2 3; do [ "$j" = "$i" ] || routes="$routes nats-route://127.0.0.1:${cluster[$j]}"; done
  cat > "$FLEET_WORK/n$i.conf" <<CONF
server_name: n$i
listen: 127.0.0.1:${client[$i]}
http: 127.0.0.1:${http[$i]}
jetstream { store_dir: "$FLEET_WORK/n$i-store" }
cluster {
  name: locgate-fleet
  listen: 127.0.0.1:${cluster[$i]}
  routes: [$(echo $routes | sed 's/ /, /g')]
}
# Each device's subject goes to one of 4 partitions, by a hash of its last token: the same
# device always lands in the same partition, so one aggregator holds its geofence state.
mappings = {
  "locgate.positions.*": "locgate.part.{{partition(4,1)}}.{{wildcard(1)}}"
}
CONF
  nats-server -c "$FLEET_WORK/n$i.conf" > "$FLEET_WORK/n$i.log" 2>&1 &
  pids+=($!)
  export NATS_$i=nats://127.0.0.1:${client[$i]}
done
for i in 1 2 3; do
  for _ in $(seq 1 300); do
    curl -fs "http://127.0.0.1:${http[$i]}/jsz" 2>/dev/null | grep -q '"leader": *"n' && break
    sleep 0.2
  done
done
log "cluster up on ports ${client[*]}"

# --- data and configurations ----------------------------------------------------------------
python3 "$here/gen_tracks.py" "$FLEET_DATA" "$epochs" van-1 van-2 van-3 van-4
python3 "$here/gen_tracks.py" "$FLEET_DATA" "$epochs" truck-1 truck-2 truck-3 truck-4
for c in gateway-a gateway-b aggregator-0 aggregator-1 aggregator-all aggregator-0-moved aggregator-1-moved; do
  "$locgate" validate "$here/$c.json" > /dev/null
done

start() {  # name [config]: runs locgate on $here/<config or name>.json, its log in the work directory
  "$locgate" run "$here/${2:-$1}.json" > /dev/null 2>> "$FLEET_WORK/$1.log" &
  pids+=($!)
  eval "pid_${1//-/_}=$!"
}

lines() { [ -f "$1" ] && wc -l < "$1" || echo 0; }

# Aggregators first: they wait for the stream the gateways' sink creates.
start aggregator-0
start aggregator-1
start aggregator-all
start gateway-a
start gateway-b

if [ "$kill_one" = 1 ]; then
  for _ in $(seq 1 600); do
    [ "$(lines "$FLEET_WORK/aggregator-1.jsonl")" -ge 200 ] && break
    kill -0 "$pid_aggregator_1" 2>/dev/null || { log "aggregator-1 exited before its kill"; exit 1; }
    sleep 0.1
  done
  log "kill -9 aggregator-1 after $(lines "$FLEET_WORK/aggregator-1.jsonl") lines"
  kill -9 "$pid_aggregator_1"
  wait "$pid_aggregator_1" 2>/dev/null || true
  sleep 1
  start aggregator-1
fi

stop() {  # name: SIGTERM, and wait until it has flushed its file and saved its state
  local pid_var="pid_${1//-/_}"
  kill -TERM "${!pid_var}" 2>/dev/null || true
  wait "${!pid_var}" 2>/dev/null || true
}

if [ "$move_one" = 1 ]; then
  # Once the restarted aggregator 1 consumes again, partition 3 moves: its old reader stops
  # first (a partition is read by one aggregator at a time), then the new one starts.
  before=$(lines "$FLEET_WORK/aggregator-1.jsonl")
  for _ in $(seq 1 600); do [ "$(lines "$FLEET_WORK/aggregator-1.jsonl")" -ge $((before + 100)) ] && break; sleep 0.1; done
  log "moving partition 3 from aggregator-1 to aggregator-0 after $(lines "$FLEET_WORK/aggregator-1.jsonl") lines"
  stop aggregator-1
  start aggregator-1 aggregator-1-moved
  stop aggregator-0
  start aggregator-0 aggregator-0-moved
  log "moved partition 3"
fi

# The gateways end when their logs are replayed and their outboxes drained.
wait "$pid_gateway_a"
wait "$pid_gateway_b"
log "gateways done"

expected=$((8 * epochs))
count_positions() { cat "$@" 2>/dev/null | grep -v '"event"' | python3 -c 'import sys,json
ids=set()
for l in sys.stdin:
    try: ids.add(json.loads(l)["id"])
    except Exception: pass
print(len(ids))'; }
for _ in $(seq 1 600); do
  a=$(count_positions "$FLEET_WORK/aggregator-0.jsonl" "$FLEET_WORK/aggregator-1.jsonl")
  r=$(count_positions "$FLEET_WORK/aggregator-all.jsonl")
  [ "$a" -ge "$expected" ] && [ "$r" -ge "$expected" ] && break
  sleep 0.2
done
# Stop the aggregators cleanly: they flush their files.
for p in "$pid_aggregator_0" "$pid_aggregator_1" "$pid_aggregator_all"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "$pid_aggregator_0" "$pid_aggregator_1" "$pid_aggregator_all"; do wait "$p" 2>/dev/null || true; done

python3 "$here/compare.py" "$expected" "$FLEET_WORK/aggregator-all.jsonl" \
  "$FLEET_WORK/aggregator-0.jsonl" "$FLEET_WORK/aggregator-1.jsonl"

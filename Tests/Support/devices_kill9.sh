#!/usr/bin/env bash
# 200 simulated trackers (100 Teltonika sending 120 frames of 5 records, 100 GT06 sending 400
# positions) into a file sink and a durable http sink, while locgate is killed -9 every 2-4 s
# (seeded) and started again. At the end: every record a device was answered for (and so
# deleted) must be in the file and at the HTTP receiver; duplicates (resent frames) are counted.
#
#   Tests/Support/devices_kill9.sh           (LOCGATE_BIN: the binary, default the release build)
#
# Loopback only; about a minute. Its work directory is printed and kept.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${LOCGATE_BIN:-$ROOT/.build/release/locgate}
SIM=$ROOT/Tests/Support/device_simulator.py
REC=$ROOT/Tests/HTTPOutputTests/Support/receiver.py
WORK=$(mktemp -d /tmp/locgate-devices-kill9.XXXXXX)
cd "$WORK" && echo "work directory: $WORK"
TP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
GP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 $REC --record requests.jsonl --port 0 > rec.out &
RECPID=$!
sleep 1
RP=$(head -1 rec.out | awk '{print $2}')
cat > pipeline.json <<JSON
{"settings":{"shutdown_timeout":"1s","stats_interval":false},
 "sources":{"fmb":{"type":"teltonika","listen":"127.0.0.1:$TP","unknown_devices":"accept"},
            "gt":{"type":"gt06","listen":"127.0.0.1:$GP","unknown_devices":"accept"}},
 "sinks":{"file":{"type":"file","inputs":["fmb","gt"],"path":"positions.jsonl"},
          "upload":{"type":"http","inputs":["fmb","gt"],"url":"http://127.0.0.1:$RP/track","batch":{"max_positions":500,"interval":"200ms"},
                    "retry":{"initial":"100ms","max":"500ms"},"queue":{"path":"upload.sqlite"}}}}
JSON
$BIN run pipeline.json 2> run-0.log & PID=$!
sleep 1
python3 $SIM --protocol teltonika --port $TP --devices 100 --frames 120 --records 5 --interval 0.3 --answered answered-t.jsonl --until-file done --seed 3 > t.out 2>&1 &
T=$!
python3 $SIM --protocol gt06 --port $GP --devices 100 --frames 400 --interval 0.1 --first-imei 860000000000000 --answered answered-g.jsonl --until-file done --seed 4 > g.out 2>&1 &
G=$!
kills=0
while kill -0 $T 2>/dev/null || kill -0 $G 2>/dev/null; do
  sleep $(python3 -c "import random; random.seed($kills); print(random.uniform(2,4))")
  kill -0 $T 2>/dev/null || kill -0 $G 2>/dev/null || break
  kill -9 $PID; wait $PID 2>/dev/null; kills=$((kills+1))
  $BIN run pipeline.json 2> run-$kills.log & PID=$!
done
touch done
echo "kills: $kills"; cat t.out g.out
sleep 5
kill -INT $PID; wait $PID
python3 - <<'PY'
import json
ans=set()
for f in ["answered-t.jsonl","answered-g.jsonl"]:
    for l in open(f):
        o=json.loads(l); ans.add((o["imei"],o["time_ms"]))
import datetime
def ms(t): return int(datetime.datetime.fromisoformat(t.replace("Z","+00:00")).timestamp()*1000)
filed=[]
for l in open("positions.jsonl"):
    o=json.loads(l); filed.append((o["device"],ms(o["time"])))
up=[]
for l in open("requests.jsonl"):
    r=json.loads(l)
    if r["status"]!=200: continue
    for o in json.loads(r["body"]): up.append((o["device"],ms(o["time"])))
print("answered", len(ans), "file rows", len(filed), "distinct", len(set(filed)), "missing from file", len(ans-set(filed)))
print("uploaded rows", len(up), "distinct", len(set(up)), "missing from upload", len(ans-set(up)))
PY
kill $RECPID

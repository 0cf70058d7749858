#!/usr/bin/env bash
# Benchmark of the postgres sink: rows/s from a replayed NMEA log through the durable outbox
# (SQLite, synchronous=full) into PostGIS, beside `psql -c "\copy …"` of the same rows into an
# identical table (same columns, primary key, (device, time) index and GiST index) on the same
# server in the same run. The sink's figure is end to end: from the process start until it exits,
# which it does only once every position is committed in PostgreSQL and deleted from the outbox.
#
#   Benchmarks/postgres_sink.sh [EPOCHS]      (default 100000 positions: four devices of EPOCHS/4)
#
# Also: the same replay again (every id stored already: the staged INSERT … ON CONFLICT path),
# the sink with "queue": null, and the SQL forms a batch could take (Benchmarks/postgres_forms.py,
# through psql, best of 3; FORMS=0 skips them).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
EPOCHS=${1:-100000}
PER_DEVICE=$((EPOCHS / 4))
EPOCHS=$((PER_DEVICE * 4))
# Always (incremental): a stale binary would measure old code.
swift build -c release --static-swift-stdlib --product locgate >&2
BIN=$ROOT/.build/release/locgate
WORK=$(mktemp -d /tmp/locgate-pg-bench.XXXXXX)
chmod 755 "$WORK"
PGBIN=$(pg_config --bindir 2>/dev/null || true)
[[ -x $PGBIN/initdb ]] || PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
# PostgreSQL refuses to run as root: its programs then run as the postgres user.
AS=()
if [[ $(id -u) == 0 ]]; then
    AS=(runuser -u postgres --)
    chown postgres "$WORK"
fi
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
    "${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

"${AS[@]}" "$PGBIN/initdb" -D "$WORK/data" -U locgate --auth=trust -E UTF8 --locale=C >/dev/null
# fsync and synchronous_commit stay on: each batch's COMMIT waits for the disk, as in production.
# Started in a shell that closes inherited descriptors, so the server holds nothing of ours.
python3 -c 'import os, sys; os.closerange(3, 1 << 16); os.execvp(sys.argv[1], sys.argv[1:])' \
    "${AS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/server.log" -w \
    -o "-p $PORT -k $WORK -c listen_addresses=127.0.0.1 -c shared_buffers=128MB -c max_wal_size=1GB" start >/dev/null
PSQL=(psql -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -U locgate)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE bench"
"${PSQL[@]}" -d bench -c "CREATE EXTENSION postgis"

python3 "$ROOT/Benchmarks/gen_rmc_gga.py" "$PER_DEVICE" "$WORK/log.nmea"

pipeline() {  # pipeline FILE QUEUE_JSON
    cat > "$1" <<JSON
{ "settings": { "shutdown_timeout": "600s", "stats_interval": "600s" },
  "sources": { "van1": { "type": "file", "path": "$WORK/log.nmea", "progress": false, "device": "van-1" },
               "van2": { "type": "file", "path": "$WORK/log.nmea", "progress": false, "device": "van-2" },
               "van3": { "type": "file", "path": "$WORK/log.nmea", "progress": false, "device": "van-3" },
               "van4": { "type": "file", "path": "$WORK/log.nmea", "progress": false, "device": "van-4" } },
  "sinks": { "db": { "type": "postgres", "inputs": ["van1", "van2", "van3", "van4"],
                     "url": "postgresql://locgate@127.0.0.1:$PORT/bench?sslmode=disable",
                     "queue": $2 } } }
JSON
}
ns() { date +%s%N; }
count() { "${PSQL[@]}" -d bench -A -t -c "SELECT count(*) FROM $1"; }
run() {  # run NAME QUEUE_JSON → seconds
    pipeline "$WORK/$1.json" "$2"
    local t0 t1
    t0=$(ns)
    "$BIN" run "$WORK/$1.json" 2> "$WORK/$1.log"
    t1=$(ns)
    echo "scale=3; ($t1 - $t0) / 1000000000" | bc
}

# Three rounds, each: the sink into empty tables, then psql's \copy of the rows it stored into an
# identical empty table (LIKE … INCLUDING ALL: the same columns, primary key and indexes) in one
# transaction. The best of each is kept: the machine may be shared.
best() { python3 -c 'import sys; print(min(float(v) for v in sys.argv[1:]))' "$@"; }
SINK=() COPY=()
for round in 1 2 3; do
    "${PSQL[@]}" -d bench -c "DROP TABLE IF EXISTS positions, latest, events, positions_copy; CHECKPOINT" >/dev/null
    rm -f "$WORK"/outbox.sqlite*
    SINK+=("$(run durable "{ \"path\": \"$WORK/outbox.sqlite\" }")")
    STORED=$(count positions)
    if [[ $STORED != "$EPOCHS" ]]; then
        echo "postgres_sink: positions holds $STORED rows, expected $EPOCHS" >&2
        tail -20 "$WORK/durable.log" >&2
        exit 1
    fi
    LEFT=$(sqlite3 "$WORK/outbox.sqlite" "SELECT count(*) FROM pending")
    "${PSQL[@]}" -d bench -c "\\copy positions TO '$WORK/rows.tsv'"
    "${PSQL[@]}" -d bench -c "CREATE TABLE positions_copy (LIKE positions INCLUDING ALL); CHECKPOINT" >/dev/null
    t0=$(ns)
    "${PSQL[@]}" -d bench -c "\\copy positions_copy FROM '$WORK/rows.tsv'"
    t1=$(ns)
    COPY+=("$(echo "scale=3; ($t1 - $t0) / 1000000000" | bc)")
done
SINK_S=$(best "${SINK[@]}")
COPY_S=$(best "${COPY[@]}")

# Every id again: each batch fails its COPY once, then goes through the staging tables.
"${PSQL[@]}" -d bench -c "CHECKPOINT" >/dev/null
RESEND_S=$(run resend "{ \"path\": \"$WORK/outbox2.sqlite\" }")
# A memory queue, into empty tables.
"${PSQL[@]}" -d bench -c "TRUNCATE positions, latest; CHECKPOINT" >/dev/null
MEMORY_S=$(run memory null)
[[ $(count positions) == "$EPOCHS" ]] || { echo "postgres_sink: the memory-queue run stored $(count positions) rows" >&2; exit 1; }

python3 - "$EPOCHS" "$SINK_S" "$COPY_S" "$RESEND_S" "$MEMORY_S" "$LEFT" "${SINK[*]}" "${COPY[*]}" <<'PY'
import sys
n = int(sys.argv[1]); sink, copy, resend, memory = map(float, sys.argv[2:6]); left = int(sys.argv[6])
rounds = "rounds: sink %s s, psql %s s" % (sys.argv[7].replace(" ", " / "), sys.argv[8].replace(" ", " / "))
print("postgres sink benchmark: %d positions (4 devices), batches of 1000, PostgreSQL %s with fsync on, loopback TCP" % (n, "15"))
print("locgate → postgres sink, durable outbox (synchronous=full): %7.2f s = %7.0f rows/s (end to end, outbox empty at exit: %d left)" % (sink, n / sink, left))
print("psql \\copy of the same rows into an identical table:         %7.2f s = %7.0f rows/s" % (copy, n / copy))
print("ratio sink / psql \\copy: %.2f   (best of 3; %s)" % ((n / sink) / (n / copy), rounds))
print("the same replay again (every id stored: staged ON CONFLICT):  %7.2f s = %7.0f rows/s" % (resend, n / resend))
print("locgate → postgres sink, \"queue\": null:                      %7.2f s = %7.0f rows/s" % (memory, n / memory))
PY

if [[ ${FORMS:-1} != 0 ]]; then
    echo "SQL forms of a batch (100,000 rows, batches of 1000, one transaction each, through psql; best of 3):"
    python3 "$ROOT/Benchmarks/postgres_forms.py" "${PSQL[@]}" -d bench
fi

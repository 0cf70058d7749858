#!/usr/bin/env python3
"""The SQL forms a batch of the postgres sink could take, timed through psql on the same server:
100,000 positions in batches of 1000 (one transaction each) into a table laid out as the sink's
`positions` (primary key on id, (device, time) index, GiST on geom) and `latest`, best of 3.

usage: postgres_forms.py PSQL-COMMAND…     (e.g. psql -h /tmp/x -p 5432 -U locgate -d bench)

The sink uses form 1 and, when a batch holds ids that are stored already, form 2.
"""
import binascii, struct, subprocess, sys, tempfile, time, os

PSQL = sys.argv[1:] + ["-X", "-q", "-v", "ON_ERROR_STOP=1"]
N, B, DEVICES = 100_000, 1000, 20
WORK = tempfile.mkdtemp(prefix="locgate-pg-forms.")

COLS = "id, device, source, time, geom, altitude, speed, track, hdop, eph, mode, status, satellites, datum, datum_x, datum_y, attributes"
TYPES = """id text, device text, source text, time timestamptz, geom geometry(PointZ, 4326), altitude float8, speed float8,
 track float8, hdop float8, eph float8, mode int2, status int2, satellites int2, datum text, datum_x float8, datum_y float8, attributes jsonb"""
CREATE = f"""DROP TABLE IF EXISTS positions, latest;
CREATE TABLE positions ({TYPES.replace('id text,', 'id text PRIMARY KEY,', 1)});
CREATE INDEX ON positions (device, time); CREATE INDEX ON positions USING gist (geom);
CREATE TABLE latest ({TYPES.replace('id text, device text,', 'device text PRIMARY KEY, id text,', 1)});
CREATE INDEX ON latest USING gist (geom); CHECKPOINT;"""
STAGE = f"CREATE TEMPORARY TABLE IF NOT EXISTS stage ({TYPES}) ON COMMIT DELETE ROWS;\n"
LATEST = f"""INSERT INTO latest AS stored ({COLS}) SELECT DISTINCT ON (device) {COLS} FROM positions
WHERE id = ANY('{{IDS}}'::text[]) AND time IS NOT NULL AND geom IS NOT NULL ORDER BY device, time DESC, id DESC
ON CONFLICT (device) DO UPDATE SET id = EXCLUDED.id, source = EXCLUDED.source, time = EXCLUDED.time, geom = EXCLUDED.geom,
 altitude = EXCLUDED.altitude, speed = EXCLUDED.speed, track = EXCLUDED.track WHERE stored.time < EXCLUDED.time;\n"""


def ewkb(lon, lat, z):
    return binascii.hexlify(struct.pack("<BIIddd", 1, 0xA0000001, 4326, lon, lat, z)).decode().upper()


def rows():
    out = []
    for i in range(N):
        t = 1714521600000 + i * 1000
        lon, lat = 121.5 + i * 1e-6, 31.2 + i * 1e-6
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t // 1000)) + ".%03dZ" % (t % 1000)
        out.append({"id": "rx-%d-%d" % (i % DEVICES, t), "device": "dev%d" % (i % DEVICES), "t": t, "ts": ts, "lon": lon, "lat": lat,
                    "line": "\t".join(["rx-%d-%d" % (i % DEVICES, t), "dev%d" % (i % DEVICES), "rx", ts, ewkb(lon, lat, 12.5), "12.5", "2.5",
                                       "87.5", "0.9", "\\N", "3", "1", "9", "wgs84", repr(lon), repr(lat), "\\N"]) + "\n"})
    return out


R = rows()
batches = [R[s:s + B] for s in range(0, N, B)]


def newest(batch):
    last = {}
    for r in batch:
        last[r["device"]] = r["id"]
    return ",".join(last.values())


def values(r):
    return (f"('{r['id']}','{r['device']}','rx','{r['ts']}','{ewkb(r['lon'], r['lat'], 12.5)}',12.5,2.5,87.5,0.9,NULL,3,1,9,'wgs84',"
            f"{r['lon']!r},{r['lat']!r},NULL)")


def write(name, text):
    path = os.path.join(WORK, name + ".sql")
    with open(path, "w") as f:
        f.write(text)
    return path


forms = [
    ("1 COPY into the table, latest by id (the sink)", write("copy", "".join(
        "BEGIN;\nCOPY positions (" + COLS + ") FROM STDIN;\n" + "".join(r["line"] for r in b) + "\\.\n"
        + LATEST.replace("IDS", newest(b)) + "COMMIT;\n" for b in batches))),
    ("2 COPY into a temp table, INSERT … ON CONFLICT", write("staged", STAGE + "".join(
        "BEGIN;\nCOPY stage FROM STDIN;\n" + "".join(r["line"] for r in b) + "\\.\n"
        + f"INSERT INTO positions ({COLS}) SELECT {COLS} FROM stage ON CONFLICT (id) DO NOTHING;\n"
        + LATEST.replace("IDS", newest(b)) + "COMMIT;\n" for b in batches))),
    ("3 multi-row INSERT … VALUES … ON CONFLICT", write("values", "".join(
        f"BEGIN;\nINSERT INTO positions ({COLS}) VALUES " + ",\n".join(values(r) for r in b) + " ON CONFLICT (id) DO NOTHING;\n"
        + LATEST.replace("IDS", newest(b)) + "COMMIT;\n" for b in batches))),
    ("4 INSERT … SELECT FROM unnest(arrays) …", write("unnest", "".join(
        "BEGIN;\n" + f"INSERT INTO positions ({COLS}) SELECT id, device, 'rx', ts::timestamptz, ST_SetSRID(ST_MakePoint(lon, lat, 12.5), 4326), "
        "12.5, 2.5, 87.5, 0.9, NULL, 3, 1, 9, 'wgs84', lon, lat, NULL FROM unnest("
        + "ARRAY[" + ",".join("'%s'" % r["id"] for r in b) + "]::text[], "
        + "ARRAY[" + ",".join("'%s'" % r["device"] for r in b) + "]::text[], "
        + "ARRAY[" + ",".join("'%s'" % r["ts"] for r in b) + "]::text[], "
        + "ARRAY[" + ",".join(repr(r["lon"]) for r in b) + "]::float8[], "
        + "ARRAY[" + ",".join(repr(r["lat"]) for r in b) + "]::float8[]) AS u(id, device, ts, lon, lat) ON CONFLICT (id) DO NOTHING;\n"
        + LATEST.replace("IDS", newest(b)) + "COMMIT;\n" for b in batches))),
    ("5 one prepared INSERT per row", write("rows",
        f"PREPARE one AS INSERT INTO positions ({COLS}) VALUES ($1, $2, 'rx', $3, $4, 12.5, 2.5, 87.5, 0.9, NULL, 3, 1, 9, 'wgs84', $5, $6, NULL) ON CONFLICT (id) DO NOTHING;\n"
        + "".join("BEGIN;\n" + "".join(f"EXECUTE one('{r['id']}', '{r['device']}', '{r['ts']}', '{ewkb(r['lon'], r['lat'], 12.5)}', {r['lon']!r}, {r['lat']!r});\n" for r in b)
                  + LATEST.replace("IDS", newest(b)) + "COMMIT;\n" for b in batches))),
]
with open(os.path.join(WORK, "rows.tsv"), "w") as f:
    f.writelines(r["line"] for r in R)
forms.append(("reference: one psql \\copy of every row", write("reference", f"\\copy positions ({COLS}) FROM '{WORK}/rows.tsv'\n")))

best = {}
for _ in range(3):
    for name, path in forms:
        subprocess.run(PSQL + ["-c", CREATE], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t0 = time.time()
        subprocess.run(PSQL + ["-f", path], check=True, stdout=subprocess.DEVNULL)
        best[name] = min(best.get(name, 1e9), time.time() - t0)
for name, _ in forms:
    print("  %-48s %8.0f rows/s" % (name, N / best[name]))
for name in os.listdir(WORK):
    os.remove(os.path.join(WORK, name))
os.rmdir(WORK)

#!/usr/bin/env python3
"""Writes the seed corpora under Fuzz/corpus/<Target>/ from the tests' fixtures and the docs.

Run from anywhere: python3 Fuzz/corpus/seeds.py. It replaces the files it writes (names start
with `seed-`) and leaves every other file alone (inputs merged from fuzz runs, regression
inputs). Sources and licences: Fuzz/corpus/README.md.

Targets whose input starts with a plan byte (ChunkPlan: the tracker codecs, NMEA, gpsd) get
`00` in front (the whole stream in one read); NMEA adds an options byte `00` after it.
"""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "Fuzz" / "corpus"
TRACKERS = ROOT / "Tests" / "TrackerProtocolsTests" / "Fixtures"
GPSD = ROOT / "Tests" / "NMEATests" / "Fixtures" / "gpsd"
GPX = ROOT / "Tests" / "FileInputTests" / "Fixtures" / "gpx"
DOCS = ROOT / "Docs" / "examples"
RECEIVER = ROOT / "Tests" / "ReceiverStreamTests" / "Fixtures"

# A seed bigger than this slows every execution for little new coverage: logs are cut into pieces.
PIECE = 2048
WHOLE = b"\x00"


def write(target, name, data):
    directory = CORPUS / target
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"seed-{name}").write_bytes(data)


def clear(target):
    for path in (CORPUS / target).glob("seed-*"):
        path.unlink()


def vectors(path, kinds="binary|buffer"):
    """(vector id, frame kind, frame bytes, header line) of a Traccar vector file."""
    out = []
    header = ""
    for line in path.read_text().splitlines():
        if line.startswith("[V"):
            header = line
        match = re.match(r"frame\((" + kinds + r")\): (.*)$", line)
        if not match:
            continue
        vid = header.split("]")[0].lstrip("[")
        kind, text = match.groups()
        data = bytes.fromhex(text) if kind == "binary" else text.encode()
        out.append((vid, kind, data, header))
    return out


def pieces(data, size=PIECE, limit=None):
    """Cuts text at line ends into pieces of about `size` bytes."""
    lines = data.splitlines(keepends=True)
    out, current = [], b""
    for line in lines:
        if current and len(current) + len(line) > size:
            out.append(current)
            current = b""
        current += line
    if current:
        out.append(current)
    return out[:limit] if limit else out


def trackers():
    imei = bytes.fromhex("000F313233343536373839303132333435")
    for target in ["TeltonikaTCP", "TeltonikaUDP", "GT06", "H02", "JT808"]:
        clear(target)
    for vid, _, frame, _ in vectors(TRACKERS / "jt808.txt"):
        write("JT808", f"traccar-{vid}", WHOLE + frame)
    for vid, _, frame, header in vectors(TRACKERS / "teltonika.txt"):
        if "connectionless" in header or "UDP" in header:
            write("TeltonikaUDP", f"traccar-{vid}", WHOLE + frame)
        elif frame[:2] == b"\x00\x0f" or frame == b"\xff":
            write("TeltonikaTCP", f"traccar-{vid}", WHOLE + frame)
        else:
            # AVL frames come after the IMEI frame on a connection.
            write("TeltonikaTCP", f"traccar-{vid}", WHOLE + imei + frame)
    # The UDP codec's other shapes: a datagram per read of the plan (a header-only one, two at once).
    udp = [f for _, _, f, h in vectors(TRACKERS / "teltonika.txt") if "connectionless" in h or "UDP" in h]
    for i, frame in enumerate(udp):
        write("TeltonikaUDP", f"truncated-{i}", WHOLE + frame[:12])
    for vid, _, frame, _ in vectors(TRACKERS / "gt06.txt"):
        write("GT06", f"traccar-{vid}", WHOLE + frame)
    for vid, _, frame, _ in vectors(TRACKERS / "h02.txt"):
        write("H02", f"traccar-{vid}", WHOLE + frame)
    # A connection's stream: several frames back to back, as devices send them.
    gt06 = [f for _, _, f, _ in vectors(TRACKERS / "gt06.txt")]
    write("GT06", "stream", WHOLE + b"".join(gt06[:12]))
    h02 = [f for _, kind, f, _ in vectors(TRACKERS / "h02.txt") if kind == "buffer"]
    write("H02", "stream", WHOLE + b"\r\n".join(h02[:12]) + b"\r\n")


def text_trackers():
    """The text protocols: each vector as a device sends it (text with its terminator), and a stream."""
    ends = {"GPS103": b"\r\n", "Watch": b"", "GL200": b"", "Meitrack": b"", "Suntech": b"\r"}
    for target, name in [("GPS103", "gps103"), ("Watch", "watch"), ("GL200", "gl200"), ("Meitrack", "meitrack"), ("Suntech", "suntech")]:
        clear(target)
        frames = []
        seen = set()
        for vid, kind, frame, _ in vectors(TRACKERS / f"{name}.txt", kinds="binary|buffer|text"):
            if vid in seen:
                continue  # Meitrack gives the bytes, then their printable part
            seen.add(vid)
            wire = frame + (ends[target] if kind == "text" else b"")
            frames.append(wire)
            write(target, f"traccar-{vid}", WHOLE + wire)
        write(target, "stream", WHOLE + b"".join(frames[:12]))


def lua_protocol():
    """Wialon IPS packets as the example script reads them (1.1 and 2.0 layouts)."""
    clear("LuaProtocol")
    packets = [b"#L#353976013445485;NA\r\n", b"#P#\r\n",
               b"#SD#040114;135515;5544.6025;N;03739.6834;E;35;215;110;7\r\n",
               b"#D#040114;135515;5544.6025;S;03739.6834;W;35;215;110;7;1.0;0;0;;NA;count1:1:564,fuel:2:45.8,hw:3:V4.5\r\n",
               b"#B#040114;135515;5544.6025;N;03739.6834;E;35;215;110;7|040114;135615;5544.6125;N;03739.6934;E;36;216;111;8\r\n",
               b"#M#on my way\r\n"]
    for i, packet in enumerate(packets):
        write("LuaProtocol", f"wialon-{i}", WHOLE + packet)
    write("LuaProtocol", "stream", WHOLE + b"".join(packets))
    write("LuaProtocol", "v2", WHOLE + b"#L#2.0;42001300083;NA;B21E\r\n#SD#300924;154245;5554.350052;N;3644.670410;E;2.92;NA;NA;NA;7A01\r\n")


def nmea_and_gpsd():
    for target in ["NMEA", "GpsdReports", "JSONLines", "NATSMessages", "JSON"]:
        clear(target)
    for log in sorted(GPSD.glob("*.log")):
        data = log.read_bytes()
        for i, piece in enumerate(pieces(data, limit=3)):
            write("NMEA", f"gpsd-{log.stem}-{i}", WHOLE + b"\x00" + piece)
        check = log.with_name(log.name + ".chk")
        if not check.exists():
            continue
        reports = b"".join(line for line in check.read_bytes().splitlines(keepends=True) if line.startswith(b"{"))
        if not reports:
            continue
        for i, piece in enumerate(pieces(reports, limit=2)):
            write("GpsdReports", f"gpsd-{log.stem}-{i}", WHOLE + piece)
        tpv = [line.strip() for line in reports.splitlines() if b'"class":"TPV"' in line]
        if tpv:
            write("JSONLines", f"gpsd-{log.stem}", b"\n".join(tpv[:8]) + b"\n")
            write("NATSMessages", f"gpsd-{log.stem}", b"\x01fleet.positions.receiver\n" + b"\x1e".join(tpv[:4]))
            write("JSON", f"gpsd-tpv-{log.stem}", tpv[0])
        sky = [line.strip() for line in reports.splitlines() if b'"class":"SKY"' in line]
        if sky:
            write("JSON", f"gpsd-sky-{log.stem}", sky[0])


def gpx():
    clear("GPX")
    for path in sorted(GPX.glob("*.gpx")):
        # The long tracks only repeat their first points: the first 4 KB (the scanner takes a
        # document cut anywhere) reach the same code at ten times the executions per second.
        write("GPX", path.stem, pieces(path.read_bytes(), size=4096)[0])


OWNTRACKS = [
    {"_type": "location", "tst": 1714557600, "lat": 46.0569, "lon": 14.5058, "acc": 12, "alt": 295, "vel": 4,
     "cog": 270, "batt": 87, "tid": "ph", "conn": "w", "t": "u"},
    {"_type": "location", "tst": "1714557600", "lat": "46.0569", "lon": "14.5058", "acc": "12"},
    {"_type": "location", "tst": 1714557600.25, "lat": -90, "lon": 180, "vac": 3, "vel": -1, "cog": 360},
    {"_type": "transition", "event": "enter", "tst": 1714557600, "wtst": 1714550000, "desc": "home", "rid": "h1"},
    {"_type": "waypoint", "desc": "office", "lat": 46.05, "lon": 14.5, "rad": 100, "tst": 1714557600},
    {"_type": "lwt", "tst": 1714557600},
    {"_type": "encrypted", "data": "AAAA"},
]

POSITIONS = [
    {"class": "TPV", "time": "2024-05-01T10:00:00.000Z", "mode": 3, "lat": 46.0569, "lon": 14.5058, "altMSL": 295.1,
     "speed": 1.2, "track": 270.5, "source": "receiver", "device": "gnss", "id": "receiver-1714557600000"},
    {"time": 1714557600, "mode": 2, "status": 2, "lat": 0, "lon": 0, "uSat": 7, "hdop": 0.9, "vdop": 1.1, "pdop": 1.4,
     "eph": 3.5, "epv": 5.0, "datum": "gcj02", "attributes": {"ignition": "true", "odometer": 12345}},
    {"lat": 52.1, "lon": 5.1, "event": {"type": "enter", "fence": "depot", "name": "Depot"}},
    {"mode": 0, "datum": "EPSG:3857", "x": 1614000.5, "y": 5790000.25, "event": {"type": "fix_lost"}},
]

FENCES = [
    {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"id": "depot", "name": "Depot"},
         "geometry": {"type": "Polygon", "coordinates": [[[14.50, 46.05], [14.52, 46.05], [14.52, 46.07], [14.50, 46.07], [14.50, 46.05]],
                                                         [[14.505, 46.055], [14.51, 46.055], [14.51, 46.06], [14.505, 46.055]]]}},
        {"type": "Feature", "id": 7, "properties": {"radius": 150},
         "geometry": {"type": "Point", "coordinates": [14.5058, 46.0569]}},
        {"type": "Feature", "properties": {"id": "islands"},
         "geometry": {"type": "MultiPolygon", "coordinates": [
             [[[179.5, -17], [-179.5, -17], [-179.5, -16], [179.5, -16], [179.5, -17]]],
             [[[0, 0], [1, 0], [0, 1], [0, 0]]]]}},
    ]},
    {"type": "Feature", "properties": {"id": "pole"},
     "geometry": {"type": "Polygon", "coordinates": [[[-180, 89], [0, 89], [180, 89], [180, 90], [-180, 90], [-180, 89]]]}},
    {"type": "Feature", "properties": {"id": "big", "radius": 20000000},
     "geometry": {"type": "Point", "coordinates": [0, 0, 12]}},
]


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def json_documents():
    for target in ["OwnTracks", "MQTTMessages", "GeoJSONFences", "Configuration"]:
        clear(target)
    for i, message in enumerate(OWNTRACKS):
        write("OwnTracks", f"owntracks-{i}", compact(message))
        # MQTT: [control] template \n topic \n payload; control 1 = owntracks, 2 = auto, 0 = json.
        write("MQTTMessages", f"owntracks-{i}", b"\x02\nowntracks/alice/phone\n" + compact(message))
        write("JSON", f"owntracks-{i}", compact(message))
    for i, position in enumerate(POSITIONS):
        write("MQTTMessages", f"position-{i}", b"\x00fleet/{-1}\nfleet/truck-7\n" + compact(position))
        write("NATSMessages", f"position-{i}", b"\x00fleet.positions.truck-7\n" + compact(position))
        write("JSON", f"position-{i}", compact(position))
    write("JSONLines", "positions", b"\n".join(compact(p) for p in POSITIONS) + b"\n")
    write("JSONLines", "crlf-blank-bad", b"\r\n".join(compact(p) for p in POSITIONS[:2]) + b"\r\n  \r\n{\"lat\":1}\r\nnot json\r\n")
    for i, fence in enumerate(FENCES):
        write("GeoJSONFences", f"fences-{i}", compact(fence))
        write("JSON", f"fences-{i}", compact(fence))
    for path in sorted(DOCS.glob("*.geojson")):
        write("GeoJSONFences", path.stem, path.read_bytes())
    # Pipelines: the docs' examples, the packaged default, and each plugin's sample wired into a
    # minimal pipeline (a source feeding stdout, a transform between, a sink after a file source).
    for path in sorted(DOCS.glob("*.json")) + [ROOT / "Packaging" / "pipeline.json"]:
        write("Configuration", path.stem, path.read_bytes())
        write("JSON", f"pipeline-{path.stem}", path.read_bytes())
    for plugin in sorted((ROOT / "Plugins").glob("*/*.swift")):
        text = plugin.read_text()
        for kind, sample in re.findall(r'kind: \.(source|transform|sink),.*?sample: #"(.*?)"#', text, re.S):
            try:
                component = json.loads(sample)
            except ValueError:
                continue
            kind_type = component.get("type", "x")
            replay = {"type": "file", "path": "track.nmea"}
            out = {"type": "stdout", "inputs": ["in"]}
            if kind == "source":
                document = {"sources": {"in": component}, "sinks": {"out": out}}
            elif kind == "transform":
                component["inputs"] = ["in"]
                document = {"sources": {"in": replay}, "transforms": {"t": component}, "sinks": {"out": dict(out, inputs=["t"])}}
            else:
                component["inputs"] = ["in"]
                document = {"sources": {"in": replay}, "sinks": {"out": component}}
            write("Configuration", f"sample-{kind}-{kind_type}", json.dumps(document, indent=1).encode())


UBX_MESSAGES = [(0x01, 0x07), (0x01, 0x03), (0x01, 0x35), (0x0A, 0x38), (0x0A, 0x09), (0x05, 0x01), (0x05, 0x00)]


def ubx_frames(data):
    """(class, id, payload) of every UBX frame with a good checksum in `data`."""
    out, i = [], 0
    while True:
        i = data.find(b"\xb5\x62", i)
        if i < 0 or i + 8 > len(data):
            return out
        length = data[i + 4] | data[i + 5] << 8
        end = i + 8 + length
        a = b = 0
        for x in data[i + 2:end - 2]:
            a = (a + x) & 0xFF
            b = (b + a) & 0xFF
        if end <= len(data) and data[end - 2] == a and data[end - 1] == b:
            out.append((data[i + 2], data[i + 3], data[i + 6:end - 2]))
            i = end
        else:
            i += 1


def receiver_streams():
    """ReceiverStream: the u-blox logs (after gpsd's header) in pieces, the broken and synthetic
    streams whole. UBX: the payloads of the messages it decodes, behind their selector byte.
    RTCM: the RTCM 3 logs in pieces, and their frames' payloads as pieces to frame (options 01)."""
    for target in ["ReceiverStream", "UBX", "RTCM", "NTRIP"]:
        clear(target)
    manifest = json.loads((RECEIVER / "ubx" / "MANIFEST.json").read_text())
    for log in sorted((RECEIVER / "ubx").glob("*.log")):
        data = log.read_bytes()[manifest[log.stem]["header_bytes"]:]
        for i in range(0, min(len(data), 3 * PIECE), PIECE):
            write("ReceiverStream", f"gpsd-{log.stem}-{i // PIECE}", WHOLE + b"\x00" + data[i:i + PIECE])
        kept = {}
        for cls, mid, payload in ubx_frames(data):
            if (cls, mid) in UBX_MESSAGES and kept.get((cls, mid), 0) < 3:
                kept[(cls, mid)] = kept.get((cls, mid), 0) + 1
                selector = UBX_MESSAGES.index((cls, mid))
                write("UBX", f"gpsd-{log.stem}-{cls:02x}{mid:02x}-{kept[(cls, mid)]}", bytes([selector]) + payload)
    for path in sorted((RECEIVER / "bad").glob("*.log")):
        write("ReceiverStream", f"pyubx2-{path.stem}", WHOLE + b"\x00" + path.read_bytes())
    synthetic = (RECEIVER / "synthetic" / "synthetic-rtk.ubx").read_bytes()
    write("ReceiverStream", "synthetic-rtk", WHOLE + b"\x00" + synthetic)
    for i, (cls, mid, payload) in enumerate(ubx_frames(synthetic)):
        if (cls, mid) in [(0x0A, 0x38), (0x01, 0x07)]:
            write("UBX", f"synthetic-{i}", bytes([UBX_MESSAGES.index((cls, mid))]) + payload)
    for log in sorted((RECEIVER / "rtcm").glob("*.log")):
        data = log.read_bytes()
        data = data[data.find(b"\xd3"):] if data.startswith(b"#") else data
        for i in range(0, min(len(data), 3 * PIECE), PIECE):
            write("RTCM", f"gpsd-{log.stem}-{i // PIECE}", WHOLE + b"\x00" + data[i:i + PIECE])
        frames = [json.loads(line) for line in log.with_name(log.stem + ".rtcm.jsonl").read_text().splitlines()]
        pieces_ = b""
        for f in [f for f in frames if f.get("crc_ok")][:12]:
            raw = log.read_bytes()[f["offset"]:f["offset"] + f["length"]]
            payload = raw[3:-3]
            pieces_ += bytes([len(payload) >> 8, len(payload) & 0xFF]) + payload
        write("RTCM", f"built-{log.stem}", WHOLE + b"\x01" + pieces_)
        write("RTCM", f"built-stray-{log.stem}", WHOLE + b"\x03" + pieces_)
        # NTRIP: the caster's answers around the same frames: NTRIP 1 (str2str's bare ICY, and
        # with headers) and NTRIP 2 chunked in pieces that cut frames.
        good = b"".join(log.read_bytes()[f["offset"]:f["offset"] + f["length"]] for f in frames if f.get("crc_ok"))[:3000]
        write("NTRIP", f"icy-{log.stem}", WHOLE + b"ICY 200 OK\r\n" + good)
        write("NTRIP", f"icy-headers-{log.stem}", WHOLE + b"ICY 200 OK\r\nServer: caster\r\n\r\n" + good)
        body, i, k = b"", 0, 0
        while i < len(good):
            n = [1, 17, 97, 400, 3][k % 5]
            body += b"%x;ext=1\r\n" % len(good[i:i + n]) + good[i:i + n] + b"\r\n"
            i, k = i + n, k + 1
        write("NTRIP", f"chunked-{log.stem}", WHOLE + b"HTTP/1.1 200 OK\r\nNtrip-Version: Ntrip/2.0\r\nContent-Type: gnss/data\r\nTransfer-Encoding: chunked\r\n\r\n" + body + b"0\r\n\r\n")
    table = (b"STR;VRS;Network RTK;RTCM 3.2;1004(1),1005(10);2;GPS+GLO;NET;AUT;48.21;16.37;1;1;sNTRIP;none;B;N;9600;misc\r\n"
             b"STR;MOUNT;srctbl\r\nCAS;caster;2101;X;Y;0;AUT;48;16;0.0.0.0;0;http://x\r\nENDSOURCETABLE\r\n")
    write("NTRIP", "sourcetable-v1", WHOLE + b"SOURCETABLE 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(table) + table)
    write("NTRIP", "sourcetable-v2", WHOLE + b"HTTP/1.1 200 OK\r\nContent-Type: gnss/sourcetable\r\nTransfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(table) + table + b"\r\n0\r\n\r\n")
    write("NTRIP", "unauthorized", WHOLE + b"HTTP/1.0 401 Unauthorized\r\n")
    write("NTRIP", "not-found", WHOLE + b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")


if __name__ == "__main__":
    trackers()
    text_trackers()
    lua_protocol()
    nmea_and_gpsd()
    gpx()
    json_documents()
    receiver_streams()
    total = sum(p.stat().st_size for p in CORPUS.rglob("seed-*"))
    count = sum(1 for _ in CORPUS.rglob("seed-*"))
    print(f"{count} seeds, {total} bytes")

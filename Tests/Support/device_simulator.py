#!/usr/bin/env python3
"""Plays GPS trackers against a locgate listening source, as the devices behave.

Usage: device_simulator.py --protocol teltonika|gt06|jt808|gps103|watch|wialon --port N [--host 127.0.0.1]
           [--devices 10] [--frames 20] [--records 10] [--first-imei 350000000000000]
           [--interval 0.0] [--answer-timeout 10] [--answered FILE] [--seed 1]
           [--until-file PATH] [--udp]

Each device logs in (Teltonika IMEI frame / GT06 login / JT/T 808 registration once, then
authentication with the code it was issued on every connection; GPS103 login answered LOAD; a
watch's LK link), then sends its frames one at a
time and waits for the server's answer, which it checks byte for byte against the answer the
protocol owes for that frame (the record count / the serial echo / JT/T 808's 0x8001 naming the
frame's serial and id with result 0). JT/T 808 terminals send single fixes (0x0200) and, every
other frame, a 0x0704 batch of --records fixes; they keep their code across reconnections, so a
server that forgot it refuses them (counted as auth_refused; the terminal then registers again). A frame whose answer does
not come (timeout, closed connection) is sent again on a new connection, as a tracker keeps a
record in its memory until it is acknowledged. GPS103 and watch positions have no answer in their
protocols: a "frame" there is --records sentences sent in one write, the last an alarm (GPS103
`help me`, watch `AL`) whose answer comes only once its position, and so every position sent
before it on the connection, was committed; those are what the device was answered for. The
simulated device keeps the group until that answer (a real one would drop the plain fixes). Frames are built here, with their checksums
(CRC-16/IBM, CRC-16/X-25), from positions on a seeded track per device.

Every record whose frame was answered is written to --answered as one JSON line:
{"imei": "...", "time_ms": ..., "lat": ..., "lon": ...}. That is what the device now deletes:
the test checks each of them reached the sinks.

On exit it prints one JSON summary line: devices, frames_sent, frames_answered, resends,
wrong_answers, records_answered, connect_failures. Exit 0 when every frame was answered and
every answer was right; 1 otherwise (or 2 for bad arguments). --until-file makes it keep
retrying (instead of giving up after --answer-timeout x 30) until that file exists.
"""
import argparse
import asyncio
import json
import random
import struct
import sys
import time
import os


def crc16_ibm(data):
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def crc16_x25(data):
    crc = 0xFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x8408 if crc & 1 else crc >> 1
    return crc ^ 0xFFFF


class Track:
    """A seeded drive: one position a second, moving a few metres each."""

    def __init__(self, rng, start_ms):
        self.lat = rng.uniform(-60, 60)
        self.lon = rng.uniform(-170, 170)
        self.course = rng.uniform(0, 360)
        self.t = start_ms
        self.rng = rng

    def next(self):
        self.t += 1000
        self.course = (self.course + self.rng.uniform(-10, 10)) % 360
        self.lat += self.rng.uniform(-0.0002, 0.0002)
        self.lon += self.rng.uniform(-0.0002, 0.0002)
        speed = self.rng.randint(0, 120)
        return {"time_ms": self.t, "lat": round(self.lat, 6), "lon": round(self.lon, 6),
                "speed_kmh": speed, "course": int(self.course), "sats": self.rng.randint(4, 14),
                "alt": self.rng.randint(0, 500)}


# --- Teltonika -------------------------------------------------------------------------------

def teltonika_login(imei):
    return struct.pack(">H", len(imei)) + imei.encode()


def teltonika_records(records):
    """Codec 8 Extended records with ignition, movement and external voltage IO elements."""
    out = b""
    for r in records:
        out += struct.pack(">QB", r["time_ms"], 0)
        out += struct.pack(">iihHBH", round(r["lon"] * 1e7), round(r["lat"] * 1e7), r["alt"], r["course"], r["sats"], r["speed_kmh"])
        # event id, total count; 1-byte values: 239 ignition, 240 movement; 2-byte: 66 voltage.
        out += struct.pack(">HH", 0, 3)
        out += struct.pack(">H", 2) + struct.pack(">HB", 239, 1) + struct.pack(">HB", 240, 1 if r["speed_kmh"] else 0)
        out += struct.pack(">H", 1) + struct.pack(">HH", 66, 12345)
        out += struct.pack(">H", 0) + struct.pack(">H", 0) + struct.pack(">H", 0)
    return out


def teltonika_frame(records):
    body = bytes([0x8E, len(records)]) + teltonika_records(records) + bytes([len(records)])
    return b"\x00\x00\x00\x00" + struct.pack(">I", len(body)) + body + struct.pack(">I", crc16_ibm(body))


def teltonika_answer(records):
    return struct.pack(">I", len(records))


def teltonika_udp_packet(imei, packet_id, avl_id, records):
    payload = struct.pack(">HBB", packet_id, 0x01, avl_id) + struct.pack(">H", len(imei)) + imei.encode()
    payload += bytes([0x8E, len(records)]) + teltonika_records(records) + bytes([len(records)])
    return struct.pack(">H", len(payload)) + payload


def teltonika_udp_answer(packet_id, avl_id, records):
    return struct.pack(">HHBBB", 5, packet_id, 0x01, avl_id, len(records))


# --- GT06 ------------------------------------------------------------------------------------

def gt06_frame(protocol, content, serial):
    body = bytes([len(content) + 5, protocol]) + content + struct.pack(">H", serial)
    return b"\x78\x78" + body + struct.pack(">H", crc16_x25(body)) + b"\x0d\x0a"


def gt06_ack(protocol, serial):
    body = bytes([5, protocol]) + struct.pack(">H", serial)
    return b"\x78\x78" + body + struct.pack(">H", crc16_x25(body)) + b"\x0d\x0a"


def gt06_login(imei, serial):
    digits = ("0" + imei)[-16:]
    return gt06_frame(0x01, bytes.fromhex(digits), serial)


def gt06_position(r, serial):
    """A 0x22 GPS/LBS frame: UTC time, satellites, coordinates, speed, course and flags."""
    t = time.gmtime(r["time_ms"] // 1000)
    content = bytes([t.tm_year % 100, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec])
    content += bytes([0xC0 | min(r["sats"], 15)])
    content += struct.pack(">II", round(abs(r["lat"]) * 1800000), round(abs(r["lon"]) * 1800000))
    content += bytes([min(r["speed_kmh"], 255)])
    flags = 0x1000 | (r["course"] & 0x3FF)  # positioned
    if r["lat"] >= 0:
        flags |= 0x0400
    if r["lon"] < 0:
        flags |= 0x0800
    content += struct.pack(">H", flags)
    content += struct.pack(">HBH", 460, 0, 0x2866) + (0x0EA3).to_bytes(3, "big")  # MCC, MNC, LAC, cell id
    content += bytes([1, 0, 0])  # ACC on, upload mode, real time
    return gt06_frame(0x22, content, serial)


# --- JT/T 808 --------------------------------------------------------------------------------

def jt808_escape(data):
    return data.replace(b"\x7d", b"\x7d\x01").replace(b"\x7e", b"\x7d\x02")


def jt808_frame(msg_id, phone, serial, body):
    header = struct.pack(">HH", msg_id, len(body)) + bytes.fromhex(phone) + struct.pack(">H", serial)
    data = header + body
    check = 0
    for b in data:
        check ^= b
    return b"\x7e" + jt808_escape(data + bytes([check])) + b"\x7e"


def jt808_bcd_time(ms):
    t = time.gmtime(ms // 1000 + 8 * 3600)  # the terminal's clock is GMT+8
    return bytes.fromhex("%02d%02d%02d%02d%02d%02d" % (t.tm_year % 100, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec))


def jt808_location(r):
    status = 0x3  # ACC on, positioned
    if r["lat"] < 0:
        status |= 0x4
    if r["lon"] < 0:
        status |= 0x8
    out = struct.pack(">IIIIhHH", 0, status, round(abs(r["lat"]) * 1e6), round(abs(r["lon"]) * 1e6), r["alt"],
                      r["speed_kmh"] * 10, r["course"]) + jt808_bcd_time(r["time_ms"])
    return out + bytes([0x01, 4]) + struct.pack(">I", 12345) + bytes([0x31, 1, r["sats"]])


async def jt808_read_frame(reader, timeout):
    """The next frame from the server, unescaped, without its marks; checks its BCC."""
    while True:
        first = await asyncio.wait_for(reader.readexactly(1), timeout)
        if first == b"\x7e":
            break
    raw = await asyncio.wait_for(reader.readuntil(b"\x7e"), timeout)
    data = raw[:-1].replace(b"\x7d\x02", b"\x7e").replace(b"\x7d\x01", b"\x7d")
    check = 0
    for b in data[:-1]:
        check ^= b
    if check != data[-1]:
        raise RuntimeError("server frame with a bad check code: " + data.hex())
    return data[:-1]


# --- GPS103 and watches (text) ---------------------------------------------------------------

def gps103_sentence(imei, r, keyword):
    """Local time 8 h ahead of UTC (the codec folds it back); ddmm.mmmm coordinates; knots."""
    local, utc = time.gmtime(r["time_ms"] // 1000 + 8 * 3600), time.gmtime(r["time_ms"] // 1000)
    def dm(value, width):
        d = int(abs(value))
        return "%0*d%07.4f" % (width, d, (abs(value) - d) * 60)
    return ("imei:%s,%s,%s,,F,%s.000,A,%s,%s,%s,%s,%.2f,%d,%d;" % (
        imei, keyword, time.strftime("%y%m%d%H%M%S", local), time.strftime("%H%M%S", utc),
        dm(r["lat"], 2), "N" if r["lat"] >= 0 else "S", dm(r["lon"], 3), "E" if r["lon"] >= 0 else "W",
        r["speed_kmh"] / 1.852, r["course"], r["alt"])).encode()


def watch_frame(device_id, r, word):
    t = time.gmtime(r["time_ms"] // 1000)
    content = "%s,%s,%s,A,%.6f,%s,%.6f,%s,%d,%d,%d,%d,80,90,0,0,00000000,0,0" % (
        word, time.strftime("%d%m%y", t), time.strftime("%H%M%S", t), abs(r["lat"]), "N" if r["lat"] >= 0 else "S",
        abs(r["lon"]), "E" if r["lon"] >= 0 else "W", r["speed_kmh"], r["course"], r["alt"], r["sats"])
    return ("[3G*%s*%04X*%s]" % (device_id, len(content), content)).encode()


def wialon_blackbox(records):
    """Wialon IPS 1.1 #B#: the records as short data, answered #AB#<count> (a lua_tracker script)."""
    def sd(r):
        t = time.gmtime(r["time_ms"] // 1000)
        def dm(value, width):
            d = int(abs(value))
            return "%0*d%07.4f" % (width, d, (abs(value) - d) * 60)
        return "%s;%s;%s;%s;%s;%s;%d;%d;%d;%d" % (time.strftime("%d%m%y", t), time.strftime("%H%M%S", t), dm(r["lat"], 2),
                                                  "N" if r["lat"] >= 0 else "S", dm(r["lon"], 3), "E" if r["lon"] >= 0 else "W",
                                                  r["speed_kmh"], r["course"], r["alt"], r["sats"])
    return ("#B#" + "|".join(sd(r) for r in records) + "\r\n").encode(), ("#AB#%d\r\n" % len(records)).encode()


def text_group(protocol, device_id, records):
    """--records sentences, the last one an alarm: the bytes and the alarm's answer."""
    if protocol == "gps103":
        data = b"".join(gps103_sentence(device_id, r, "tracker") for r in records[:-1])
        return data + gps103_sentence(device_id, records[-1], "help me"), ("**,imei:%s,E;" % device_id).encode()
    data = b"".join(watch_frame(device_id, r, "UD2") for r in records[:-1])
    return data + watch_frame(device_id, records[-1], "AL"), ("[3G*%s*0002*AL]" % device_id).encode()


# --- The devices -----------------------------------------------------------------------------

class Device:
    def __init__(self, args, index, stats, answered):
        self.args = args
        self.imei = str(args.first_imei + index)
        self.rng = random.Random(args.seed * 100003 + index)
        self.track = Track(self.rng, 1_700_000_000_000 + index * 3_600_000)
        self.stats = stats
        self.answered = answered
        self.serial = 0
        self.reader = None
        self.writer = None
        self.phone = "%012d" % (int(self.imei) % 10**12)
        self.code = None

    def frames(self):
        for k in range(self.args.frames):
            per = self.args.records if self.args.protocol in ("teltonika", "gps103", "watch", "wialon") or (self.args.protocol == "jt808" and k % 2) else 1
            yield [self.track.next() for _ in range(per)]

    async def connect(self):
        while True:
            try:
                self.reader, self.writer = await asyncio.open_connection(self.args.host, self.args.port)
            except OSError:
                self.stats["connect_failures"] += 1
                await asyncio.sleep(0.2)
                continue
            try:
                if self.args.protocol == "jt808":
                    if await self.jt808_login():
                        return
                    continue
                login, expected = self.login()
                self.writer.write(login)
                await self.writer.drain()
                got = await asyncio.wait_for(self.reader.readexactly(len(expected)), self.args.answer_timeout)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                self.stats["connect_failures"] += 1
                self.close()
                await asyncio.sleep(0.2)
                continue
            if got != expected:
                self.stats["wrong_answers"] += 1
                raise RuntimeError(f"{self.imei}: login answered {got.hex()}, expected {expected.hex()}")
            return

    async def jt808_exchange(self, frame, serial):
        """Sends a frame and returns the body of the server's answer that names its serial."""
        self.writer.write(frame)
        await self.writer.drain()
        while True:
            data = await jt808_read_frame(self.reader, self.args.answer_timeout)
            msg_id, = struct.unpack(">H", data[:2])
            body = data[12:]
            if msg_id in (0x8001, 0x8100) and struct.unpack(">H", body[:2])[0] == serial:
                return msg_id, body

    async def jt808_login(self):
        """Registers once (keeping the code), authenticates on every connection; False to retry."""
        if self.code is None:
            self.serial = (self.serial + 1) & 0xFFFF
            body = struct.pack(">HH", 0, 0) + b"SIMUL" + b"JT-SIM".ljust(20, b"\0") + self.imei[-7:].encode() + b"\x00"
            msg_id, answer = await self.jt808_exchange(jt808_frame(0x0100, self.phone, self.serial, body), self.serial)
            if msg_id != 0x8100 or answer[2] != 0:
                self.stats["wrong_answers"] += 1
                raise RuntimeError(f"{self.imei}: registration answered {answer.hex()}")
            self.code = answer[3:]
            self.stats["registrations"] += 1
        self.serial = (self.serial + 1) & 0xFFFF
        msg_id, answer = await self.jt808_exchange(jt808_frame(0x0102, self.phone, self.serial, self.code), self.serial)
        if msg_id != 0x8001 or answer[2:4] != b"\x01\x02":
            self.stats["wrong_answers"] += 1
            raise RuntimeError(f"{self.imei}: authentication answered {answer.hex()}")
        if answer[4] != 0:
            # Refused: a server that lost the code; register again.
            self.stats["auth_refused"] += 1
            self.code = None
            return False
        self.stats["authentications"] += 1
        return True

    def login(self):
        if self.args.protocol == "teltonika":
            return teltonika_login(self.imei), b"\x01"
        if self.args.protocol == "gps103":
            return ("##,imei:%s,A;" % self.imei).encode(), b"LOAD"
        if self.args.protocol == "watch":
            link = ("[3G*%s*0002*LK]" % self.imei).encode()
            return link, link
        if self.args.protocol == "wialon":
            return ("#L#%s;NA\r\n" % self.imei).encode(), b"#AL#1\r\n"
        self.serial = (self.serial + 1) & 0xFFFF
        return gt06_login(self.imei, self.serial), gt06_ack(0x01, self.serial)

    def close(self):
        if self.writer is not None:
            self.writer.close()
        self.writer = None
        self.reader = None

    def encode(self, records):
        if self.args.protocol == "jt808":
            self.serial = (self.serial + 1) & 0xFFFF
            if len(records) == 1:
                msg_id, body = 0x0200, jt808_location(records[0])
            else:
                msg_id, body = 0x0704, struct.pack(">HB", len(records), 0)
                for r in records:
                    item = jt808_location(r)
                    body += struct.pack(">H", len(item)) + item
            return jt808_frame(msg_id, self.phone, self.serial, body), struct.pack(">HHB", self.serial, msg_id, 0)
        if self.args.protocol == "teltonika":
            return teltonika_frame(records), teltonika_answer(records)
        if self.args.protocol in ("gps103", "watch"):
            return text_group(self.args.protocol, self.imei, records)
        if self.args.protocol == "wialon":
            return wialon_blackbox(records)
        self.serial = (self.serial + 1) & 0xFFFF
        return gt06_position(records[0], self.serial), gt06_ack(0x22, self.serial)

    async def run(self):
        await self.connect()
        for records in self.frames():
            attempts = 0
            frame, expected = self.encode(records)
            while True:
                attempts += 1
                self.stats["frames_sent"] += 1
                try:
                    if self.args.protocol == "jt808":
                        _, got = await self.jt808_exchange(frame, self.serial)
                    else:
                        self.writer.write(frame)
                        await self.writer.drain()
                        got = await asyncio.wait_for(self.reader.readexactly(len(expected)), self.args.answer_timeout)
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, AttributeError):
                    # No answer: the device keeps the records and sends them again.
                    self.stats["resends"] += 1
                    self.close()
                    if not self.args.until_file and attempts > 30:
                        raise RuntimeError(f"{self.imei}: no answer after {attempts} attempts")
                    if self.args.until_file and os.path.exists(self.args.until_file) and attempts > 3:
                        raise RuntimeError(f"{self.imei}: no answer after the end was called")
                    await asyncio.sleep(0.2)
                    await self.connect()
                    if self.args.protocol in ("gt06", "jt808"):
                        # The serial went up with the login: the same records, a new frame number.
                        frame, expected = self.encode(records)
                    continue
                if got != expected:
                    self.stats["wrong_answers"] += 1
                    raise RuntimeError(f"{self.imei}: answered {got.hex()}, expected {expected.hex()}")
                break
            self.stats["frames_answered"] += 1
            for r in records:
                self.answered.write(json.dumps({"imei": self.imei, "time_ms": r["time_ms"], "lat": r["lat"], "lon": r["lon"]}) + "\n")
                self.stats["records_answered"] += 1
            self.answered.flush()
            if self.args.interval:
                await asyncio.sleep(self.args.interval)
        self.close()


class UDPDevice(Device):
    """Teltonika over UDP: each packet carries the IMEI; an unanswered packet is sent again."""

    async def run(self):
        loop = asyncio.get_running_loop()
        queue = asyncio.Queue()

        class Protocol(asyncio.DatagramProtocol):
            def datagram_received(self, data, addr):
                queue.put_nowait(data)

        transport, _ = await loop.create_datagram_endpoint(Protocol, remote_addr=(self.args.host, self.args.port))
        packet_id = 0
        for records in self.frames():
            packet_id = (packet_id + 1) & 0xFFFF
            avl_id = packet_id & 0xFF
            packet = teltonika_udp_packet(self.imei, packet_id, avl_id, records)
            expected = teltonika_udp_answer(packet_id, avl_id, records)
            for attempt in range(60):
                self.stats["frames_sent"] += 1
                transport.sendto(packet)
                try:
                    got = await asyncio.wait_for(queue.get(), self.args.answer_timeout)
                except asyncio.TimeoutError:
                    self.stats["resends"] += 1
                    continue
                if got != expected:
                    self.stats["wrong_answers"] += 1
                    raise RuntimeError(f"{self.imei}: answered {got.hex()}, expected {expected.hex()}")
                break
            else:
                raise RuntimeError(f"{self.imei}: no answer")
            self.stats["frames_answered"] += 1
            for r in records:
                self.answered.write(json.dumps({"imei": self.imei, "time_ms": r["time_ms"], "lat": r["lat"], "lon": r["lon"]}) + "\n")
                self.stats["records_answered"] += 1
            self.answered.flush()
        transport.close()


async def main(args):
    stats = {"devices": args.devices, "frames_sent": 0, "frames_answered": 0, "resends": 0,
             "wrong_answers": 0, "records_answered": 0, "connect_failures": 0, "registrations": 0, "auth_refused": 0,
             "authentications": 0}
    answered = open(args.answered, "a") if args.answered else open(os.devnull, "w")
    kind = UDPDevice if args.udp else Device
    devices = [kind(args, i, stats, answered) for i in range(args.devices)]
    results = await asyncio.gather(*(d.run() for d in devices), return_exceptions=True)
    answered.close()
    errors = [str(r) for r in results if isinstance(r, Exception)]
    stats["errors"] = errors[:5]
    print(json.dumps(stats), flush=True)
    return 0 if not errors and stats["wrong_answers"] == 0 else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--protocol", choices=["teltonika", "gt06", "jt808", "gps103", "watch", "wialon"], required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--devices", type=int, default=10)
    p.add_argument("--frames", type=int, default=20)
    p.add_argument("--records", type=int, default=10)
    p.add_argument("--first-imei", type=int, default=350000000000000)
    p.add_argument("--interval", type=float, default=0.0)
    p.add_argument("--answer-timeout", type=float, default=10.0)
    p.add_argument("--answered")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--until-file")
    p.add_argument("--udp", action="store_true")
    a = p.parse_args()
    if a.udp and a.protocol != "teltonika":
        print("--udp is for teltonika", file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(a)))

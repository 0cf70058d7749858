#!/usr/bin/env python3
"""Writes a reproducible NMEA corpus: RMC, GGA, GSA, GSV, VTG per epoch, mixed talkers,
a fraction of lines corrupted (bit flips, truncations, wrong checksums, NUL bytes).

usage: gen_nmea_corpus.py OUT SENTENCES [CORRUPT_FRACTION] [SEED]
"""
import math
import random
import sys


def checksum(body: str) -> str:
    c = 0
    for ch in body.encode():
        c ^= ch
    return f"{c:02X}"


def dm(value: float, lat: bool) -> tuple[str, str]:
    hemi = ("N" if value >= 0 else "S") if lat else ("E" if value >= 0 else "W")
    v = abs(value)
    deg = int(v)
    minutes = (v - deg) * 60
    return (f"{deg:02d}{minutes:07.4f}" if lat else f"{deg:03d}{minutes:07.4f}"), hemi


def main() -> None:
    out, total = sys.argv[1], int(sys.argv[2])
    corrupt = float(sys.argv[3]) if len(sys.argv) > 3 else 0.01
    rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 42)
    talkers = ["GP", "GN", "GL", "GA", "GB"]
    lat, lon = 31.2304, 121.4737
    heading = 45.0
    t = 0  # seconds since 2024-05-01T00:00:00Z
    written = 0
    with open(out, "wb") as f:
        f.write(b"# locgate benchmark corpus\n")
        while written < total:
            talker = rng.choice(talkers)
            heading = (heading + rng.uniform(-5, 5)) % 360
            speed_kn = rng.uniform(0, 30)
            step = speed_kn * 0.514444 / 111_320
            lat += step * math.cos(math.radians(heading))
            lon += step * math.sin(math.radians(heading)) / math.cos(math.radians(lat))
            day = 1 + (t // 86400) % 28
            hh, mm, ss = (t // 3600) % 24, (t // 60) % 60, t % 60
            hms = f"{hh:02d}{mm:02d}{ss:02d}.00"
            la, ns = dm(lat, True)
            lo, ew = dm(lon, False)
            alt = 10 + rng.uniform(-2, 2)
            sats = rng.randint(6, 14)
            hdop = rng.uniform(0.6, 2.5)
            bodies = [
                f"{talker}RMC,{hms},A,{la},{ns},{lo},{ew},{speed_kn:.2f},{heading:.1f},{day:02d}0524,,,A",
                f"{talker}GGA,{hms},{la},{ns},{lo},{ew},1,{sats:02d},{hdop:.1f},{alt:.1f},M,8.5,M,,",
                f"{talker}GSA,A,3,01,03,07,08,11,14,17,22,,,,,{hdop * 1.6:.1f},{hdop:.1f},{hdop * 1.2:.1f}",
                f"{talker}GSV,1,1,04,01,40,083,46,03,62,310,45,07,17,230,38,08,57,055,44",
                f"{talker}VTG,{heading:.1f},T,,M,{speed_kn:.2f},N,{speed_kn * 1.852:.2f},K,A",
            ]
            for body in bodies:
                line = f"${body}*{checksum(body)}\r\n".encode()
                if rng.random() < corrupt:
                    kind = rng.randrange(4)
                    b = bytearray(line)
                    if kind == 0:
                        i = rng.randrange(1, len(b) - 4)
                        b[i] ^= 1 << rng.randrange(7)
                    elif kind == 1:
                        b = b[: rng.randrange(5, len(b) - 2)]
                    elif kind == 2:
                        b[-4:-2] = b"00" if b[-4:-2] != b"00" else b"FF"
                    else:
                        b[rng.randrange(1, len(b) - 2)] = 0
                    line = bytes(b)
                f.write(line)
                written += 1
                if written >= total:
                    break
            t += 1


if __name__ == "__main__":
    main()

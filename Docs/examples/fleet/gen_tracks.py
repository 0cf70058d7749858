#!/usr/bin/env python3
"""Writes one NMEA log per device (RMC + GGA, 1 s epochs from 2024-05-01 00:00:00 UTC): each
device swings east and west across the fence in fences.geojson, so it enters and leaves it
several times. Deterministic: the same arguments give the same files."""
import math
import sys


def sentence(body):
    s = 0
    for c in body.encode():
        s ^= c
    return "$%s*%02X\r\n" % (body, s)


def nmea_lat(v):
    d = int(abs(v))
    return "%02d%07.4f" % (d, (abs(v) - d) * 60), "N" if v >= 0 else "S"


def nmea_lon(v):
    d = int(abs(v))
    return "%03d%07.4f" % (d, (abs(v) - d) * 60), "E" if v >= 0 else "W"


def write(path, index, epochs):
    lat = 31.2 + index * 0.0004          # devices ~45 m apart, all crossing the fence
    period = 90 + 7 * index              # seconds per swing, different per device
    with open(path, "w") as f:
        for i in range(epochs):
            t = i
            hh, mm, ss = t // 3600, (t // 60) % 60, t % 60
            lon = 121.5 + 0.008 * math.sin(2 * math.pi * i / period + index)
            la, ns = nmea_lat(lat)
            lo, ew = nmea_lon(lon)
            time = "%02d%02d%02d.00" % (hh, mm, ss)
            f.write(sentence("GPRMC,%s,A,%s,%s,%s,%s,12.0,90.0,010524,,,A" % (time, la, ns, lo, ew)))
            f.write(sentence("GPGGA,%s,%s,%s,%s,%s,1,09,0.9,15.2,M,7.1,M,," % (time, la, ns, lo, ew)))


if __name__ == "__main__":
    out, epochs = sys.argv[1], int(sys.argv[2])
    names = sys.argv[3:]
    for i, name in enumerate(names):
        write("%s/%s.nmea" % (out, name), i, epochs)

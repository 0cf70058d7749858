#!/usr/bin/env python3
"""Writes EPOCHS one-second epochs of RMC + GGA (correct checksums) from 2024-05-01 00:00:00 UTC,
moving a little each epoch: the log the sink benchmarks replay (same as the crash tests' log).

usage: gen_rmc_gga.py EPOCHS OUT
"""
import sys


def sentence(body):
    c = 0
    for ch in body.encode():
        c ^= ch
    return "$%s*%02X\r\n" % (body, c)


def main():
    n, path = int(sys.argv[1]), sys.argv[2]
    with open(path, "w") as out:
        for i in range(n):
            t = 1714521600 + i
            hh, mm, ss = (t // 3600) % 24, (t // 60) % 60, t % 60
            day = 1 + (t - 1714521600) // 86400
            tm = "%02d%02d%02d.00" % (hh, mm, ss)
            lat = "31%02d.%04d" % (10 + i % 40, i % 10000)
            lon = "121%02d.%04d" % (20 + i % 30, (i * 7) % 10000)
            out.write(sentence("GPRMC,%s,A,%s,N,%s,E,3.2,87.5,%02d0524,,,A" % (tm, lat, lon, day % 28 + 1)))
            out.write(sentence("GPGGA,%s,%s,N,%s,E,1,09,0.9,15.2,M,7.1,M,," % (tm, lat, lon)))


main()

#!/usr/bin/env bash
# RTCM corrections at the serial port (issue 47): an NTRIP caster on loopback sends a base
# station's RTCM 3 frames; `locgate run` with a serial source on a socat pty and `corrections`
# writes them into the port while the simulated receiver sends NAV-PVT at 10 Hz; the time from
# the caster's send to each frame's arrival at the receiver's end (p50, p99, max; target p99 <=
# 20 ms), whether the bytes are exactly the caster's frames, whether every NAV-PVT became a
# position; beside RTKLIB's str2str relaying the same caster to a pty (Benchmarks/rtcm_port.py).
#
#   Benchmarks/rtcm_port.sh [SECONDS]     (default 20 per tool)
#
# INTERVAL (default 0.1) is the time between bursts (one base epoch each), RTCM_LOG the log the
# frames come from. LOCGATE_BIN picks a binary (default: a release build made here).
# libserialport 0.1.1 refuses ptys: locgate runs with the tests' shim (ptyshim.c) preloaded,
# compiled here.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
if [ -z "${LOCGATE_BIN:-}" ]; then
    swift build -c release --static-swift-stdlib --product locgate >&2
    LOCGATE_BIN=$ROOT/.build/release/locgate
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cc -shared -fPIC -O2 -o "$WORK/ptyshim.so" Tests/SerialInputTests/Support/ptyshim.c -ldl
python3 Benchmarks/rtcm_port.py "$LOCGATE_BIN" "$WORK/ptyshim.so" "${1:-20}"

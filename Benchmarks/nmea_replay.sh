#!/usr/bin/env bash
# `make bench`: builds locgate in release mode and runs the NMEA replay benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product locgate
python3 Benchmarks/nmea_replay.py "$(swift build -c release --show-bin-path)/locgate" "${SENTENCES:-1000000}"

#!/usr/bin/env bash
# `make bench`: builds locgate in release mode and runs the NMEA replay benchmark, which prints
# three ratios: replay CPU vs gpsdecode (and the C checksum scan), four transforms vs the bare
# replay, and peak RSS at 1x vs 8x the corpus. RUNS (default 5) and LARGE (default 8) tune it.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --static-swift-stdlib --product locgate
python3 Benchmarks/nmea_replay.py "$(swift build -c release --static-swift-stdlib --show-bin-path)/locgate" "${SENTENCES:-1000000}"

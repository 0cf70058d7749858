#!/usr/bin/env bash
# `make bench`: the NMEA replay with the motion transform against the same replay without it
# (Benchmarks/motion_replay.py). RUNS (default 5) and SENTENCES (default 1,000,000) tune it.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --static-swift-stdlib --product locgate
python3 Benchmarks/motion_replay.py "$(swift build -c release --static-swift-stdlib --show-bin-path)/locgate" "${SENTENCES:-1000000}"

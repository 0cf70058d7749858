#!/bin/sh
# Positions/s through the geofence transform (annotate) with 10, 1,000 and 10,000 polygon
# fences of 50–500 vertices (seeded). Usage: Benchmarks/geofence.sh [positions]
set -e
cd "$(dirname "$0")/.."
LOCGATE_BENCH=1 swift build -c release --static-swift-stdlib --product GeofenceBenchmark
.build/release/GeofenceBenchmark "${1:-100000}"

#!/bin/sh
# Points/s of the coordinates conversions (wgs84→gcj02, →bd09, gcj02→wgs84 iterative,
# →EPSG:32650 through PROJ) over the same million points, beside PROJ's cs2cs in the same run.
# Usage: Benchmarks/coordinates.sh [points]   (needs libproj-dev, proj-data, proj-bin)
set -eu
cd "$(dirname "$0")/.."
command -v cs2cs >/dev/null || { echo "cs2cs not found: apt-get install proj-bin" >&2; exit 1; }
LOCGATE_BENCH=1 swift build -c release --static-swift-stdlib --product CoordinatesBenchmark >&2
exec .build/release/CoordinatesBenchmark "${1:-1000000}"

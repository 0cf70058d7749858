#!/usr/bin/env bash
# Benchmark of HTTPServing: requests/s and CPU per request of one server with 1 and 2
# libmicrohttpd event threads, answering in the handler or later from another thread, alone and
# beside 1,000 idle connections it holds open. The clients run in the same process, on the same
# cores, as the rest of a gateway would.
#
#   Benchmarks/http_serving.sh [SECONDS]      (default 3 per case)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_CASE=${1:-3}
# Always (incremental): a stale binary would measure old code.
LOCGATE_BENCH=1 swift build -c release --product HTTPServingBenchmark >&2
TOOL=$PWD/.build/release/HTTPServingBenchmark
for idle in 0 1000; do
    for mode in immediate deferred; do
        for threads in 1 2; do
            "$TOOL" "$threads" 32 "$SECONDS_PER_CASE" "$idle" "$mode"
        done
    done
done

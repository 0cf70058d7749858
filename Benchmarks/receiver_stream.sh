#!/bin/sh
# UBX NAV-PVT replay positions/s beside the NMEA replay of the same epochs (ratio printed), and
# RTCM frames' latency from an NTRIP caster to the client's writer.
# Usage: Benchmarks/receiver_stream.sh [EPOCHS] [SECONDS]
set -e
cd "$(dirname "$0")/.."
LOCGATE_BENCH=1 swift build -c release --static-swift-stdlib --product ReceiverStreamBenchmark
.build/release/ReceiverStreamBenchmark "${1:-200000}" "${2:-10}"

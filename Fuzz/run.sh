#!/usr/bin/env bash
# Builds and runs the libFuzzer targets; `make fuzz`, `make fuzz-smoke` and `make fuzz-build`
# call it. Fuzz/README.md explains the layout, the options and how to reproduce a crash.
#
#   Fuzz/run.sh build TARGET…   build the targets (instrumented debug build in .build/fuzz)
#   Fuzz/run.sh run TARGET…     run each for FUZZ_SECONDS (default 60), one after another
#
# Environment: FUZZ_SECONDS; FUZZ_MERGE=1 merges what a run found into Fuzz/corpus/<target>
# (otherwise new inputs stay in .build/fuzz/corpus/<target>); FUZZ_ARGS, extra libFuzzer flags.
set -euo pipefail
cd "$(dirname "$0")/.."

SCRATCH=${FUZZ_SCRATCH:-.build/fuzz}
BIN="$SCRATCH/debug"
# The fuzz targets exist in Package.swift only under LOCGATE_FUZZ=1. Every Swift module is
# compiled with libFuzzer's coverage and AddressSanitizer; lld links them (gold warns about
# every ASan helper symbol it cannot export).
SWIFT_FUZZ_FLAGS=(-c debug --scratch-path "$SCRATCH" -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld)

# The dictionary each target mutates with (Fuzz/dictionaries/); none for the binary protocols,
# whose constants libFuzzer finds by watching comparisons.
dictionary() {
    case "$1" in
        NMEA | ReceiverStream) echo Fuzz/dictionaries/nmea.dict ;;
        GPX) echo Fuzz/dictionaries/gpx.dict ;;
        H02) echo Fuzz/dictionaries/h02.dict ;;
        GPS103 | Watch | GL200 | Meitrack | Suntech | LuaProtocol) echo Fuzz/dictionaries/text-trackers.dict ;;
        Configuration) echo Fuzz/dictionaries/configuration.dict ;;
        JSON | JSONLines | GpsdReports | OwnTracks | MQTTMessages | NATSMessages | GeoJSONFences | HTTPRequests | StateSnapshots) echo Fuzz/dictionaries/json.dict ;;
        *) echo "" ;;
    esac
}

build() {
    local start=$SECONDS
    for target in "$@"; do
        LOCGATE_FUZZ=1 swift build "${SWIFT_FUZZ_FLAGS[@]}" --product "Fuzz$target"
    done
    echo "fuzz build: $(( SECONDS - start )) s for $# targets"
}

run() {
    local seconds=${FUZZ_SECONDS:-60}
    local failed=() summary=()
    mkdir -p "$SCRATCH/logs"
    for target in "$@"; do
        local binary="$BIN/Fuzz$target" corpus="Fuzz/corpus/$target" found="$SCRATCH/corpus/$target"
        local artifacts="$SCRATCH/artifacts/$target/" log="$SCRATCH/logs/$target.log"
        [ -x "$binary" ] || { echo "missing $binary: run Fuzz/run.sh build $target (make fuzz-build)"; exit 2; }
        mkdir -p "$corpus" "$found" "$artifacts"
        local args=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=1 -print_final_stats=1
                    -artifact_prefix="$artifacts")
        local dict; dict=$(dictionary "$target")
        [ -n "$dict" ] && args+=(-dict="$dict")
        # shellcheck disable=SC2206
        args+=(${FUZZ_ARGS:-})
        echo "== $target: ${seconds} s (log: $log)"
        # New inputs go to the first directory (scratch); the checked-in corpus is only read.
        # The Swift runtime's backtracer would stop the run for half a minute on every trap:
        # libFuzzer's and ASan's reports say what is needed.
        # Without allocation stacks in ASan's reports (malloc_context_size=0) every target runs
        # about a quarter faster: Swift allocates on most calls, and each allocation was unwound.
        # Reproducing a crash (Fuzz/README.md) shows them again.
        local status=0
        ASAN_OPTIONS=${ASAN_OPTIONS:-malloc_context_size=0} SWIFT_BACKTRACE=enable=no "$binary" "${args[@]}" "$found" "$corpus" > "$log" 2>&1 || status=$?
        local execs speed cov ft
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
        cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
        ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
        summary+=("$(printf '%-14s %8s execs %7s exec/s  cov %6s  ft %6s  %s' "$target" "${execs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" \
            "$([ $status = 0 ] && echo ok || echo "FAILED (status $status)")")")
        if [ $status != 0 ]; then
            failed+=("$target")
            grep -E 'ERROR: |SUMMARY: |Fatal error|invariant violated|Test unit written' "$log" | head -8 || true
        fi
        if [ "${FUZZ_MERGE:-0}" = 1 ]; then
            SWIFT_BACKTRACE=enable=no "$binary" -merge=1 -rss_limit_mb=2048 -timeout=1 "$corpus" "$found" >> "$log" 2>&1 || true
        fi
    done
    printf '%s\n' "${summary[@]}"
    if [ ${#failed[@]} -gt 0 ]; then
        echo "fuzz: ${failed[*]} failed; the inputs are in $SCRATCH/artifacts/<target>/ (Fuzz/README.md: reproducing a crash)"
        exit 1
    fi
}

command=${1:-}
shift || true
case "$command" in
    build) build "$@" ;;
    run) run "$@" ;;
    *) echo "usage: Fuzz/run.sh build|run TARGET…" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# `make bench-fleet`: channel discovery (docs/contract.md §7.1) with 10,000 matching channels:
# occupied → held latency, subscribe rate, RSS per held channel, time to leave them all, against
# the same channels as static `channel = …` rules in the same run (method and results:
# docs/history/benchmarks.md "Fleet discovery"). Not part of `make test`: ~5 min.
#
#   RUNS=3        runs of each configuration, alternating (medians are reported)
#   CHANNELS=10000
#   INTERVAL=5s   discovery_interval (the contract's minimum)
#   QUICK=1       1 run of 1,000 channels: checks the harness (results go to
#                 Benchmarks/results/fleet/quick/)
#
# Builds the release pusher-local and pusher-mqtt-bridge, then runs Benchmarks/fleet/bench_fleet.py,
# which starts and stops (by PID) its own mosquitto, pusher-local and daemons on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
CHANNELS=${CHANNELS:-10000}
INTERVAL=${INTERVAL:-5s}
QUICK=${QUICK:-0}

scripts/setup.sh

echo "bench-fleet: building release binaries ..." >&2
for product in pusher-local pusher-mqtt-bridge; do
    swift build -c release -j 2 --product "$product" >&2
done
BIN_DIR=$(swift build -c release --show-bin-path)

export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}
args=(--bin-dir "$BIN_DIR" --runs "$RUNS" --channels "$CHANNELS" --interval "$INTERVAL")
[[ "$QUICK" == 1 ]] && args+=(--quick)
# Bounded: QUICK ~1 min, full ~5 min; past 30 min something hangs.
exec timeout --signal=TERM --kill-after=30 1800 .venv/bin/python Benchmarks/fleet/bench_fleet.py "${args[@]}"

#!/usr/bin/env bash
# `make bench`: the bridge against the broker's ceiling and a Python baseline, in one run
# (method and results: BENCHMARKS.md). Not part of `make test`: it takes ~15-25 min.
#
#   RUNS=3        runs per cell (medians are reported)
#   QUICK=1       a few seconds per scenario, 1 run: checks that the harness works (results go
#                 to Benchmarks/results/quick/, BENCHMARKS.md is left alone)
#   SCENARIOS=ceiling,sources,p2m,m2p,latency   a subset
#   IMPLS=bridge,bridge-memory,python           a subset (bridge-memory: persist = false; also bridge-2conn:
#                                               [bridge.pusher] connections = 2, not in a default run)
#   LATENCY_QOS=1 LATENCY_SECONDS=3             the fixed-rate latency runs
#   PUSHER_RECEIVER=swift|c                     Pusher-side receiver: pusher-bench-subscriber or ws_sub.c
#   SIZES=100,1024,8192 QOS_LEVELS=0,1          the throughput cells (SIZES=100: the issue 16 rows, ~6 min with
#                                               SCENARIOS=ceiling,p2m,m2p IMPLS=bridge,python)
#
# Builds release binaries (pusher-local, pusher-mqtt-bridge, pusher-bench-subscriber) and the C
# tools (gcc -O2 -lmosquitto), then runs Benchmarks/bridge/bench.py, which starts and stops
# (by PID) its own mosquitto, pusher-local and bridges on free 127.0.0.1 ports.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
QUICK=${QUICK:-0}
SCENARIOS=${SCENARIOS:-ceiling,sources,p2m,m2p,latency}
IMPLS=${IMPLS:-bridge,bridge-memory,python}
LATENCY_QOS=${LATENCY_QOS:-1}
LATENCY_SECONDS=${LATENCY_SECONDS:-3}
PUSHER_RECEIVER=${PUSHER_RECEIVER:-swift}
SIZES=${SIZES:-100,1024,8192}
QOS_LEVELS=${QOS_LEVELS:-0,1}

scripts/setup.sh
command -v gcc >/dev/null || { echo "bench: gcc is needed for the C load tools (apt-get install gcc)" >&2; exit 1; }

echo "bench: building release binaries ..." >&2
swift build -c release -j 2 >&2
BIN_DIR=$(swift build -c release --show-bin-path)

TOOLS=.build/bench-tools
mkdir -p "$TOOLS"
for tool in c_pub c_sub ws_sub; do
    gcc -O2 -Wall -Wextra -Werror -o "$TOOLS/$tool" "Benchmarks/bridge/$tool.c" -lmosquitto -lpthread
done

args=(--bin-dir "$BIN_DIR" --tools-dir "$TOOLS" --runs "$RUNS" --scenarios "$SCENARIOS" --impls "$IMPLS"
      --latency-qos "$LATENCY_QOS" --latency-seconds "$LATENCY_SECONDS" --pusher-receiver "$PUSHER_RECEIVER"
      --sizes "$SIZES" --qos "$QOS_LEVELS")
[[ "$QUICK" == 1 ]] && args+=(--quick)
# A whole run is bounded: QUICK ~3 min, full ~25 min; past 60 min something hangs.
exec timeout --signal=TERM --kill-after=30 3600 .venv/bin/python Benchmarks/bridge/bench.py "${args[@]}"

#!/usr/bin/env bash
# `make bench-rtt`: the Pusher side at real round-trip times (docs/history/benchmarks.md "Real
# round-trip times"). MQTT → Pusher throughput over 1, 10 and 100 channels with api_lanes 8 and 32 against the
# ideal min(lanes, channels) × 10 / RTT, and Pusher → MQTT over the WebSocket, with 20, 50 and
# 100 ms of added round-trip time. Not part of `make test`: ~10-15 min.
#
# NEEDS ROOT: pusher-local runs in a network namespace of the benchmark's own, joined to the
# bridge's namespace by a veth pair (10.213.0.1/30 ↔ 10.213.0.2/30, only inside the pair) with
# `tc netem` delay; nothing in the root namespace is changed (Tests/testkit/bridge_testkit/faults/netns.py, prefix pmrtt).
#
#   RUNS=3            runs per cell (medians are reported)
#   RTTS=20,50,100    added round-trip times, ms (half on each end of the veth pair)
#   LANES=8,32        api_lanes values (the first also runs Pusher → MQTT)
#   CHANNELS=1,10,100
#   QUICK=1           the first RTT only, 1 run, fewer messages: checks the harness (results go
#                     to Benchmarks/results/rtt/quick/)
#
# Builds the release pusher-local, pusher-mqtt-bridge, pusher-bench-subscriber and the C tools,
# then runs Benchmarks/rtt/bench_rtt.py, which starts and stops (by PID) everything it uses and
# deletes its namespaces (and with them the veths and qdiscs) also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
RTTS=${RTTS:-20,50,100}
LANES=${LANES:-8,32}
CHANNELS=${CHANNELS:-1,10,100}
QUICK=${QUICK:-0}

[[ $(id -u) == 0 ]] || { echo "bench-rtt: needs root (network namespaces, veth, tc netem); run: sudo make bench-rtt" >&2; exit 1; }
scripts/setup.sh
command -v gcc >/dev/null || { echo "bench-rtt: gcc is needed for the C load tools (apt-get install gcc)" >&2; exit 1; }

echo "bench-rtt: building release binaries ..." >&2
for product in pusher-local pusher-mqtt-bridge pusher-bench-subscriber; do
    swift build -c release -j 2 --product "$product" >&2
done
BIN_DIR=$(swift build -c release --show-bin-path)

TOOLS=.build/bench-tools
mkdir -p "$TOOLS"
for tool in c_pub c_sub; do
    gcc -O2 -Wall -Wextra -Werror -o "$TOOLS/$tool" "Benchmarks/bridge/$tool.c" -lmosquitto -lpthread
done

args=(--bin-dir "$BIN_DIR" --tools-dir "$TOOLS" --runs "$RUNS" --rtts "$RTTS" --lanes "$LANES" --channels "$CHANNELS")
[[ "$QUICK" == 1 ]] && args+=(--quick)
# Bounded: QUICK ~2 min, full ~15 min; past 40 min something hangs.
exec timeout --signal=TERM --kill-after=30 2400 .venv/bin/python Benchmarks/rtt/bench_rtt.py "${args[@]}"

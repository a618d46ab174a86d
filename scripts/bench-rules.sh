#!/usr/bin/env bash
# `make bench-rules`: what payload rules (`where`, `{json:…}`, docs/contract.md §7.3) cost per
# message against plain rules, in one run (method and results: docs/history/benchmarks.md "Payload rules").
# Not part of `make test`: ~10 min.
#
#   PAIRS=7     A/B pairs per payload, measured A B A B … (medians are reported)
#   QOS=0       subscription/publish QoS of the end-to-end runs
#   QUICK=1     1 pair, few messages: checks that the harness works (results go to
#               Benchmarks/results/payload-rules/quick/)
#
# Builds the release binaries it needs (pusher-local, pusher-mqtt-bridge, pusher-bench-subscriber,
# rules-bench) and the C tools (gcc -O2 -lmosquitto), then runs Benchmarks/bridge/bench_rules.py,
# which starts and stops (by PID) its own mosquitto, pusher-local and daemons on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

PAIRS=${PAIRS:-7}
QOS=${QOS:-0}
QUICK=${QUICK:-0}

scripts/setup.sh
command -v gcc >/dev/null || { echo "bench-rules: gcc is needed for the C load tools (apt-get install gcc)" >&2; exit 1; }

echo "bench-rules: building release binaries ..." >&2
for product in pusher-local pusher-mqtt-bridge pusher-bench-subscriber rules-bench; do
    swift build -c release -j 2 --product "$product" >&2
done
BIN_DIR=$(swift build -c release --show-bin-path)

TOOLS=.build/bench-tools
mkdir -p "$TOOLS"
for tool in c_pub c_sub; do
    gcc -O2 -Wall -Wextra -Werror -o "$TOOLS/$tool" "Benchmarks/bridge/$tool.c" -lmosquitto -lpthread
done

export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}
args=(--bin-dir "$BIN_DIR" --tools-dir "$TOOLS" --pairs "$PAIRS" --qos "$QOS")
[[ "$QUICK" == 1 ]] && args+=(--quick)
# Bounded: QUICK ~2 min, full ~10-15 min; past 40 min something hangs.
exec timeout --signal=TERM --kill-after=30 2400 .venv/bin/python Benchmarks/bridge/bench_rules.py "${args[@]}"

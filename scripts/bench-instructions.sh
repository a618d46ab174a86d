#!/usr/bin/env bash
# `make bench-instructions`: instructions per message under callgrind, each direction at QoS 0 and
# 1, bridge and mosquitto in the same run (method: Benchmarks/instructions/bench_instructions.py;
# results: docs/history/benchmarks.md "Instructions per message"). Not part of `make test`: ~10 min.
#
#   COUNT=20000   messages per run     RATE=400   msg/s (below both processes' pace under callgrind)
#   REPEATS=2     runs per cell (median and spread reported)
#   CELLS=p2m:0,p2m:1,m2p:0,m2p:1
set -euo pipefail
cd "$(dirname "$0")/.."

COUNT=${COUNT:-20000}
RATE=${RATE:-400}
REPEATS=${REPEATS:-2}
CELLS=${CELLS:-p2m:0,p2m:1,m2p:0,m2p:1}

scripts/setup.sh --valgrind

echo "bench-instructions: building release binaries ..." >&2
for product in pusher-local pusher-mqtt-bridge pusher-bench-subscriber; do
    swift build -c release -j 2 --product "$product" >&2
done
RELEASE=$(swift build -c release --show-bin-path)
# Copies without DWARF: valgrind 3.19 cannot read the DWARF 5 forms Swift 6.3's toolchain emits
# (and callgrind needs only the symbol table for its totals).
BIN_DIR=.build/bench-instructions
mkdir -p "$BIN_DIR"
for product in pusher-local pusher-mqtt-bridge pusher-bench-subscriber; do
    strip --strip-debug -o "$BIN_DIR/$product" "$RELEASE/$product"
done

TOOLS=.build/bench-tools
mkdir -p "$TOOLS"
for tool in c_pub c_sub; do
    gcc -O2 -Wall -Wextra -Werror -o "$TOOLS/$tool" "Benchmarks/bridge/$tool.c" -lmosquitto -lpthread
done

export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}
# Bounded: ~10 min with the defaults; past 60 min something hangs.
exec timeout --signal=TERM --kill-after=30 3600 .venv/bin/python Benchmarks/instructions/bench_instructions.py \
    --bin-dir "$BIN_DIR" --tools-dir "$TOOLS" --count "$COUNT" --rate "$RATE" --repeats "$REPEATS" --cells "$CELLS"

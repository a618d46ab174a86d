#!/usr/bin/env bash
# `make bench-memory`: the daemon's RSS idle (with a breakdown by mapping: the binary, each shared
# object, heap, anonymous) and under a full backlog of 64 MiB of 8 KB messages in each direction,
# with and without the spool (method and results: docs/history/benchmarks.md "Memory"). Not part of
# `make test`: ~8 min.
#
#   RUNS=3        runs of each cell (medians are reported)
#   MEGABYTES=64  backlog size; SIZE=8192 message size
#   CELLS=p2m-spool,p2m-memory,m2p-spool,m2p-memory
#   DAEMON_ENV="MALLOC_ARENA_MAX=2"   environment for the daemon (space-separated KEY=VALUE)
#   TRIM_PROBE=1  after each drain, RSS again after malloc_trim(0) called in the daemon through gdb
#   STATIC=1      the static build `make deb` ships (--static-swift-stdlib, in DEB_SCRATCH, default
#                 .build-deb, scripts/static-build-flags.sh) instead of the dynamic one; results in
#                 Benchmarks/results/memory/static/, with resident-code.md: the binary's resident pages
#                 by module (Benchmarks/memory/resident_code.py, as root)
#   QUICK=1       1 run of 8 MiB per cell: checks the harness (results go to
#                 Benchmarks/results/memory/quick/)
#
# Builds the release pusher-local and pusher-mqtt-bridge, then runs Benchmarks/memory/bench_memory.py,
# which starts and stops (by PID) its own mosquitto, pusher-local and daemons on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
MEGABYTES=${MEGABYTES:-64}
SIZE=${SIZE:-8192}
CELLS=${CELLS:-p2m-spool,p2m-memory,m2p-spool,m2p-memory}
DAEMON_ENV=${DAEMON_ENV:-}
QUICK=${QUICK:-0}

scripts/setup.sh

echo "bench-memory: building release binaries ..." >&2
if [[ "${STATIC:-0}" == 1 ]]; then
    # The build `make deb` ships: the Swift runtime linked in (its own scratch folder, DEB_SCRATCH).
    # shellcheck source=scripts/static-build-flags.sh
    . scripts/static-build-flags.sh
    static=("${static_build_flags[@]}" --scratch-path "${DEB_SCRATCH:-.build-deb}")
    for product in pusher-local pusher-mqtt-bridge; do
        swift build "${static[@]}" -j 2 --product "$product" >&2
    done
    BIN_DIR=$(swift build "${static[@]}" --show-bin-path)
else
    for product in pusher-local pusher-mqtt-bridge; do
        swift build -c release -j 2 --product "$product" >&2
    done
    BIN_DIR=$(swift build -c release --show-bin-path)
fi

export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}
args=(--bin-dir "$BIN_DIR" --runs "$RUNS" --megabytes "$MEGABYTES" --size "$SIZE" --cells "$CELLS")
for kv in $DAEMON_ENV; do args+=(--env "$kv"); done
[[ "${TRIM_PROBE:-0}" == 1 ]] && args+=(--trim-probe)
[[ "$QUICK" == 1 ]] && args+=(--quick)
[[ "${STATIC:-0}" == 1 && "$QUICK" != 1 ]] && args+=(--out Benchmarks/results/memory/static)
# Bounded: QUICK ~2 min, full ~10 min; past 40 min something hangs.
timeout --signal=TERM --kill-after=30 2400 .venv/bin/python Benchmarks/memory/bench_memory.py "${args[@]}"
# The static build's resident code by module (reading /proc/PID/pagemap needs root).
if [[ "${STATIC:-0}" == 1 && "$QUICK" != 1 ]]; then
    if [[ $(id -u) == 0 ]]; then
        timeout --signal=TERM --kill-after=30 600 .venv/bin/python Benchmarks/memory/resident_code.py \
            --bin-dir "$BIN_DIR" --runs "$RUNS" --out Benchmarks/results/memory/static
    else
        echo "bench-memory: not root, so no resident-code.md (it reads /proc/PID/pagemap)" >&2
    fi
fi

#!/usr/bin/env bash
# `make order-file`: regenerates build-support/startup.order, the list of functions the
# daemon runs when it starts, idles and moves a little traffic, which the linker places side by side
# (Package.swift, the daemon's linkerSettings; why: docs/history/benchmarks.md "Memory"). Run it after changes that
# rename or add much code on those paths; a stale list costs memory, never correctness (names it does
# not find are skipped). ~3 min after the builds.
#
# Profiles the static release build that `make deb` ships (DEB_SCRATCH, default .build-deb) under
# callgrind (Benchmarks/memory/order_profile.py), against a mosquitto and a pusher-local of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=${DEB_SCRATCH:-.build-deb}

scripts/setup.sh --valgrind
# shellcheck source=scripts/static-build-flags.sh
. scripts/static-build-flags.sh
nice -n 10 swift build "${static_build_flags[@]}" --scratch-path "$scratch" --product pusher-mqtt-bridge 2>&1 | tail -1
nice -n 10 swift build -c release --product pusher-local 2>&1 | tail -1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Without DWARF: valgrind 3.19 cannot read the DWARF 5 forms of Swift 6.3's toolchain.
static_bin=$(swift build "${static_build_flags[@]}" --scratch-path "$scratch" --show-bin-path)
strip --strip-debug -o "$work/pusher-mqtt-bridge" "$static_bin/pusher-mqtt-bridge"
.venv/bin/python Benchmarks/memory/order_profile.py --binary "$work/pusher-mqtt-bridge" \
  --pusher-local "$(swift build -c release --show-bin-path)/pusher-local" --out build-support/startup.order
# SwiftPM does not see the order file as an input of the link: remove the daemons it placed, so that
# the next build of each scratch folder links them with the new order.
rm -f "$static_bin/pusher-mqtt-bridge" \
  "$(swift build -c release --show-bin-path)/pusher-mqtt-bridge" "$(swift build --show-bin-path)/pusher-mqtt-bridge"

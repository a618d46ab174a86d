#!/usr/bin/env bash
# Checks systemd/pusher-mqtt-bridge.service with systemd's own analyzer:
#   - `systemd-analyze verify` must print nothing (it exits 0 even on warnings, so any output fails);
#     it needs ExecStart's binary to exist, so a copy of the unit points at the built binary.
#   - `systemd-analyze security --offline=yes` must rate the unit at most 2.0 ("OK").
# Usage: scripts/check-unit.sh BIN_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
bin_dir=${1:?usage: $0 BIN_DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sed "s#/usr/local/bin/pusher-mqtt-bridge#$(realpath "$bin_dir")/pusher-mqtt-bridge#g" \
  systemd/pusher-mqtt-bridge.service > "$work/pusher-mqtt-bridge.service"

verify=$(cd "$work" && systemd-analyze verify --man=no ./pusher-mqtt-bridge.service 2>&1 || true)
if [ -n "$verify" ]; then
  echo "check-unit: systemd-analyze verify complained:"; echo "$verify"; exit 1
fi
score_line=$(cd "$work" && systemd-analyze security --offline=yes ./pusher-mqtt-bridge.service 2>&1 | grep "Overall exposure level" || true)
score=$(echo "$score_line" | grep -oE '[0-9]+\.[0-9]+' | head -1)
if [ -z "$score" ]; then echo "check-unit: no exposure score from systemd-analyze security"; exit 1; fi
echo "check-unit: verify clean; ${score_line#→ }"
awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || { echo "check-unit: exposure $score > 2.0"; exit 1; }

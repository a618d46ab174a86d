#!/usr/bin/env bash
# Installs what building, running and testing pusher-mqtt-bridge needs, and nothing that is there already:
#   - Debian packages: libmosquitto-dev, libsodium-dev, zlib1g-dev, libssl-dev (build);
#     mosquitto, mosquitto-clients, openssl, curl (run/tests, and the README's tour); python3-venv (test
#     tools); systemd (unit checks)
#   - a Python virtualenv in .venv with the third-party clients the interop tests use
#     (Tests/interop/requirements.txt: pysher, pusher, paho-mqtt, pytest) and the project's own
#     test harness, Tests/testkit (the bridge_testkit package, installed editable: every suite and
#     benchmark script imports it by name).
#   - with --faults (used by `make faults` / `make soak` only): iptables and iproute2 for the
#     network-partition row of the fault matrix (Tests/faults), on top of everything above.
#   - with --valgrind (used by `make bench-instructions` only): valgrind, for callgrind's counts.
# Usage: scripts/setup.sh [--system-only | --python-only | --faults | --valgrind]
set -euo pipefail
cd "$(dirname "$0")/.."

want_system=1 want_python=1
case "${1:-}" in
  --system-only) want_python=0 ;;
  --python-only) want_system=0 ;;
  --faults) want_faults=1 ;;
  --valgrind) want_valgrind=1 ;;
  "") ;;
  *) echo "usage: $0 [--system-only | --python-only | --faults | --valgrind]" >&2; exit 64 ;;
esac

packages=(libmosquitto-dev libsodium-dev zlib1g-dev libssl-dev mosquitto mosquitto-clients openssl curl python3-venv systemd)
# Only the fault matrix needs these (ip netns + iptables for the partition row); `make test` does not.
[ "${want_faults:-0}" = 1 ] && packages+=(iptables iproute2)
[ "${want_valgrind:-0}" = 1 ] && packages+=(valgrind gcc)

if [ "$want_system" = 1 ]; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    sudo_cmd=()
    [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  # Debian starts a system-wide mosquitto on port 1883 when the package is installed; the
  # project never relies on it (tests start their own brokers on free ports, `make run` its own).
fi

if [ "$want_python" = 1 ]; then
  req=Tests/interop/requirements.txt
  testkit=Tests/testkit
  stamp=.venv/.requirements.sha256
  sum=$(cat "$req" "$testkit/pyproject.toml" | sha256sum | cut -d' ' -f1)
  if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ]; then
    echo "setup: creating .venv with $(grep -cvE '^\s*(#|$)' "$req") Python test packages"
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -r "$req"
    .venv/bin/pip install -q --disable-pip-version-check -e "$testkit"
    echo "$sum" > "$stamp"
  fi
fi

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
#   - with --ejabberd (used by `make test-ejabberd` only): iproute2, and Debian's ejabberd (23.01, mod_mqtt), whose
#     nodes the tests start themselves (Tests/testkit/bridge_testkit/ejabberd.py). Its postinst would
#     start a system-wide ejabberd (and epmd): while it installs, a policy-rc.d of ours (only when the
#     machine has none; Docker-style images already deny every start) refuses every service start, and
#     the unit it enables for boot is disabled again. Nothing of it runs afterwards; an ejabberd that
#     was already installed is left exactly as it was.
# Usage: scripts/setup.sh [--system-only | --python-only | --faults | --valgrind | --ejabberd]
set -euo pipefail
cd "$(dirname "$0")/.."

want_system=1 want_python=1
case "${1:-}" in
  --system-only) want_python=0 ;;
  --python-only) want_system=0 ;;
  --faults) want_faults=1 ;;
  --valgrind) want_valgrind=1 ;;
  --ejabberd) want_ejabberd=1 ;;
  "") ;;
  *) echo "usage: $0 [--system-only | --python-only | --faults | --valgrind | --ejabberd]" >&2; exit 64 ;;
esac

packages=(libmosquitto-dev libsodium-dev zlib1g-dev libssl-dev mosquitto mosquitto-clients openssl curl python3-venv systemd)
# Only the fault matrix needs these (ip netns + iptables for the partition row); `make test` does not.
[ "${want_faults:-0}" = 1 ] && packages+=(iptables iproute2)
[ "${want_valgrind:-0}" = 1 ] && packages+=(valgrind gcc)
# `ss` tells the ejabberd suite which node each member is connected to.
[ "${want_ejabberd:-0}" = 1 ] && packages+=(iproute2)

# Debian's ejabberd without the system service: invoke-rc.d and deb-systemd-invoke ask
# /usr/sbin/policy-rc.d, and exit 101 means "start nothing". Ours is removed afterwards; one that was
# there is left alone (it already decides). The unit the package enables for boot is disabled.
install_ejabberd() {
  local policy=/usr/sbin/policy-rc.d ours=0 sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# scripts/setup.sh --ejabberd: no service starts while packages install\nexit 101\n' |
      "${sudo_cmd[@]}" tee "$policy" >/dev/null
    "${sudo_cmd[@]}" chmod 755 "$policy"
    ours=1
    trap "${sudo_cmd[*]} rm -f $policy" EXIT
  fi
  echo "setup: installing ejabberd (no service started)"
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends ejabberd >/dev/null
  # Not started at boot either (systemctl edits the links and the SysV ones without a running systemd).
  if command -v systemctl >/dev/null; then
    "${sudo_cmd[@]}" systemctl disable ejabberd.service >/dev/null 2>&1 || true
  fi
  if [ "$ours" = 1 ]; then "${sudo_cmd[@]}" rm -f "$policy"; trap - EXIT; fi
}

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
  if [ "${want_ejabberd:-0}" = 1 ] && ! dpkg-query -W -f='${Status}' ejabberd 2>/dev/null | grep -q "install ok installed"; then
    install_ejabberd
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

#!/usr/bin/env bash
# Installs the real Home Assistant that `make test-homeassistant` runs into its own virtualenv,
# .venv-ha (never into .venv: its pins, paho-mqtt 1.x among them, are not the test suites'), from
# Tests/homeassistant/requirements.txt. Does nothing when .venv-ha already matches them.
# The test itself runs in .venv (scripts/setup.sh) and starts .venv-ha/bin/hass as a process.
# Usage: scripts/setup-homeassistant.sh
set -euo pipefail
cd "$(dirname "$0")/.."

req=Tests/homeassistant/requirements.txt
venv=.venv-ha
stamp=$venv/.requirements.sha256
sum=$(sha256sum "$req" | cut -d' ' -f1)
if [ ! -x "$venv/bin/hass" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$sum" ]; then
  echo "setup-homeassistant: installing $(grep -E '^homeassistant==' "$req") into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
  echo "$sum" > "$stamp"
fi

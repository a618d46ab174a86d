#!/usr/bin/env bash
# Installs, with apt-get and only when missing, what the packaging and monitoring targets need:
#   deb              dpkg-dev (dpkg-shlibdeps), lintian, binutils (strip, readelf), gzip
#   test-deb         the above + debootstrap (a fresh Debian 12 root for `make test-deb`), iproute2 (ip, for
#                    the demo's private network namespace)
#   prometheus       prometheus (Debian's prometheus and promtool, for `make test-prometheus`)
# The build and test tools of `make test` come from scripts/setup.sh, which these targets also run.
# Usage: scripts/setup-deb.sh deb|test-deb|prometheus
set -euo pipefail

case "${1:-}" in
  deb) packages=(dpkg-dev lintian binutils gzip) ;;
  test-deb) packages=(dpkg-dev lintian binutils gzip debootstrap iproute2) ;;
  prometheus) packages=(prometheus) ;;
  *) echo "usage: $0 deb|test-deb|prometheus" >&2; exit 64 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup-deb: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  # policy-rc.d-free install: Debian's prometheus package would start its own service where systemd
  # runs; the tests never use it (they start a Prometheus of their own on a free port).
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

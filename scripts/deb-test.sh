#!/usr/bin/env bash
# `make test-deb`: the .deb from `make deb` in a fresh Debian 12 (bookworm, minbase) root.
#
#   1. debootstrap once into DEB_SCRATCH/debootstrap (the packages as a tarball, and the finished
#      root as a tar, both kept for later runs; apt's downloads too), from the Debian mirror of
#      /etc/apt/sources.list(.d) or DEB_MIRROR; every run unpacks a fresh root from that tar;
#   2. `apt-get install ./pusher-mqtt-bridge_….deb` inside it (chroot), dependencies from the mirror;
#      the log is kept in DEB_SCRATCH/test-deb/install.log;
#   3. --version, `check` of the shipped config, `man` finds both pages, bash/zsh/fish completions
#      load, the installed unit passes systemd-analyze verify and security (exposure <= 2.0, offline),
#      an edited bridges.conf survives reinstalling the package (conffile);
#   4. the shipped demo config, unchanged, against mosquitto and pusher-local inside the root, in a
#      network namespace of its own (so its fixed ports 1883/6001/9464 never meet the host's):
#      one event Pusher -> MQTT, one message MQTT -> Pusher, /readyz and /metrics;
#   5. apt-get purge removes the package, its conffile and its directories.
# Needs root (debootstrap, chroot, mount, unshare). Timings go to DEB_SCRATCH/test-deb/timings.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || { echo "test-deb: needs root (debootstrap, chroot, unshare)" >&2; exit 1; }
scratch=${DEB_SCRATCH:-.build-deb}
suite=bookworm
cache="$scratch/debootstrap"
work="$scratch/test-deb"
deb=$(ls -t "$scratch"/deb/pusher-mqtt-bridge_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "test-deb: no package in $scratch/deb: run make deb" >&2; exit 1; }
version=$(dpkg-deb -f "$deb" Version)

# The Debian mirror apt on this host uses (deb822 .sources or one-line lists).
mirror=${DEB_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(grep -hsE "^deb\s+(\[[^]]*\]\s+)?\S+\s+$suite\s" /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
             | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit }}' | head -1 || true)
fi
if [ -z "$mirror" ]; then
  mirror=$(awk -v suite="$suite" '
      /^URIs:/ { uri = $2 } /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) found = uri }
      /^$/ { uri = "" } END { print found }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
fi
[ -n "$mirror" ] || { echo "test-deb: no $suite mirror in /etc/apt/sources.list(.d); set DEB_MIRROR" >&2; exit 1; }

mkdir -p "$cache" "$work"
timings="$work/timings.txt"
: >"$timings"
phase_start=$SECONDS
phase() {
  local now=$SECONDS
  [ -n "${phase_name:-}" ] && printf '%-34s %4ss\n' "$phase_name" "$((now - phase_start))" | tee -a "$timings"
  phase_name=$1 phase_start=$now
  [ -z "$1" ] || echo "[test-deb] $1"
}

root="$work/root"
mounted=()
cleanup() {
  local m
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
bind() { mkdir -p "$2"; mount --bind "$1" "$2"; mounted+=("$2"); }

phase "debootstrap (cached: $cache)"
pristine="$cache/$suite-minbase-root.tar"
if [ ! -f "$pristine" ]; then
  debs="$cache/$suite-minbase-debs.tgz"
  if [ ! -f "$debs" ]; then
    rm -rf "$cache/download"
    debootstrap --variant=minbase --make-tarball="$debs" "$suite" "$cache/download" "$mirror" >"$cache/make-tarball.log" 2>&1 \
      || { tail -20 "$cache/make-tarball.log" >&2; exit 1; }
    rm -rf "$cache/download"
  fi
  rm -rf "$cache/bootstrap"
  debootstrap --variant=minbase --unpack-tarball="$(realpath "$debs")" "$suite" "$cache/bootstrap" "$mirror" \
    >"$cache/debootstrap.log" 2>&1 || { tail -20 "$cache/debootstrap.log" >&2; exit 1; }
  tar -C "$cache/bootstrap" -cf "$pristine" .
  rm -rf "$cache/bootstrap"
fi

phase "fresh root from the tar"
rm -rf "$root"
mkdir -p "$root"
tar -C "$root" -xf "$pristine"
printf 'deb %s %s main\n' "$mirror" "$suite" >"$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# No service starts inside the root while packages install (Debian's policy-rc.d protocol).
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" && chmod 0755 "$root/usr/sbin/policy-rc.d"
mkdir -p "$cache/apt-archives/partial"
bind /proc "$root/proc"
bind /dev "$root/dev"
bind /dev/pts "$root/dev/pts"
bind "$cache/apt-archives" "$root/var/cache/apt/archives"
cp "$deb" "$root/tmp/"
pkg="/tmp/$(basename "$deb")"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"; }

phase "apt-get install ./$(basename "$deb")"
in_root apt-get update -qq
in_root apt-get install -y --no-install-recommends "$pkg" 2>&1 | tee "$work/install.log"
in_root dpkg-query -W -f='${Status} ${Version}\n' pusher-mqtt-bridge >>"$work/install.log"
tail -1 "$work/install.log" | grep -qx "install ok installed $version" || { echo "test-deb: not installed" >&2; exit 1; }

phase "tools for the checks (apt)"
in_root apt-get install -y -qq --no-install-recommends man-db bash-completion zsh fish mosquitto mosquitto-clients systemd \
  >"$work/tools.log" 2>&1 || { tail -20 "$work/tools.log" >&2; exit 1; }

phase "version, check, man, completions"
# expect DESCRIPTION COMMAND...: the command must succeed, or the test stops here.
expect() {
  local what=$1; shift
  if "$@"; then echo "  ok: $what"; else echo "test-deb: FAILED: $what" >&2; exit 1; fi
}
# Outputs go to files first, then grep reads them whole (no SIGPIPE from grep -q in a pipeline).
out() { local file="$work/$1"; shift; "$@" >"$file" 2>&1 || { echo "test-deb: FAILED: $*"; cat "$file"; exit 1; } >&2; }
out version.txt in_root pusher-mqtt-bridge --version
expect "pusher-mqtt-bridge --version = ${version%-*} (package $version)" grep -qx "${version%-*}" "$work/version.txt"
out pusher-local-help.txt in_root pusher-local --help
expect "pusher-local --help" grep -q -- "--port" "$work/pusher-local-help.txt"
out check.txt in_root pusher-mqtt-bridge check --config /etc/pusher-mqtt-bridge/bridges.conf
expect "check of the shipped config: exit 0, rule table with 'temperatures'" grep -q "temperatures" "$work/check.txt"
out man-path.txt in_root man -w pusher-mqtt-bridge
expect "man -w pusher-mqtt-bridge = $(cat "$work/man-path.txt")" grep -qx /usr/share/man/man8/pusher-mqtt-bridge.8.gz "$work/man-path.txt"
out man.txt in_root env MANPAGER=cat MANWIDTH=100 man pusher-mqtt-bridge
expect "man pusher-mqtt-bridge renders ($(wc -l <"$work/man.txt") lines, with SYNOPSIS)" \
  grep -q "SYNOPSIS" "$work/man.txt"
expect "man page documents --config" grep -q -- "--config" "$work/man.txt"
expect "man page documents dead-letters redrive --dry-run" grep -q -- "--dry-run" "$work/man.txt"
out man-local.txt in_root env MANPAGER=cat man 1 pusher-local
expect "man 1 pusher-local documents --activity-timeout" grep -q -- "--activity-timeout" "$work/man-local.txt"
out complete-bash.txt in_root bash -c 'source /usr/share/bash-completion/bash_completion
  _completion_loader pusher-mqtt-bridge; _completion_loader pusher-local
  complete -p pusher-mqtt-bridge pusher-local
  COMP_WORDS=(pusher-mqtt-bridge ch); COMP_CWORD=1; COMP_LINE="pusher-mqtt-bridge ch"; COMP_POINT=${#COMP_LINE}
  $(complete -p pusher-mqtt-bridge | sed -n "s/.*-F \([^ ]*\).*/\1/p") pusher-mqtt-bridge ch pusher-mqtt-bridge
  printf "reply: %s\n" "${COMPREPLY[@]}"'
cat "$work/complete-bash.txt"
expect "bash: both completions load (complete -p)" test "$(grep -c '^complete .* -F _pusher' "$work/complete-bash.txt")" -eq 2
expect "bash completes 'pusher-mqtt-bridge ch' to check" grep -qx "reply: check" "$work/complete-bash.txt"
out complete-zsh.txt in_root zsh -c 'autoload -Uz compinit && compinit -u && print -r -- $_comps[pusher-mqtt-bridge] $_comps[pusher-local]'
expect "zsh: compinit registers both completions" grep -qx "_pusher-mqtt-bridge _pusher-local" "$work/complete-zsh.txt"
out complete-fish.txt in_root fish -c 'complete -C "pusher-mqtt-bridge "'
expect "fish completes the subcommands" grep -q "^check" "$work/complete-fish.txt"
expect "fish completes dead-letters" grep -q "^dead-letters" "$work/complete-fish.txt"
out complete-fish-dl.txt in_root fish -c 'complete -C "pusher-mqtt-bridge dead-letters "'
expect "fish completes dead-letters' subcommands" grep -q "^redrive" "$work/complete-fish-dl.txt"

out unit-verify.txt in_root systemd-analyze verify /lib/systemd/system/pusher-mqtt-bridge.service
expect "systemd-analyze verify of the installed unit: silent" test ! -s "$work/unit-verify.txt"
out unit-security.txt in_root systemd-analyze security --offline=true pusher-mqtt-bridge.service
exposure=$(sed -n 's/.*Overall exposure level for pusher-mqtt-bridge.service: \([0-9.]*\).*/\1/p' "$work/unit-security.txt")
expect "systemd-analyze security of the installed unit: exposure $exposure <= 2.0" awk -v e="$exposure" 'BEGIN { exit !(e != "" && e <= 2.0) }'

phase "conffile kept on reinstall"
expect "bridges.conf is a conffile" grep -q /etc/pusher-mqtt-bridge/bridges.conf "$root/var/lib/dpkg/info/pusher-mqtt-bridge.conffiles"
echo "# edited by test-deb" >>"$root/etc/pusher-mqtt-bridge/bridges.conf"
out reinstall.log in_root dpkg -i "$pkg"
expect "an edited bridges.conf is kept when the package is installed again" grep -q "edited by test-deb" "$root/etc/pusher-mqtt-bridge/bridges.conf"
sed -i '/# edited by test-deb/d' "$root/etc/pusher-mqtt-bridge/bridges.conf"

phase "demo: shipped config vs mosquitto + pusher-local"
install -m 0755 scripts/deb-demo.sh "$root/tmp/demo.sh"
# A network namespace of its own: loopback only, the demo's fixed ports are private to it.
unshare --net bash -c 'ip link set lo up && exec chroot "$0" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 /tmp/demo.sh' "$root" \
  2>&1 | tee "$work/demo.log"
expect "demo: a message each way through the shipped config" grep -q "^demo: ok" "$work/demo.log"

phase "apt-get purge"
in_root apt-get purge -y -qq pusher-mqtt-bridge >"$work/purge.log" 2>&1
expect "purged: the binaries and /etc/pusher-mqtt-bridge are gone" \
  test ! -e "$root/usr/bin/pusher-mqtt-bridge" -a ! -e "$root/usr/bin/pusher-local" -a ! -e "$root/etc/pusher-mqtt-bridge"

phase ""
echo "test-deb: $(basename "$deb") passed in ${SECONDS}s (install log: $work/install.log)"

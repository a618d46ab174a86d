#!/usr/bin/env bash
# `make deb`: builds pusher-mqtt-bridge_<version>_<arch>.deb with dpkg-deb (docs/contract.md §7.5).
#
#   - release build with the Swift runtime linked statically (no Swift on the target host), in its
#     own scratch folder DEB_SCRATCH (default .build-deb), so the normal .build is never relinked;
#   - both binaries stripped; the systemd unit with /usr/bin paths; /etc/pusher-mqtt-bridge/bridges.conf
#     as a conffile; man pages from swift-argument-parser's generate-manual plugin (pusher-mqtt-bridge(8),
#     pusher-local(1)); bash/zsh/fish completions from --generate-completion-script; copyright and
#     changelog.Debian.gz; contrib/ alert rules and dashboard as examples;
#   - Depends: computed by dpkg-shlibdeps from what the binaries link (never written by hand);
#   - lintian: fails on any error, prints the warnings (docs/guide/install.md, "Building the package", explains each).
#
# The version is BridgeCoreVersion.current (what --version prints) plus the Debian revision
# DEB_REVISION (default 1); packaging/deb/changelog must start with that version.
# Output: DEB_OUT (default .build-deb/deb)/pusher-mqtt-bridge_<version>-<rev>_<arch>.deb.
set -euo pipefail
cd "$(dirname "$0")/.."

scratch=${DEB_SCRATCH:-.build-deb}
out=${DEB_OUT:-$scratch/deb}
mkdir -p "$out"
revision=${DEB_REVISION:-1}
swift=${SWIFT:-swift}
maintainer=${DEB_MAINTAINER:-Seed a9ce793a maintainers <maintainers@users.noreply.a-seed-a9ce793a.example>}

upstream=$(sed -n 's/.*static let current = "\([^"]*\)".*/\1/p' Sources/BridgeCore/BridgeCoreVersion.swift)
[ -n "$upstream" ] || { echo "deb: no version in Sources/BridgeCore/BridgeCoreVersion.swift" >&2; exit 1; }
version="$upstream-$revision"
arch=$(dpkg --print-architecture)
changelog_version=$(sed -n '1s/^pusher-mqtt-bridge (\([^)]*\)).*/\1/p' packaging/deb/changelog)
if [ "$changelog_version" != "$version" ]; then
  echo "deb: packaging/deb/changelog starts with $changelog_version, the build is $version: add an entry" >&2
  exit 1
fi
deb="$out/pusher-mqtt-bridge_${version}_${arch}.deb"
step() { printf '[deb %4ss] %s\n' "$SECONDS" "$*"; }

# Man pages: swift-argument-parser's generate-manual plugin, run on the normal debug build in
# MAN_SCRATCH (default .build, usually up to date: seconds). Not on the static release tree: the
# plugin builds every product without --static-swift-stdlib, and SwiftPM then recompiles the whole
# scratch folder (measured: NIOPosix and every other module again), twice per `make deb`.
# generate-manual takes one section per run: 8 (system daemon) for the bridge, 1 for pusher-local.
man_scratch=${MAN_SCRATCH:-.build}
manual_dir="$man_scratch/plugins/GenerateManual/outputs"
# Dates come from packaging/deb/changelog, so two builds of one commit give the same package.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(dpkg-parsechangelog -l packaging/deb/changelog -S Timestamp)}
man_date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%F)
man_out="$out/man"
rm -rf "$man_out" && mkdir -p "$man_out"
for entry in pusher-mqtt-bridge:8 pusher-local:1; do
  target=${entry%:*} section=${entry#*:}
  step "man page $target($section) (generate-manual plugin, $man_scratch)"
  nice -n 10 "$swift" package --scratch-path "$man_scratch" plugin generate-manual \
    --configuration debug --section "$section" --date "$man_date" >"$out/plugin.log" 2>&1 \
    || { tail -30 "$out/plugin.log" >&2; exit 1; }
  cp "$manual_dir/$target/$target.$section" "$man_out/"
done

# shellcheck source=scripts/static-build-flags.sh
. scripts/static-build-flags.sh
for product in pusher-mqtt-bridge pusher-local; do
  step "swift build ${static_build_flags[*]} --product $product"
  nice -n 10 "$swift" build "${static_build_flags[@]}" --scratch-path "$scratch" --product "$product" 2>&1 | tail -3
done
bin=$("$swift" build -c release --scratch-path "$scratch" --show-bin-path)
for product in pusher-mqtt-bridge pusher-local; do
  if readelf -d "$bin/$product" | grep NEEDED | grep -q 'libswift\|libFoundation\|libdispatch'; then
    echo "deb: $product still links the Swift runtime dynamically:" >&2
    readelf -d "$bin/$product" | grep NEEDED >&2
    exit 1
  fi
  # Foundation (with CoreFoundation and ICU) must stay out: scripts/static-build-flags.sh says why.
  if nm --defined-only "$bin/$product" | grep -q -m1 ' __CFInitialize$\| icudt[0-9]*_dat$'; then
    echo "deb: $product links Foundation, CoreFoundation or ICU again (scripts/static-build-flags.sh)" >&2
    exit 1
  fi
done

step "staging $out/root"
root="$out/root"
rm -rf "$root" && mkdir -p "$root/DEBIAN"
install -D -m 0755 "$bin/pusher-mqtt-bridge" "$root/usr/bin/pusher-mqtt-bridge"
install -D -m 0755 "$bin/pusher-local" "$root/usr/bin/pusher-local"
strip --remove-section=.comment --remove-section=.note --strip-unneeded \
  "$root/usr/bin/pusher-mqtt-bridge" "$root/usr/bin/pusher-local"

install -d -m 0755 "$root/lib/systemd/system"
sed -e 's#/usr/local/bin/#/usr/bin/#g' \
    -e 's#^\# Install: `make install`.*#\# Installed by the pusher-mqtt-bridge package; the config is /etc/pusher-mqtt-bridge/bridges.conf.#' \
    systemd/pusher-mqtt-bridge.service >"$root/lib/systemd/system/pusher-mqtt-bridge.service"
chmod 0644 "$root/lib/systemd/system/pusher-mqtt-bridge.service"
install -D -m 0644 bridges.conf "$root/etc/pusher-mqtt-bridge/bridges.conf"

install -d -m 0755 "$root/usr/share/man/man8" "$root/usr/share/man/man1"
gzip -9n -c "$man_out/pusher-mqtt-bridge.8" >"$root/usr/share/man/man8/pusher-mqtt-bridge.8.gz"
gzip -9n -c "$man_out/pusher-local.1" >"$root/usr/share/man/man1/pusher-local.1.gz"

install -d -m 0755 "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
  "$root/usr/share/fish/vendor_completions.d"
for product in pusher-mqtt-bridge pusher-local; do
  # Completion files are sourced, not run: no #! line (lintian bash-completion-with-hashbang).
  "$root/usr/bin/$product" --generate-completion-script bash | sed '1{/^#!/d}' >"$root/usr/share/bash-completion/completions/$product"
  "$root/usr/bin/$product" --generate-completion-script zsh >"$root/usr/share/zsh/vendor-completions/_$product"
  "$root/usr/bin/$product" --generate-completion-script fish >"$root/usr/share/fish/vendor_completions.d/$product.fish"
done

doc="$root/usr/share/doc/pusher-mqtt-bridge"
install -D -m 0644 packaging/deb/copyright "$doc/copyright"
install -D -m 0644 packaging/deb/lintian-overrides "$root/usr/share/lintian/overrides/pusher-mqtt-bridge"
gzip -9n -c packaging/deb/changelog >"$doc/changelog.Debian.gz"
install -D -m 0644 contrib/prometheus/alerts.yml "$doc/examples/prometheus/alerts.yml"
install -D -m 0644 contrib/grafana/pusher-mqtt-bridge.json "$doc/examples/grafana/pusher-mqtt-bridge.json"
find "$root" -type d -exec chmod 0755 {} +

step "dpkg-shlibdeps"
# dpkg-shlibdeps reads debian/control of a source tree: a minimal one, made here.
shlib_src="$out/shlibdeps"
rm -rf "$shlib_src" && mkdir -p "$shlib_src/debian"
printf 'Source: pusher-mqtt-bridge\n\nPackage: pusher-mqtt-bridge\nArchitecture: any\n' >"$shlib_src/debian/control"
depends=$(cd "$shlib_src" && dpkg-shlibdeps -O -e"$OLDPWD/$root/usr/bin/pusher-mqtt-bridge" -e"$OLDPWD/$root/usr/bin/pusher-local" \
  | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }
installed_size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@MAINTAINER@/$maintainer/" \
    -e "s/@INSTALLED_SIZE@/$installed_size/" -e "s/@DEPENDS@/$depends/" \
    packaging/deb/control.in >"$root/DEBIAN/control"
install -m 0644 packaging/deb/conffiles "$root/DEBIAN/conffiles"
install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$root/DEBIAN/"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums"

step "dpkg-deb --build"
rm -f "$out"/pusher-mqtt-bridge_*.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "Depends: $depends"
ls -l "$deb"

step "lintian"
# Exit status is non-zero on any error-level tag; warnings are printed and explained in docs/guide/install.md.
# packaging/deb/lintian-overrides holds the one overridden error, with its reason.
lintian --tag-display-limit 0 "$deb" | tee "$out/lintian.txt"
step "done: $deb"

# pusher-mqtt-bridge — the two commands a newcomer needs:
#   make run    install what is missing, build, start local mosquitto + pusher-local, run the daemon
#   make test   install what is missing, build, run every test (Swift unit + integration, Python interop)
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -eu -o pipefail -c

SWIFT       ?= swift
CONFIG      ?= bridges.conf
BUILD_FLAGS ?=
FAULTS      ?=
PREFIX      ?= /usr/local
BIN_DIR      = $(shell $(SWIFT) build $(BUILD_FLAGS) --show-bin-path 2>/dev/null)

.PHONY: all build setup test test-swift test-interop test-e2e test-faults-unit check-unit bench faults faults-drain-long faults-ejabberd soak fuzz fuzz-smoke tsan run install format lint clean deb test-deb test-prometheus config-reference docc test-homeassistant test-ejabberd

all: build

setup:
	@scripts/setup.sh

build:
	@scripts/setup.sh --system-only
	$(SWIFT) build $(BUILD_FLAGS)

test: setup lint
	$(SWIFT) build --build-tests $(BUILD_FLAGS)
	$(MAKE) --no-print-directory test-swift test-interop test-e2e test-faults-unit check-unit

# docs/configuration.md, generated from the one table of keys (Sources/BridgeCore/Config/ConfigKey*.swift);
# `make test` fails while the file differs from it (ConfigReferenceTests).
config-reference:
	$(SWIFT) build --build-tests $(BUILD_FLAGS)
	WRITE_CONFIG_REFERENCE=1 $(SWIFT) test --skip-build $(BUILD_FLAGS) --filter ConfigReferenceTests

# PusherChannels' DocC documentation (Sources/PusherChannels/PusherChannels.docc) for static hosting,
# in .build/docc/PusherChannels: the public symbol graphs of the debug build, then `docc convert`
# with warnings as errors (a broken symbol link fails). Not part of `make test` (about a minute).
docc:
	$(SWIFT) package dump-symbol-graph --minimum-access-level public >/dev/null
	rm -rf .build/docc && mkdir -p .build/docc/graphs
	cp .build/*/symbolgraph/PusherChannels.symbols.json .build/docc/graphs/
	docc convert Sources/PusherChannels/PusherChannels.docc --additional-symbol-graph-dir .build/docc/graphs \
	  --fallback-display-name PusherChannels --fallback-bundle-identifier org.pusher-mqtt-bridge.PusherChannels \
	  --transform-for-static-hosting --warnings-as-errors --output-path .build/docc/PusherChannels

# systemd-analyze verify (silent) and security (exposure <= 2.0) on the shipped unit.
check-unit:
	scripts/check-unit.sh "$(BIN_DIR)"

test-swift:
	$(SWIFT) test --skip-build $(BUILD_FLAGS)

# Third-party clients (pysher, pusher, paho-mqtt) against our binaries.
test-interop:
	@scripts/setup.sh --python-only
	@if ls Tests/interop/test_*.py >/dev/null 2>&1; then
		PUSHER_LOCAL_BIN="$(BIN_DIR)/pusher-local" BRIDGE_BIN="$(BIN_DIR)/pusher-mqtt-bridge" \
		  .venv/bin/python -m pytest Tests/interop -q -p no:cacheprovider
	else
		echo "test-interop: no Python test files yet"
	fi

# The daemon end to end: real mosquitto, real pusher-local, third-party clients. The pytest targets
# run `setup.sh --python-only` first (a no-op when .venv is current): they import bridge_testkit
# (Tests/testkit), which it installs. A failed test's folder (the daemon's, pusher-local's and
# mosquitto's whole logs and configs) is kept in .build/e2e-failures; a passed test's is removed.
test-e2e:
	@scripts/setup.sh --python-only
	PUSHER_LOCAL_BIN="$(BIN_DIR)/pusher-local" BRIDGE_BIN="$(BIN_DIR)/pusher-mqtt-bridge" \
	  .venv/bin/python -m pytest Tests/e2e -q -p no:cacheprovider --durations=5 \
	  --basetemp=.build/e2e-failures -o tmp_path_retention_policy=failed

# The fault matrix's checker and proxies on their own (no daemon, < 2 s); part of `make test`.
test-faults-unit:
	@scripts/setup.sh --python-only
	.venv/bin/python -m pytest Tests/faults/test_checker.py Tests/faults/test_proxy.py -q -p no:cacheprovider

# The fault matrix (RELIABILITY.md): every row, or FAULTS=row1,row2. Not part of `make test`.
# Needs root for the partition row (ip netns + iptables, installed by setup.sh --faults).
faults:
	@scripts/setup.sh --faults
	$(SWIFT) build $(BUILD_FLAGS)
	PUSHER_LOCAL_BIN="$(BIN_DIR)/pusher-local" BRIDGE_BIN="$(BIN_DIR)/pusher-mqtt-bridge" FAULTS="$(FAULTS)" \
	  .venv/bin/python Tests/faults/matrix.py

# Issue 30's proof of the paced drain (Tests/faults/drain_rows.py, row drain-long): a 10-minute
# Pusher API outage at 1,000 msg/s with drain_rate = "500/s", on release binaries; about 50 minutes.
faults-drain-long:
	@scripts/setup.sh --faults
	$(SWIFT) build -c release
	bin="$$($(SWIFT) build -c release --show-bin-path)"
	PUSHER_LOCAL_BIN="$$bin/pusher-local" BRIDGE_BIN="$$bin/pusher-mqtt-bridge" FAULTS=drain-long FAULTS_CHANNELS=8 \
	  .venv/bin/python Tests/faults/matrix.py

# Issue 31 on a two-node ejabberd 23.01 cluster (Tests/faults/ejabberd_rows.py): the cluster rows' rig in
# partition mode (ejabberd refuses $share) -- a rolling restart at 500 msg/s each way, 5 SIGKILLs, broker
# node 1 stopped under traffic. ejabberd without its system service (setup.sh --ejabberd); every node is
# the row's own. Debug binaries; about 6 minutes after the build.
faults-ejabberd:
	@scripts/setup.sh --ejabberd
	@scripts/setup.sh --faults
	$(SWIFT) build $(BUILD_FLAGS) --product pusher-mqtt-bridge
	$(SWIFT) build $(BUILD_FLAGS) --product pusher-local
	PUSHER_LOCAL_BIN="$(BIN_DIR)/pusher-local" BRIDGE_BIN="$(BIN_DIR)/pusher-mqtt-bridge" \
	  FAULTS=ejabberd-rolling-restart,ejabberd-sigkill,ejabberd-node-stop FAULTS_CHANNELS=12 \
	  .venv/bin/python Tests/faults/matrix.py

# 30 min (SOAK_MINUTES) of traffic both ways with a fault every few minutes (seven kinds, a full
# disk among them: needs root for its tmpfs state_dir); RSS/fd growth < 10 %, counters balance.
soak:
	@scripts/setup.sh
	$(SWIFT) build $(BUILD_FLAGS)
	PUSHER_LOCAL_BIN="$(BIN_DIR)/pusher-local" BRIDGE_BIN="$(BIN_DIR)/pusher-mqtt-bridge" \
	  .venv/bin/python Tests/faults/soak.py

# libFuzzer on the parsers (Fuzz/README.md): FUZZ_SECONDS per target (default 600 = issue 7's
# 10 minutes each, a fresh random seed each run); `make fuzz-smoke` is the 10 s CI run with a fixed
# seed, so CI replays the same inputs every time. Crash inputs go to Fuzz/crashes/.
FUZZ_SECONDS ?= 600
fuzz:
	@scripts/setup.sh --system-only
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

fuzz-smoke:
	@scripts/setup.sh --system-only
	FUZZ_SECONDS=10 FUZZ_SEED=1 scripts/fuzz.sh

# Every test (Swift, interop, e2e) under ThreadSanitizer, in .build-tsan; fails on any report.
# Slow (a TSan build plus a slowed-down run): not part of `make test`/CI.
tsan: setup
	scripts/tsan.sh

# Benchmarks (not in `make test`): bridge vs broker ceiling vs Python baseline -> BENCHMARKS.md.
# RUNS=3, QUICK=1 (smoke check), SCENARIOS=ceiling,sources,p2m,m2p,latency, IMPLS=bridge,bridge-memory,python.
bench:
	scripts/bench.sh

# Payload rules (`where`, `{json:…}`) against plain rules, A B A B in one run, plus RuleTable.route
# with 1…10,000 rules -> Benchmarks/results/payload-rules/. PAIRS=7, QOS=0, QUICK=1 (smoke check).
.PHONY: bench-rules
bench-rules:
	scripts/bench-rules.sh

# Instructions per message under callgrind, bridge and mosquitto in the same run: a figure the
# machine's load does not move -> Benchmarks/results/instructions/. COUNT=20000, RATE=400, REPEATS=2.
.PHONY: bench-instructions
bench-instructions:
	scripts/bench-instructions.sh

run: setup
	$(SWIFT) build $(BUILD_FLAGS)
	exec scripts/run-local.sh "$(BIN_DIR)" "$(CONFIG)"

# Binary, unit and example config (an existing /etc/pusher-mqtt-bridge/bridges.conf is kept).
install:
	@scripts/setup.sh --system-only
	$(SWIFT) build -c release
	install -D -m 0755 "$$($(SWIFT) build -c release --show-bin-path)/pusher-mqtt-bridge" "$(DESTDIR)$(PREFIX)/bin/pusher-mqtt-bridge"
	install -D -m 0644 systemd/pusher-mqtt-bridge.service "$(DESTDIR)/etc/systemd/system/pusher-mqtt-bridge.service"
	if [ -e "$(DESTDIR)/etc/pusher-mqtt-bridge/bridges.conf" ]; then
		echo "install: keeping existing /etc/pusher-mqtt-bridge/bridges.conf (example: bridges.conf.example)"
		install -D -m 0644 bridges.conf "$(DESTDIR)/etc/pusher-mqtt-bridge/bridges.conf.example"
	else
		install -D -m 0644 bridges.conf "$(DESTDIR)/etc/pusher-mqtt-bridge/bridges.conf"
	fi
	if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload; fi

# Debian package (scripts/deb.sh): release build with the Swift runtime linked statically in
# DEB_SCRATCH, man pages, completions, dpkg-shlibdeps, dpkg-deb, lintian (fails on errors).
# Output: $(DEB_SCRATCH)/deb/pusher-mqtt-bridge_<version>_<arch>.deb. Not part of `make test`.
DEB_SCRATCH ?= .build-deb
deb:
	@scripts/setup.sh --system-only
	@scripts/setup-deb.sh deb
	DEB_SCRATCH="$(DEB_SCRATCH)" SWIFT="$(SWIFT)" scripts/deb.sh

# The .deb in a fresh Debian 12 root (debootstrap, tarball cached in $(DEB_SCRATCH)/debootstrap):
# apt-get install, --version, check, man, completions, the demo config against mosquitto and
# pusher-local inside the root. Needs root (chroot). Not part of `make test` (scripts/deb-test.sh).
test-deb: deb
	@scripts/setup-deb.sh test-deb
	DEB_SCRATCH="$(DEB_SCRATCH)" scripts/deb-test.sh

# contrib/: promtool check + unit tests of the alert rules, the dashboard's static checks, and a
# real Prometheus scraping a running daemon (Tests/packaging). About 30 s after the debug build.
test-prometheus:
	@scripts/setup.sh
	@scripts/setup-deb.sh prometheus
	promtool check rules contrib/prometheus/alerts.yml
	promtool test rules contrib/prometheus/alerts_test.yml
	$(SWIFT) build $(BUILD_FLAGS) --product pusher-mqtt-bridge
	$(SWIFT) build $(BUILD_FLAGS) --product pusher-local
	PUSHER_LOCAL_BIN="$(BIN_DIR)/pusher-local" BRIDGE_BIN="$(BIN_DIR)/pusher-mqtt-bridge" \
	  .venv/bin/python -m pytest Tests/packaging/test_contrib.py Tests/packaging/test_prometheus.py -q -p no:cacheprovider

# Home Assistant discovery against a real Home Assistant (docs/contract.md §8.3): the homeassistant
# package in its own virtualenv (.venv-ha, scripts/setup-homeassistant.sh), its MQTT integration at
# the test's mosquitto, the entities read through its REST API. Not part of `make test`.
test-homeassistant:
	@scripts/setup.sh
	@scripts/setup-homeassistant.sh
	$(SWIFT) build $(BUILD_FLAGS) --product pusher-mqtt-bridge
	$(SWIFT) build $(BUILD_FLAGS) --product pusher-local
	PUSHER_LOCAL_BIN="$(BIN_DIR)/pusher-local" BRIDGE_BIN="$(BIN_DIR)/pusher-mqtt-bridge" HASS_BIN="$$PWD/.venv-ha/bin/hass" \
	  .venv/bin/python -m pytest Tests/homeassistant -q -p no:cacheprovider --durations=5

# A bridge cluster on a two-node ejabberd 23.01 cluster (docs/brokers.md): the broker's findings,
# then three daemons over both nodes (500 channels, a member SIGKILLed, a broker node stopped and
# killed). Installs Debian's ejabberd without its system service (setup.sh --ejabberd); every node is
# the test's own. Not part of `make test` (~4 min). A failed test's folder is kept in .build/ejabberd-failures.
test-ejabberd:
	@scripts/setup.sh --ejabberd
	$(SWIFT) build $(BUILD_FLAGS) --product pusher-mqtt-bridge
	$(SWIFT) build $(BUILD_FLAGS) --product pusher-local
	PUSHER_LOCAL_BIN="$(BIN_DIR)/pusher-local" BRIDGE_BIN="$(BIN_DIR)/pusher-mqtt-bridge" \
	  .venv/bin/python -m pytest Tests/ejabberd -q -p no:cacheprovider --durations=5 \
	  --basetemp=.build/ejabberd-failures -o tmp_path_retention_policy=failed

format:
	$(SWIFT) format --in-place --recursive Sources Tests Fuzz Benchmarks Package.swift

# swift-format with the checked-in .swift-format: zero findings, or `make test` fails (`make format` fixes most).
# Then the layout rules (scripts/check-layout.sh: file sizes, polling sleeps, lock count, generated files in
# Sources/, …; the enforced ones are listed at its top) and the tests of that check; then the docs
# (scripts/check-docs.py: every name the docs give exists, docs/architecture.md's tables of locks,
# threads and runtime tasks list exactly what the code has, and every shell block in the readers' docs
# names the test that runs it or says why none does) and the tests of that check.
lint:
	$(SWIFT) format lint --strict --recursive Sources Tests Fuzz Benchmarks Package.swift
	scripts/check-layout.sh
	scripts/test-check-layout.sh
	python3 scripts/check-docs.py
	scripts/test-check-docs.sh

clean:
	rm -rf .build

# Channel discovery at 10,000 channels (docs/contract.md §7.1): occupied → held latency, subscribe
# rate, RSS per held channel, time to leave, against the same channels as static rules ->
# Benchmarks/results/fleet/. RUNS=3, CHANNELS=10000, INTERVAL=5s, QUICK=1 (smoke check).
.PHONY: bench-fleet
bench-fleet:
	scripts/bench-fleet.sh

# A cluster of FLEET_MEMBERS (5) release daemons sharing FLEET_CHANNELS (100,000) discovered channels: time to
# hold them all, RSS per member and of pusher-local, membership traffic and convergence after a
# kill, a join and a leave (Benchmarks/fleet/bench_fleet_cluster.py; ~5 min).
FLEET_MEMBERS  ?= 5
FLEET_CHANNELS ?= 100000
.PHONY: bench-fleet-cluster
bench-fleet-cluster:
	@scripts/setup.sh
	$(SWIFT) build -c release --product pusher-local
	$(SWIFT) build -c release --product pusher-mqtt-bridge
	.venv/bin/python Benchmarks/fleet/bench_fleet_cluster.py --bin-dir "$$($(SWIFT) build -c release --show-bin-path)" \
	  --members $(FLEET_MEMBERS) --channels $(FLEET_CHANNELS)

# build-support/startup.order: the functions a running daemon executes, profiled under
# callgrind on the static release build, which the linker lays side by side (less resident code).
.PHONY: order-file
order-file:
	scripts/order-file.sh

# The Pusher side at 20, 50 and 100 ms of added round-trip time (tc netem in network namespaces of
# its own; NEEDS ROOT): MQTT -> Pusher over 1/10/100 channels with api_lanes 8 and 32 against
# min(lanes, channels) x 10 / RTT, and Pusher -> MQTT -> Benchmarks/results/rtt/.
# RUNS=3, RTTS=20,50,100, LANES=8,32, CHANNELS=1,10,100, QUICK=1 (smoke check). ~15 min.
.PHONY: bench-rtt
bench-rtt:
	scripts/bench-rtt.sh

# Resident memory: idle (10 s after ready, broken down by mapping: binary, shared objects, heap) and
# under a full backlog of 64 MiB of 8 KB messages each way, with and without the spool; the target is
# RSS ≤ idle + 1.3 × the buffered bytes -> Benchmarks/results/memory/. RUNS=3, MEGABYTES=64, SIZE=8192,
# CELLS=p2m-spool,…, DAEMON_ENV="MALLOC_ARENA_MAX=2", STATIC=1 (the static build make deb ships), QUICK=1.
.PHONY: bench-memory
bench-memory:
	scripts/bench-memory.sh

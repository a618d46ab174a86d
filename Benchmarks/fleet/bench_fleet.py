"""`make bench-fleet`: channel discovery (docs/contract.md §7.1) at 10,000 channels.

    .venv/bin/python Benchmarks/fleet/bench_fleet.py --bin-dir .build/release
        [--channels 10000] [--runs 3] [--interval 5s] [--quick] [--out Benchmarks/results/fleet]

(scripts/bench-fleet.sh builds the release binaries and calls this; method and results:
docs/history/benchmarks.md "Fleet discovery".)

One mosquitto and one release pusher-local for the whole run; per run a fresh release daemon. The
channels `private-device-00000`… are occupied by `FleetSubscriber`: raw WebSocket connections
(websocket-client), 500 private channels each, signed here with the app secret, answering
`pusher:ping` — cheap next to the bridge. Whether the bridge holds a channel is read from
pusher-local's stats endpoint (subscribed connections per channel) every 200 ms.

Per run, alternating D S D S …:
- **D (discovery)**: a rule with `channel_prefix = "private-device-"`, `max_channels = N`. Idle
  RSS after the daemon connected and polled; then N channels are occupied at once. Measured:
  per channel, occupied (subscription_succeeded at the subscriber) → held (count 2 in the stats):
  median and p99; the subscribe rate (N ÷ first-to-last held); RSS with N held minus the idle
  RSS, ÷ N; after the subscribers close, the time until the bridge has left every channel.
- **S (static baseline)**: the same N channels as N `channel = …` rules, nothing else: the
  daemon's own subscribe path without discovery. Measured: the subscribe rate (N ÷ first-to-last
  subscribed) and RSS with N subscribed minus the idle RSS of D, ÷ N.
- The subscriber's own rate (N ÷ first-to-last subscription_succeeded, no bridge involved) is
  pusher-local's ceiling for a plain client, reported beside them.

Writes results.json (every run, raw) and summary.md to --out.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import hmac
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

import websocket  # (websocket-client)

from bridge_testkit.harness import Bridge, Mosquitto, PusherLocal, bridge_config, free_port, wait_until
from bridge_testkit.fleet import fleet_rule  # (the e2e test's rule: one definition of the fleet)

PREFIX = "private-device-"
PER_CONNECTION = 500


def device(n: int) -> str:
    return f"{PREFIX}{n:05d}"


class FleetSubscriber:
    """Raw Pusher protocol 7 clients occupying `channels`, PER_CONNECTION private channels to a
    connection; records when each subscription succeeded."""

    def __init__(self, port: int, key: str, secret: str, channels: list[str]):
        self.port, self.key, self.secret = port, key, secret
        self.lock = threading.Lock()
        self.succeeded: dict[str, float] = {}
        self.errors: list[str] = []
        self.sockets: list[websocket.WebSocket] = []
        self.threads: list[threading.Thread] = []
        self.closing = False
        for i in range(0, len(channels), PER_CONNECTION):
            ws = websocket.create_connection(f"ws://127.0.0.1:{port}/app/{key}?protocol=7&client=bench-fleet", timeout=30)
            self.sockets.append(ws)
            t = threading.Thread(target=self._run, args=(ws, channels[i:i + PER_CONNECTION]), daemon=True)
            self.threads.append(t)
        for t in self.threads:
            t.start()

    def _run(self, ws: websocket.WebSocket, channels: list[str]):
        try:
            hello = json.loads(ws.recv())
            socket_id = json.loads(hello["data"])["socket_id"]
            frames = []
            for c in channels:
                signature = hmac.new(self.secret.encode(), f"{socket_id}:{c}".encode(), hashlib.sha256).hexdigest()
                frames.append(json.dumps({"event": "pusher:subscribe", "data": {"channel": c, "auth": f"{self.key}:{signature}"}}))
            for f in frames:
                ws.send(f)
            ws.settimeout(None)
            while True:
                raw = ws.recv()
                if not raw:
                    return
                frame = json.loads(raw)
                event = frame.get("event")
                if event == "pusher_internal:subscription_succeeded":
                    now = time.monotonic()
                    with self.lock:
                        self.succeeded.setdefault(frame["channel"], now)
                elif event == "pusher:ping":
                    ws.send('{"event":"pusher:pong","data":{}}')
                elif event == "pusher:error":
                    with self.lock:
                        self.errors.append(raw[:200])
        except (websocket.WebSocketException, OSError, ValueError) as e:
            if not self.closing:
                with self.lock:
                    self.errors.append(repr(e))

    def count(self) -> int:
        with self.lock:
            return len(self.succeeded)

    def close(self):
        self.closing = True
        for ws in self.sockets:
            try:
                ws.close(timeout=1)
            except Exception:
                pass
        for t in self.threads:
            t.join(5)


def subscriptions(pusher: PusherLocal) -> dict[str, int]:
    status, body = pusher.control("GET", f"/pusher-local/apps/{pusher.app_id}/stats")
    return json.loads(body)["subscriptions"] if status == 200 else {}


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def metric(port: int, family: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(family + "{"):
                    return float(line.rsplit(" ", 1)[1])
    except OSError:
        return None
    return None


def metrics_answer(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class Watch:
    """Polls the stats every `interval` (200 ms; `--watch-interval`: at 100,000 channels each poll
    is a 5 MB answer pusher-local builds and Python reads, which slows what is measured): per
    channel, the first time its count reached `held`, and, once `gone` is armed, the first time it
    disappeared."""

    interval = 0.2

    def __init__(self, pusher: PusherLocal, held: int):
        self.pusher, self.held_count = pusher, held
        self.held: dict[str, float] = {}
        self.gone: dict[str, float] = {}
        self.watch_gone = False
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.polls = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        known: set[str] = set()
        while not self.stop_event.is_set():
            try:
                subs = subscriptions(self.pusher)
            except OSError:
                subs = None
            now = time.monotonic()
            if subs is not None:
                with self.lock:
                    self.polls += 1
                    for c, n in subs.items():
                        if n >= self.held_count and c.startswith(PREFIX):
                            self.held.setdefault(c, now)
                            known.add(c)
                    if self.watch_gone:
                        for c in known:
                            if c not in subs:
                                self.gone.setdefault(c, now)
            self.stop_event.wait(self.interval)

    def counts(self) -> tuple[int, int]:
        with self.lock:
            return len(self.held), len(self.gone)

    def close(self):
        self.stop_event.set()
        self.thread.join(5)


def daemon_config(pusher, broker, workdir: Path, rules: str, metrics_port: int) -> str:
    config = bridge_config(pusher, broker, workdir, rules, name="fleet")
    return (config.replace('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"')
            .replace('log_level = "debug"', 'log_level = "info"')
            .replace('activity_timeout = "2s"', 'activity_timeout = "30s"')
            .replace('pong_timeout = "1s"', 'pong_timeout = "10s"'))


def static_rules(n: int) -> str:
    return "".join(f'\n[[bridge.rule]]\nname = "d{i:05d}"\nfrom = "pusher"\nchannel = "{device(i)}"\n'
                   f'events = ["reading"]\ntopic = "fleet/{i:05d}/{{event}}"\nqos = 1\n' for i in range(n))


def start_daemon(workdir: Path, config: str, name: str) -> tuple[Bridge, int]:
    metrics_port = int(config.split('metrics = "127.0.0.1:')[1].split('"')[0])
    bridge = Bridge(workdir, config, name=name)
    bridge.start()
    wait_until(lambda: not bridge.running() or metrics_answer(metrics_port), 60, 0.1, f"{name}'s /metrics")
    if not bridge.running():
        raise RuntimeError(f"{name} exited:\n{bridge.log()[-2000:]}")
    return bridge, metrics_port


def run_discovery(pusher, broker, workdir: Path, n: int, interval: str, interval_s: float, index: int) -> dict:
    wd = workdir / f"d{index}"
    wd.mkdir()
    bridge, metrics_port = start_daemon(wd, daemon_config(pusher, broker, wd, fleet_rule(max_channels=n, interval=interval), free_port()),
                                        f"discovery-{index}")
    subscriber = None
    watch = None
    try:
        time.sleep(interval_s + 1)  # connected, at least one empty poll done
        idle_kb = rss_kb(bridge.pid)
        pusher_idle_kb = rss_kb(pusher.pid)
        watch = Watch(pusher, held=2)
        channels = [device(i) for i in range(n)]
        started = time.monotonic()
        subscriber = FleetSubscriber(pusher.port, pusher.key, pusher.secret, channels)
        wait_until(lambda: subscriber.count() >= n or subscriber.errors, 120, 0.05, f"{n} channels occupied")
        if subscriber.errors:
            raise RuntimeError(f"subscriber errors: {subscriber.errors[:3]}")
        occupied = dict(subscriber.succeeded)
        occupy_s = max(occupied.values()) - min(occupied.values())
        wait_until(lambda: watch.counts()[0] >= n or not bridge.running(), 4 * interval_s + max(120, n / 250), 0.2,
                   f"the bridge to hold {n} channels")
        if not bridge.running():
            raise RuntimeError(f"the daemon exited:\n{bridge.log()[-2000:]}")
        held = dict(watch.held)
        delays = [held[c] - occupied[c] for c in channels]
        first_held, last_held = min(held.values()), max(held.values())
        time.sleep(2.0)
        held_kb = rss_kb(bridge.pid)
        pusher_held_kb = rss_kb(pusher.pid)  # N channels, each with two subscribers (the device's and the bridge's)
        discovered = metric(metrics_port, "pusher_mqtt_bridge_discovered_channels")
        watch.watch_gone = True
        left_start = time.monotonic()
        subscriber.close()
        wait_until(lambda: watch.counts()[1] >= n or not bridge.running(), 4 * interval_s + max(120, n / 250), 0.2,
                   f"the bridge to leave {n} channels")
        gone = dict(watch.gone)
        return {
            "kind": "discovery", "index": index, "channels": n, "interval_s": interval_s,
            "occupy_seconds": round(occupy_s, 3), "plain_client_subscribe_rate": round(n / max(occupy_s, 1e-6), 1),
            "occupied_to_held_median_s": round(statistics.median(delays), 3),
            "occupied_to_held_p99_s": round(pct(delays, 0.99), 3), "occupied_to_held_max_s": round(max(delays), 3),
            "all_occupied_to_all_held_s": round(last_held - max(occupied.values()), 3),
            "first_to_last_held_s": round(last_held - first_held, 3),
            "subscribe_rate": round(n / max(last_held - first_held, 0.2), 1),
            "idle_rss_kb": idle_kb, "held_rss_kb": held_kb,
            "rss_bytes_per_channel": round((held_kb - idle_kb) * 1024 / n, 1),
            "pusher_local_idle_rss_kb": pusher_idle_kb, "pusher_local_held_rss_kb": pusher_held_kb,
            "pusher_local_rss_bytes_per_channel": round((pusher_held_kb - pusher_idle_kb) * 1024 / n, 1),
            "discovered_channels_metric": discovered,
            "left_all_s": round(max(gone.values()) - left_start, 3),
            "first_to_last_left_s": round(max(gone.values()) - min(gone.values()), 3),
            "since_start_s": round(time.monotonic() - started, 1),
        }
    finally:
        if watch:
            watch.close()
        if subscriber:
            subscriber.close()
        bridge.stop(timeout=20)


def run_static(pusher, broker, workdir: Path, n: int, index: int, idle_kb: int | None) -> dict:
    wd = workdir / f"s{index}"
    wd.mkdir()
    watch = Watch(pusher, held=1)
    started = time.monotonic()
    bridge, _ = start_daemon(wd, daemon_config(pusher, broker, wd, static_rules(n), free_port()), f"static-{index}")
    try:
        wait_until(lambda: watch.counts()[0] >= n or not bridge.running(), 180, 0.2, f"the static bridge to subscribe {n}")
        if not bridge.running():
            raise RuntimeError(f"the daemon exited:\n{bridge.log()[-2000:]}")
        held = dict(watch.held)
        first, last = min(held.values()), max(held.values())
        time.sleep(2.0)
        held_kb = rss_kb(bridge.pid)
        pusher_held_kb = rss_kb(pusher.pid)  # N channels, each with two subscribers (the device's and the bridge's)
        return {"kind": "static", "index": index, "channels": n, "start_to_all_subscribed_s": round(last - started, 3),
                "first_to_last_subscribed_s": round(last - first, 3), "subscribe_rate": round(n / max(last - first, 0.2), 1),
                "held_rss_kb": held_kb,
                "rss_bytes_per_channel_vs_discovery_idle": round((held_kb - idle_kb) * 1024 / n, 1) if idle_kb else None}
    finally:
        watch.close()
        bridge.stop(timeout=20)
        # Until pusher-local has dropped the daemon's subscriptions (the next run starts clean).
        wait_until(lambda: not any(c.startswith(PREFIX) for c in subscriptions(pusher)), 30, 0.2, "static channels gone")


def median_of(runs: list[dict], key: str):
    values = [r[key] for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 3) if values else None


def summary(doc: dict) -> str:
    d, s = doc["medians"]["discovery"], doc["medians"]["static"]
    n = doc["channels"]
    lines = [
        f"# Fleet discovery: {n:,} channels ({doc['started_utc']}, commit {doc['commit']}, {doc['runs']} runs, medians)",
        "",
        f"Machine: {doc['machine']}; load average at start {doc['load_start']}, at end {doc['load_end']}.",
        f"discovery_interval = {doc['interval']}, max_channels = {n}, {PER_CONNECTION} channels per subscriber connection.",
        "",
        "| measure | discovery (D) | static rules (S, baseline) | D ÷ S |",
        "|---|---|---|---|",
        f"| subscribe rate, channels/s (first to last held) | {d['subscribe_rate']} | {s['subscribe_rate']} | "
        f"{ratio(d['subscribe_rate'], s['subscribe_rate'])} |",
        f"| RSS per held channel, bytes | {d['rss_bytes_per_channel']} | {s['rss_bytes_per_channel_vs_discovery_idle']} | "
        f"{ratio(d['rss_bytes_per_channel'], s['rss_bytes_per_channel_vs_discovery_idle'])} |",
        f"| occupied → held, median s | {d['occupied_to_held_median_s']} | – | |",
        f"| occupied → held, p99 s | {d['occupied_to_held_p99_s']} | – | |",
        f"| all occupied → all held, s | {d['all_occupied_to_all_held_s']} | – | |",
        f"| subscribers gone → every channel left, s | {d['left_all_s']} | – | |",
        f"| first to last left, s | {d['first_to_last_left_s']} | – | |",
        f"| idle RSS / RSS with {n:,} held, KiB | {d['idle_rss_kb']} / {d['held_rss_kb']} | – / {s['held_rss_kb']} | |",
        f"| pusher-local's RSS before / with {n:,} channels of two subscribers, KiB (bytes per channel) | "
        f"{d.get('pusher_local_idle_rss_kb')} / {d.get('pusher_local_held_rss_kb')} "
        f"({d.get('pusher_local_rss_bytes_per_channel')}) | – | |",
        "",
        f"A plain client (the subscriber, no bridge) subscribed at {d['plain_client_subscribe_rate']} channels/s "
        f"(pusher-local's ceiling for one client process).",
        "",
        "Every run: " + "; ".join(f"{r['kind'][0].upper()}{r['index']}: {r.get('subscribe_rate')} ch/s" for r in doc["results"]),
    ]
    return "\n".join(lines) + "\n"


def ratio(a, b) -> str:
    return f"{a / b:.2f}" if a and b else "–"


def start_servers(bin_dir: str, prefix: str) -> tuple[Path, Mosquitto, PusherLocal]:
    """The binaries of `bin_dir` for every process started next, a fresh work directory, and the
    servers the fleet benchmarks share: mosquitto and a quiet pusher-local (30 s activity timeout:
    100,000 subscribers' pings would otherwise be a load of their own)."""
    os.environ["PUSHER_LOCAL_BIN"] = str(Path(bin_dir).resolve() / "pusher-local")
    os.environ["BRIDGE_BIN"] = str(Path(bin_dir).resolve() / "pusher-mqtt-bridge")
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    broker = Mosquitto(workdir).start()
    return workdir, broker, PusherLocal(workdir, extra=["--activity-timeout", "30", "--log-level", "warning"]).start()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", default=str(REPO / ".build" / "release"))
    ap.add_argument("--channels", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--interval", default="5s")
    ap.add_argument("--quick", action="store_true", help="1 run of 1,000 channels: checks the harness")
    ap.add_argument("--no-static", action="store_true")
    ap.add_argument("--watch-interval", type=float, default=0.2, help="seconds between two reads of pusher-local's stats")
    ap.add_argument("--out", default=str(REPO / "Benchmarks" / "results" / "fleet"))
    args = ap.parse_args()
    if args.quick:
        args.channels, args.runs = 1000, 1
        args.out = str(Path(args.out) / "quick")
    interval_s = float(args.interval.rstrip("s"))
    Watch.interval = args.watch_interval
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    workdir, broker, pusher = start_servers(args.bin_dir, "bench-fleet-")
    started_utc = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_start = os.getloadavg()[0]
    results: list[dict] = []
    try:
        for i in range(args.runs):
            d = run_discovery(pusher, broker, workdir, args.channels, args.interval, interval_s, i)
            print(json.dumps(d), flush=True)
            results.append(d)
            if not args.no_static:
                s = run_static(pusher, broker, workdir, args.channels, i, d["idle_rss_kb"])
                print(json.dumps(s), flush=True)
                results.append(s)
    finally:
        pusher.stop()
        broker.stop()
    disc = [r for r in results if r["kind"] == "discovery"]
    stat = [r for r in results if r["kind"] == "static"]
    medians = {"discovery": {k: median_of(disc, k) for k in disc[0] if isinstance(disc[0][k], (int, float))},
               "static": {k: median_of(stat, k) for k in (stat[0] if stat else {}) if isinstance(stat[0][k], (int, float))}}
    for key in ("subscribe_rate", "rss_bytes_per_channel_vs_discovery_idle", "held_rss_kb"):
        medians["static"].setdefault(key, None)
    commit = os.environ.get("BENCH_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                                              text=True, cwd=REPO).stdout.strip() or "?"
    doc = {"started_utc": started_utc, "commit": commit, "channels": args.channels, "runs": args.runs,
           "interval": args.interval, "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.release()}",
           "load_start": round(load_start, 2), "load_end": round(os.getloadavg()[0], 2), "results": results,
           "medians": medians}
    (out / "results.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "summary.md").write_text(summary(doc))
    print(summary(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

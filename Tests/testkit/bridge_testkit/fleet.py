"""Channel discovery at scale (docs/contract.md §7.1): the fleet rule, pysher connections occupying
device channels, and a monitor of which channels the bridge holds -- shared by Tests/e2e/test_fleet.py,
the fault matrix's discovery row (Tests/faults/fleet_rows.py) and Benchmarks/fleet/bench_fleet.py."""

from __future__ import annotations

import json
import threading
import time

import pysher

from bridge_testkit.harness import rule, wait_until

PREFIX = "private-device-"
INTERVAL = 5.0  # discovery_interval of the rules below (the contract's minimum)
JOIN_SLACK = 2.5  # a poll, its answer and the subscriptions of up to 50 channels at once
LEAVE_SLACK = 2.5


def device(n: int) -> str:
    return f"{PREFIX}{n:03d}"


def fleet_rule(max_channels: int = 1000, interval: str = "5s") -> str:
    return rule("devices", "pusher", channel_prefix=PREFIX, events=["reading"], topic="fleet/{suffix}/{event}", qos=1,
                discovery_interval=interval, max_channels=max_channels)


class FleetClient:
    """One pysher connection occupying several private channels (signed with the app secret).
    It subscribes them again after every reconnect, and records when each subscription succeeded."""

    def __init__(self, host: str, port: int, key: str, secret: str, channels: list[str]):
        self.channels = channels
        self.lock = threading.Lock()
        self.subscribed_at: dict[str, float] = {}
        self.connections = 0
        self.closed = False
        self.client = pysher.Pusher(key, custom_host=host, port=port, secure=False, secret=secret, reconnect_interval=1)

        def on_connect(_data):
            with self.lock:
                self.connections += 1
                self.subscribed_at.clear()
            for c in channels:
                ch = self.client.subscribe(c)
                ch.bind("pusher_internal:subscription_succeeded", lambda _d, c=c: self._succeeded(c))

        self.client.connection.bind("pusher:connection_established", on_connect)
        self.client.connect()

    def _succeeded(self, channel: str):
        with self.lock:
            self.subscribed_at.setdefault(channel, time.monotonic())

    def all_subscribed(self) -> bool:
        with self.lock:
            return len(self.subscribed_at) == len(self.channels)

    def close(self):
        if not self.closed:
            self.closed = True
            self.client.disconnect(timeout=2)  # pysher joins its thread; without a timeout it can wait ~100 s


def close_all(clients: list[FleetClient]):
    """Closes the connections side by side (each close may wait up to 2 s for pysher's thread)."""
    threads = [threading.Thread(target=c.close) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)


def occupy(pusher_local, channels: list[str], per_connection: int = 10, timeout: float = 15) -> list[FleetClient]:
    """pysher connections holding `channels`, `per_connection` to a connection; returns once every
    channel's subscription succeeded."""
    clients = [FleetClient("127.0.0.1", pusher_local.port, pusher_local.key, pusher_local.secret,
                           channels[i:i + per_connection]) for i in range(0, len(channels), per_connection)]
    wait_until(lambda: all(c.all_subscribed() for c in clients), timeout, 0.05, f"pysher to occupy {len(channels)} channels")
    return clients


def occupied_at(clients: list[FleetClient]) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in clients:
        with c.lock:
            out.update(c.subscribed_at)
    return out


def subscriptions(pusher_local) -> dict[str, int]:
    """Subscribed connections per occupied channel, from pusher-local's stats ({} if it does not answer)."""
    try:
        status, body = pusher_local.control("GET", f"/pusher-local/apps/{pusher_local.app_id}/stats")
    except OSError:
        return {}
    return json.loads(body).get("subscriptions", {}) if status == 200 else {}


class HoldMonitor:
    """Polls pusher-local's stats every 100 ms and records, per channel, when its subscription
    count was first seen at 2 or more (`held_at`, the bridge joined beside the pysher client) and,
    after `expect_left` was called for it, when it was first seen gone (`left_at`)."""

    def __init__(self, pusher_local):
        self.pusher_local = pusher_local
        self.lock = threading.Lock()
        self.held_at: dict[str, float] = {}
        self.left_at: dict[str, float] = {}
        self.watch_left: set[str] = set()
        self.last: dict[str, int] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopped.is_set():
            subs = subscriptions(self.pusher_local)
            now = time.monotonic()
            with self.lock:
                self.last = subs
                for channel, count in subs.items():
                    if count >= 2:
                        self.held_at.setdefault(channel, now)
                for channel in self.watch_left:
                    if subs.get(channel, 0) == 0:
                        self.left_at.setdefault(channel, now)
            self.stopped.wait(0.1)

    def expect_left(self, channels: list[str]):
        with self.lock:
            self.watch_left.update(channels)

    def held(self) -> set[str]:
        with self.lock:
            return {c for c, n in self.last.items() if n >= 2 and c.startswith(PREFIX)}

    def snapshot(self) -> tuple[dict[str, float], dict[str, float]]:
        with self.lock:
            return dict(self.held_at), dict(self.left_at)

    def close(self):
        self.stopped.set()
        self.thread.join(2)

"""Fleets of channels (docs/contract.md §7.1): a Pusher → MQTT rule with `channel_prefix` finds the
occupied channels by polling Pusher's channel list, joins them, routes their events to
`fleet/{suffix}/{event}`, and leaves them once only the bridge is left in them.

Real mosquitto, real pusher-local, the daemon; pysher clients occupy the channels (several private
channels per pysher connection: `FleetClient`), the official `pusher` library triggers, paho-mqtt
receives. Whether the bridge holds a channel is read from pusher-local's stats endpoint
(`GET /pusher-local/apps/ID/stats`, subscribed connections per channel): a channel one pysher
client occupies is held when its count is 2, and left by the bridge when it disappears once that
client is gone.
"""

from __future__ import annotations

import json
import time
import urllib.request

from bridge_testkit.fleet import (INTERVAL, JOIN_SLACK, LEAVE_SLACK, PREFIX, FleetClient, HoldMonitor, close_all,
                                  device, fleet_rule, occupied_at, occupy)
from bridge_testkit.harness import MQTTCollector, PusherLocal, bridge_config, free_port, http_get, wait_until

def metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        out = {}
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out


def rule_metric(port: int, family: str, bridge: str = "e2e", rule: str = "devices") -> float | None:
    """The value of `family{bridge,rule}`, whatever the label order; None when the series is absent."""
    for name, value in metrics(port).items():
        if name.startswith(family + "{") and f'bridge="{bridge}"' in name and f'rule="{rule}"' in name:
            return value
    return None


def start_fleet_bridge(bridges, pusher, broker, workdir, rules: str) -> int:
    metrics_port = free_port()
    config = bridge_config(pusher, broker, workdir, rules).replace('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"')
    bridge = bridges(config)
    wait_until(lambda: not bridge.running() or http_get(f"http://127.0.0.1:{metrics_port}/metrics")[0] == 200, 15, 0.1, "the daemon's /metrics")
    assert bridge.running(), f"the daemon refused the fleet config or exited:\n{bridge.log()[-3000:]}"
    wait_until(lambda: stats(pusher).get("connections", 0) >= 1, 10, 0.1, "the daemon's Pusher connection")
    return metrics_port


def stats(pusher_local) -> dict:
    status, body = pusher_local.control("GET", f"/pusher-local/apps/{pusher_local.app_id}/stats")
    return json.loads(body) if status == 200 else {}


def trigger_readings(pusher_local, channels: list[str], count: int):
    """`count` numbered `reading` events on every channel (seq 1…count, in order per channel),
    ten to a batch request as hosted Pusher allows."""
    http = pusher_local.http_client()
    batch = []
    for seq in range(1, count + 1):
        for c in channels:
            batch.append({"channel": c, "name": "reading", "data": json.dumps({"device": c[len(PREFIX):], "seq": seq})})
            if len(batch) == 10:
                http.trigger_batch(batch)
                batch = []
    if batch:
        http.trigger_batch(batch)


def readings_by_topic(collector: MQTTCollector) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for m in collector.snapshot():
        out.setdefault(m.topic, []).append(json.loads(m.payload)["seq"])
    return out


def test_200_channels_in_waves_are_joined_routed_and_left(broker, pusher, bridges, workdir):
    """4 waves of 50 channels, 4 s apart (so they land at different phases of the 5 s poll):
    each channel held within one interval (+ slack) of being occupied; 5 numbered readings per
    channel reach fleet/NNN/reading in order; each wave's channels left within two intervals of
    its clients leaving, while the other waves stay held."""
    metrics_port = start_fleet_bridge(bridges, pusher, broker, workdir, fleet_rule())
    monitor = HoldMonitor(pusher)
    collector = MQTTCollector(broker.port, ["fleet/#"])
    waves: list[list[FleetClient]] = []
    try:
        for w in range(4):
            started = time.monotonic()
            waves.append(occupy(pusher, [device(n) for n in range(w * 50, w * 50 + 50)]))
            time.sleep(max(0.0, 4.0 - (time.monotonic() - started)))
        everything = [device(n) for n in range(200)]
        wait_until(lambda: set(everything) <= set(monitor.snapshot()[0]), INTERVAL + JOIN_SLACK + 2, 0.1,
                   "the bridge to hold all 200 channels")
        held_at, _ = monitor.snapshot()
        occupied = occupied_at([c for wave in waves for c in wave])
        delays = sorted(held_at[c] - occupied[c] for c in everything)
        late = {c: round(held_at[c] - occupied[c], 2) for c in everything if held_at[c] - occupied[c] > INTERVAL + JOIN_SLACK}
        assert not late, f"held later than {INTERVAL + JOIN_SLACK} s after occupied: {late}"
        print(f"occupied -> held: median {delays[100]:.2f} s, max {delays[-1]:.2f} s")
        assert rule_metric(metrics_port, "pusher_mqtt_bridge_discovered_channels") == 200

        trigger_readings(pusher, everything, 5)
        wait_until(lambda: len(collector.snapshot()) >= 1000, 30, 0.1, "1000 readings at MQTT")
        time.sleep(0.5)  # nothing more (no duplicates) should come
        got = readings_by_topic(collector)
        expected = {f"fleet/{n:03d}/reading": [1, 2, 3, 4, 5] for n in range(200)}
        wrong = {t: got.get(t) for t in expected if got.get(t) != expected[t]}
        assert not wrong, f"readings missing, duplicated or out of order: {dict(list(wrong.items())[:10])}"
        assert set(got) == set(expected), f"unexpected topics: {set(got) - set(expected)}"

        # Waves leave one after the other, 3 s apart; the later ones must stay held meanwhile.
        left_when: dict[str, float] = {}
        for w, wave in enumerate(waves):
            channels = [c for client in wave for c in client.channels]
            monitor.expect_left(channels)
            now = time.monotonic()
            close_all(wave)
            left_when.update({c: now for c in channels})
            time.sleep(3.0)
            remaining = {device(n) for n in range((w + 1) * 50, 200)}
            missing = remaining - monitor.held()
            assert not missing, f"channels still occupied were left after wave {w} left: {sorted(missing)[:10]}"
        wait_until(lambda: set(everything) <= set(monitor.snapshot()[1]), 2 * INTERVAL + LEAVE_SLACK, 0.1,
                   "the bridge to leave all 200 channels")
        _, left_at = monitor.snapshot()
        slow = {c: round(left_at[c] - left_when[c], 2) for c in everything if left_at[c] - left_when[c] > 2 * INTERVAL + LEAVE_SLACK}
        assert not slow, f"left later than {2 * INTERVAL + LEAVE_SLACK} s after the clients left: {slow}"
        wait_until(lambda: rule_metric(metrics_port, "pusher_mqtt_bridge_discovered_channels") == 0, 3, 0.2,
                   "discovered_channels back to 0")
    finally:
        monitor.close()
        collector.close()
        close_all([c for wave in waves for c in wave])


def test_max_channels_caps_what_is_held(broker, pusher, bridges, workdir):
    """30 channels occupied, max_channels = 20: exactly 20 held, the rest counted as skipped."""
    metrics_port = start_fleet_bridge(bridges, pusher, broker, workdir, fleet_rule(max_channels=20))
    monitor = HoldMonitor(pusher)
    clients = occupy(pusher, [device(n) for n in range(30)])
    try:
        wait_until(lambda: len(monitor.held()) >= 20, INTERVAL + JOIN_SLACK + 2, 0.1, "20 channels held")
        time.sleep(INTERVAL + 1)  # at least one more poll: still 20, never more
        held = monitor.held()
        assert len(held) == 20, f"{len(held)} channels held with max_channels = 20"
        assert len(monitor.snapshot()[0]) == 20, "more than 20 channels were held at some point"
        assert rule_metric(metrics_port, "pusher_mqtt_bridge_discovered_channels") == 20
        skipped = rule_metric(metrics_port, "pusher_mqtt_bridge_discovery_skipped_total")
        assert skipped is not None and skipped > 0, f"discovery_skipped_total = {skipped}"
        # The held ones carry their events; the skipped ones publish nothing.
        collector = MQTTCollector(broker.port, ["fleet/#"])
        try:
            trigger_readings(pusher, [device(n) for n in range(30)], 1)
            wait_until(lambda: len(collector.snapshot()) >= 20, 10, 0.1, "20 readings")
            time.sleep(0.5)
            topics = {m.topic for m in collector.snapshot()}
            assert topics == {f"fleet/{c[len(PREFIX):]}/reading" for c in held}
        finally:
            collector.close()
    finally:
        monitor.close()
        close_all(clients)


def test_pusher_local_restart_loses_no_channel(broker, pusher, bridges, workdir):
    """50 channels held; pusher-local is killed and started again on the same port: the pysher
    clients reconnect and the bridge holds all 50 again, and each carries its events."""
    start_fleet_bridge(bridges, pusher, broker, workdir, fleet_rule())
    channels = [device(n) for n in range(50)]
    clients = occupy(pusher, channels)
    monitor = HoldMonitor(pusher)
    restarted = None
    try:
        wait_until(lambda: set(channels) <= monitor.held(), INTERVAL + JOIN_SLACK + 2, 0.1, "50 channels held")
        port = pusher.port
        pusher.kill()
        time.sleep(1.0)
        restarted = PusherLocal(workdir, port=port, extra=["--activity-timeout", "2"]).start()
        back = time.monotonic()
        monitor.pusher_local = restarted
        wait_until(lambda: all(c.all_subscribed() and c.connections >= 2 for c in clients), 15, 0.1,
                   "the pysher clients to reconnect and subscribe again")
        wait_until(lambda: set(channels) <= monitor.held(), 2 * INTERVAL + 8, 0.1,
                   "the bridge to hold all 50 channels again")
        print(f"all 50 held again {time.monotonic() - back:.1f} s after pusher-local came back")
        collector = MQTTCollector(broker.port, ["fleet/#"])
        try:
            trigger_readings(restarted, channels, 2)
            wait_until(lambda: len(collector.snapshot()) >= 100, 15, 0.1, "100 readings after the restart")
            time.sleep(0.5)
            got = readings_by_topic(collector)
            assert got == {f"fleet/{n:03d}/reading": [1, 2] for n in range(50)}
        finally:
            collector.close()
    finally:
        monitor.close()
        close_all(clients)
        if restarted is not None:
            restarted.stop()

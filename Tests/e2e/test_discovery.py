"""Channel discovery end to end (docs/contract.md §7.1): pysher occupies `private-device-NNN`
channels on a real pusher-local, the daemon finds them by polling, events triggered with the
official `pusher` library reach paho-mqtt on real mosquitto, and the daemon leaves once pysher has gone."""

from __future__ import annotations

import json
import signal
import threading
import time
import urllib.request

import pysher

from conftest import bridge_config
from harness import MQTTCollector, PusherLocal, free_port, port_open, publish, retained, wait_until

INTERVAL = 5.0

DEVICES = """
[[bridge.rule]]
name = "devices"
from = "pusher"
channel_prefix = "private-device-"
events = ["reading"]
topic = "fleet/{suffix}/{event}"
discovery_interval = "5s"
"""

CHANNELS = [f"private-device-{n:03d}" for n in range(1, 6)]


def subscriptions(pusher_local) -> dict[str, int]:
    """Subscriptions per channel, from pusher-local's stats endpoint."""
    status, body = pusher_local.control("GET", f"/pusher-local/apps/{pusher_local.app_id}/stats")
    assert status == 200, body
    return json.loads(body)["subscriptions"]


class PysherDevices:
    """One pysher connection subscribed to `channels` (private: pysher signs with the secret)."""

    def __init__(self, pusher_local, channels: list[str], user_data: dict | None = None):
        self.pending = set(channels)
        self.lock = threading.Lock()
        self.all_subscribed = threading.Event()
        self.client = pysher.Pusher(pusher_local.key, custom_host="127.0.0.1", port=pusher_local.port,
                                    secure=False, secret=pusher_local.secret, user_data=user_data)

        def subscribed(channel):
            with self.lock:
                self.pending.discard(channel)
                if not self.pending:
                    self.all_subscribed.set()

        def on_connect(_data):
            for channel in channels:
                ch = self.client.subscribe(channel)
                ch.bind("pusher_internal:subscription_succeeded", lambda _d, c=channel: subscribed(c))

        self.client.connection.bind("pusher:connection_established", on_connect)
        self.client.connect()
        if not self.all_subscribed.wait(10):
            raise RuntimeError(f"pysher did not subscribe {sorted(self.pending)}")

    def close(self):
        self.client.disconnect(timeout=2)  # pysher joins its thread; without a timeout it can wait ~100 s


def test_discovered_channels_are_joined_bridged_and_left(pusher, broker, workdir, bridges):
    bridge = bridges(bridge_config(pusher, broker, workdir, DEVICES))
    collector = MQTTCollector(broker.port, ["fleet/#"])
    # The start-up poll finds nothing; the devices arrive after it, so the bridge finds them by
    # the next poll (at most one interval later).
    wait_until(lambda: "pusher connected" in bridge.log(), 10, 0.1, "the bridge to connect")
    time.sleep(1.0)

    devices = PysherDevices(pusher, CHANNELS)
    occupied_at = time.monotonic()
    assert all(subscriptions(pusher).get(c) == 1 for c in CHANNELS)

    # Within one interval (plus the time a poll and five subscriptions take) the bridge is in all five.
    wait_until(lambda: all(subscriptions(pusher).get(c) == 2 for c in CHANNELS), INTERVAL + 3, 0.1,
               "the bridge to join the five device channels")
    joined_after = time.monotonic() - occupied_at
    assert joined_after <= INTERVAL + 3

    http = pusher.http_client()
    sent = {c: json.dumps({"device": c[-3:], "t": 20 + i}) for i, c in enumerate(CHANNELS)}
    for channel, data in sent.items():
        http.trigger(channel, "reading", data)
        http.trigger(channel, "ignored", "not selected by events")
    wait_until(lambda: all(collector.payloads(f"fleet/{c[-3:]}/reading") for c in CHANNELS), 10, 0.1,
               "a reading from every device at MQTT")
    for channel, data in sent.items():
        assert [p.decode() for p in collector.payloads(f"fleet/{channel[-3:]}/reading")] == [data]
    assert not [m for m in collector.snapshot() if "ignored" in m.topic]

    # pysher leaves: the bridge is alone in each channel and leaves within two intervals.
    devices.close()
    left_at = time.monotonic()
    wait_until(lambda: not any(subscriptions(pusher).get(c, 0) for c in CHANNELS), 2 * INTERVAL + 2, 0.1,
               "the bridge to leave the five device channels")
    left_after = time.monotonic() - left_at
    assert left_after <= 2 * INTERVAL + 2
    print(f"discovery: joined {joined_after:.1f} s after pysher subscribed, left {left_after:.1f} s after it went")
    log = bridge.log()
    assert log.count("discovered channel left") >= len(CHANNELS)
    collector.close()
    stopping = time.monotonic()
    assert bridge.stop(signal.SIGTERM) == 0
    assert time.monotonic() - stopping < 5  # the discovery task ends with the bridge


ROOMS = """
[[bridge.presence]]
channel_prefix = "presence-room-"
topic = "dash/rooms/{suffix}"
discovery_interval = "5s"
"""


def test_discovered_presence_rooms_are_mirrored_and_cleared(pusher, broker, workdir, bridges):
    # A ghost from an earlier run: cleared once the room is joined and its member list arrives.
    publish(broker.port, "dash/rooms/a/members/ghost", "{}", retain=True)
    # And one in a room nobody enters: cleared after a poll shows the room empty.
    publish(broker.port, "dash/rooms/gone/members/old", "{}", retain=True)
    publish(broker.port, "dash/rooms/gone/count", "1", retain=True)
    bridge = bridges(bridge_config(pusher, broker, workdir, ROOMS))
    wait_until(lambda: "pusher connected" in bridge.log(), 10, 0.1, "the bridge to connect")

    ann = PysherDevices(pusher, ["presence-room-a"], user_data={"user_id": "ann", "user_info": {"name": "Ann"}})
    expected = {"dash/rooms/a/members/ann": b'{"name":"Ann"}', "dash/rooms/a/count": b"1"}
    wait_until(lambda: retained(broker.port, "dash/rooms/#", settle=0.2) == expected, INTERVAL + 5, 0.2,
               "room a mirrored under dash/rooms/a (ghost cleared, the bridge not listed)")
    assert subscriptions(pusher).get("presence-room-a") == 2

    # Ann leaves: user_count 1 is the bridge itself; the room is left and its retained state cleared.
    ann.close()
    wait_until(lambda: not subscriptions(pusher).get("presence-room-a", 0), 2 * INTERVAL + 2, 0.1,
               "the bridge to leave presence-room-a")
    wait_until(lambda: retained(broker.port, "dash/rooms/#", settle=0.2) == {}, 5, 0.2,
               "room a's members and count cleared")


def gauge(port: int, rule: str) -> float | None:
    """`pusher_mqtt_bridge_discovered_channels` of `rule`, or None before the series exists."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("pusher_mqtt_bridge_discovered_channels{") and f'rule="{rule}"' in line:
                return float(line.split()[-1])
    return None


def test_reload_changes_discovery_rules_without_reconnecting(pusher, broker, workdir, bridges):
    metrics_port = free_port()
    wide = DEVICES.replace('topic = "fleet/{suffix}/{event}"', 'topic = "wide/{suffix}"')
    narrow = DEVICES.replace('name = "devices"', 'name = "narrow"').replace(
        'channel_prefix = "private-device-"', 'channel_prefix = "private-device-a"').replace(
        'topic = "fleet/{suffix}/{event}"', 'topic = "narrow/{suffix}"')
    with_metrics = ('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"')
    bridge = bridges(bridge_config(pusher, broker, workdir, wide).replace(*with_metrics))
    wait_until(lambda: port_open(metrics_port), 10, 0.1, "/metrics")
    assert gauge(metrics_port, "devices") == 0
    devices = PysherDevices(pusher, ["private-device-a1", "private-device-b1"])
    wait_until(lambda: [subscriptions(pusher).get(c) for c in ("private-device-a1", "private-device-b1")] == [2, 2],
               INTERVAL + 3, 0.1, "the bridge to join both channels")
    wait_until(lambda: gauge(metrics_port, "devices") == 2, 5, 0.1, "discovered_channels = 2")

    # The wide rule goes, a narrower one comes: b1 is left, a1 is taken by the new rule at once.
    bridge.write_config(bridge_config(pusher, broker, workdir, narrow).replace(*with_metrics))
    bridge.send_signal(signal.SIGHUP)
    wait_until(lambda: "reloaded" in bridge.log(), 10, 0.1, "the reload")
    wait_until(lambda: subscriptions(pusher).get("private-device-b1") == 1, 5, 0.1, "the bridge to leave b1")
    wait_until(lambda: subscriptions(pusher).get("private-device-a1") == 2, 5, 0.1, "the new rule to take a1 at once")
    wait_until(lambda: gauge(metrics_port, "narrow") == 1 and gauge(metrics_port, "devices") == 0, 5, 0.1,
               "discovered_channels: narrow 1, devices 0")
    collector = MQTTCollector(broker.port, ["narrow/#", "wide/#"])
    time.sleep(0.5)
    http = pusher.http_client()
    http.trigger("private-device-a1", "reading", "after the reload")
    wait_until(lambda: collector.payloads("narrow/1") == [b"after the reload"], 10, 0.1, "the event through the new rule")
    assert not collector.payloads("wide/a1")
    assert bridge.log().count("pusher connected") == 1
    devices.close()
    collector.close()


def test_subscription_count_events_leave_at_once(broker, workdir, bridges):
    """With `pusher_internal:subscription_count` events (pusher-local --subscription-count), the
    bridge leaves as soon as the count says it is alone, well before the next poll."""
    local = PusherLocal(workdir, extra=["--activity-timeout", "2", "--subscription-count"]).start()
    try:
        slow = DEVICES.replace('discovery_interval = "5s"', 'discovery_interval = "30s"')
        bridge = bridges(bridge_config(local, broker, workdir, slow))
        wait_until(lambda: "pusher connected" in bridge.log(), 10, 0.1, "the bridge to connect")
        devices = PysherDevices(local, ["private-device-x"])
        # Restarted, so that the start-up poll finds the device (the next poll is 30 s away).
        bridge.stop()
        bridge = bridges(bridge_config(local, broker, workdir, slow), name="bridge2")
        wait_until(lambda: subscriptions(local).get("private-device-x") == 2, 10, 0.1,
                   "the start-up poll to find the device")
        time.sleep(0.5)
        devices.close()
        gone = time.monotonic()
        wait_until(lambda: not subscriptions(local).get("private-device-x", 0), 5, 0.05,
                   "the bridge to leave on the subscription_count event")
        assert time.monotonic() - gone < 5  # the next poll is 30 s away
        assert "reason=alone" in bridge.log()
    finally:
        local.stop()

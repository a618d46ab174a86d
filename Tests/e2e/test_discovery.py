"""Channel discovery end to end (docs/contract.md §7.1): pysher occupies `private-device-NNN`
channels on a real pusher-local, the daemon finds them by polling, events triggered with the
official `pusher` library reach paho-mqtt on real mosquitto, and the daemon leaves once pysher has gone."""

from __future__ import annotations

import json
import threading
import time

import pysher

from conftest import bridge_config
from harness import MQTTCollector, publish, retained, wait_until

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


ROOMS = """
[[bridge.presence]]
channel_prefix = "presence-room-"
topic = "dash/rooms/{suffix}"
discovery_interval = "5s"
"""


def test_discovered_presence_rooms_are_mirrored_and_cleared(pusher, broker, workdir, bridges):
    # A ghost from an earlier run: cleared once the room is joined and its member list arrives.
    publish(broker.port, "dash/rooms/a/members/ghost", "{}", retain=True)
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
    wait_until(lambda: retained(broker.port, "dash/rooms/#", settle=0.2) == {}, 5, 0.2, "room a's members and count cleared")

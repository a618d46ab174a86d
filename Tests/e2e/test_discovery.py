"""Channel discovery end to end (docs/contract.md §7.1): pysher occupies `private-device-NNN`
channels on a real pusher-local, the daemon finds them by polling, events triggered with the
official `pusher` library reach paho-mqtt on real mosquitto, and the daemon leaves once pysher has gone."""

from __future__ import annotations

import json
import re
import signal
import threading
import time
import urllib.request
from datetime import datetime

import pysher
from pusher.signature import sign

from bridge_testkit.harness import (MQTTCollector, PusherLocal, bridge_config, free_port, port_open, publish, retained,
                                    rule, wait_until)

INTERVAL = 5.0

DEVICES = rule("devices", "pusher", channel_prefix="private-device-", events=["reading"], topic="fleet/{suffix}/{event}",
               discovery_interval="5s")

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


def test_channel_occupied_webhooks_join_at_once(broker, workdir, bridges):
    """pusher-local's channel_occupied webhook makes the bridge join the channel (and poll its
    prefix) at once, long before the next poll."""
    webhook_port = free_port()
    local = PusherLocal(workdir, extra=["--activity-timeout", "2", "--webhook",
                                       f"http://127.0.0.1:{webhook_port}/webhooks/e2e"]).start()
    try:
        slow = DEVICES.replace('discovery_interval = "5s"', 'discovery_interval = "60s"')
        config = (bridge_config(local, broker, workdir, slow, daemon=f'webhooks = "127.0.0.1:{webhook_port}"')
                  + '\n[bridge.webhooks]\ntopic_prefix = "hooks/e2e"\n')
        bridge = bridges(config)
        wait_until(lambda: port_open(webhook_port) and "pusher connected" in bridge.log(), 15, 0.1,
                   "the webhook listener and the Pusher connection")
        time.sleep(0.5)  # past the start-up poll
        devices = PysherDevices(local, ["private-device-w"])
        occupied = time.monotonic()
        wait_until(lambda: subscriptions(local).get("private-device-w") == 2, 10, 0.1,
                   "the bridge to join on the channel_occupied webhook")
        assert time.monotonic() - occupied < 10  # the next poll is 60 s away
        devices.close()
    finally:
        local.stop()


def post_webhook(port: int, pusher_local, events: list[dict], time_ms: int) -> int:
    """One webhook request as Pusher makes it: the events, `time_ms` (when it was made), signed
    with the app secret by the official library's own function."""
    body = json.dumps({"time_ms": time_ms, "events": events})
    request = urllib.request.Request(f"http://127.0.0.1:{port}/webhooks/e2e", data=body.encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("X-Pusher-Key", pusher_local.key)
    request.add_header("X-Pusher-Signature", sign(pusher_local.secret, body))
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def now_ms() -> int:
    return int(time.time() * 1000)


def test_a_count_taken_before_the_bridge_subscribed_does_not_make_it_leave(broker, workdir, bridges):
    """Issue 26, defect 3: a `subscription_count` of 1 counted while a device was alone (Pusher sends
    it with `channel_occupied`) is not "only the bridge is left" once the bridge's own subscription
    took effect after it, whichever order the batch has and whether it arrives before or after that
    subscription; the poll answered just before the subscription keeps the channel too. The test
    plays Pusher's webhooks with their `time_ms`; a count taken after the subscription still leaves."""
    webhook_port = free_port()
    local = PusherLocal(workdir, extra=["--activity-timeout", "2"]).start()
    collector = devices = more = None
    try:
        # c: occupied before the bridge starts; its start-up poll (count 1, answered before the
        # bridge subscribes) joins it.
        devices = PysherDevices(local, ["private-device-c"])
        alone_c = now_ms()
        assert subscriptions(local).get("private-device-c") == 1
        slow = DEVICES.replace('discovery_interval = "5s"', 'discovery_interval = "60s"')
        config = (bridge_config(local, broker, workdir, slow, daemon=f'webhooks = "127.0.0.1:{webhook_port}"')
                  + '\n[bridge.webhooks]\ntopic_prefix = "hooks/e2e"\n')
        bridge = bridges(config)

        def confirmed_at(channel: str) -> int | None:
            """When (Unix ms, the bridge's log clock) the bridge's subscription to `channel` took
            effect; logged after discovery heard of it (BridgeRuntime+PusherToMQTT.swift)."""
            found = re.search(rf"^(\S+) debug .*: subscribed \[.*pusher\.channel={re.escape(channel)}\b", bridge.log(), re.M)
            return int(datetime.fromisoformat(found.group(1)).timestamp() * 1000) if found else None

        def confirmed(channel: str) -> bool:
            return confirmed_at(channel) is not None

        wait_until(lambda: port_open(webhook_port) and confirmed("private-device-c"), 15, 0.05,
                   "the start-up poll to join private-device-c and its subscription to succeed")
        collector = MQTTCollector(broker.port, ["fleet/#"])

        # After the bridge's subscription: the batch made while the device was alone, both orders.
        occupied_c = {"name": "channel_occupied", "channel": "private-device-c"}
        count_c = {"name": "subscription_count", "channel": "private-device-c", "subscription_count": 1}
        assert post_webhook(webhook_port, local, [occupied_c, count_c], alone_c) == 200
        assert post_webhook(webhook_port, local, [count_c, occupied_c], alone_c) == 200

        # Before the bridge's subscription: d and e join from the batch (both orders).
        more = PysherDevices(local, ["private-device-d", "private-device-e"])
        alone_de = now_ms()
        occupied = {c: {"name": "channel_occupied", "channel": c} for c in ("private-device-d", "private-device-e")}
        count = {c: {"name": "subscription_count", "channel": c, "subscription_count": 1}
                 for c in ("private-device-d", "private-device-e")}
        assert post_webhook(webhook_port, local, [occupied["private-device-d"], count["private-device-d"]], alone_de) == 200
        assert post_webhook(webhook_port, local, [count["private-device-e"], occupied["private-device-e"]], alone_de) == 200
        wait_until(lambda: confirmed("private-device-d") and confirmed("private-device-e"), 10, 0.05,
                   "the bridge to join private-device-d and -e from the webhooks")
        # The same counts handled after `subscribed` (as when the subscription succeeds between the
        # two events of one batch): still no leave.
        assert post_webhook(webhook_port, local, [count["private-device-d"]], alone_de) == 200
        assert post_webhook(webhook_port, local, [count["private-device-e"]], alone_de) == 200

        held = ["private-device-c", "private-device-d", "private-device-e"]
        # A leave is logged before the webhook's 200 (the listener waits for discovery): none so far.
        assert "discovered channel left" not in bridge.log()
        assert [subscriptions(local).get(c) for c in held] == [2, 2, 2]
        http = local.http_client()
        for channel in held:
            http.trigger(channel, "reading", channel[-1])
        wait_until(lambda: all(collector.payloads(f"fleet/{c[-1]}/reading") for c in held), 10, 0.1,
                   "a reading from c, d and e at MQTT")

        # A count dated after the subscription (even allowing for Pusher's 250 ms of batching,
        # ChannelDiscovery+Events.swift) still means what it says: told the bridge is alone in c, it
        # leaves at once. (The device stays, so no poll can make the bridge leave c meanwhile.)
        wait_until(lambda: now_ms() - 250 > confirmed_at("private-device-c"), 5, 0.01, "a count time past the batching")
        assert post_webhook(webhook_port, local, [count_c], now_ms()) == 200
        assert re.search(r"discovered channel left \[.*pusher\.channel=private-device-c\b.*reason=alone", bridge.log())
        wait_until(lambda: subscriptions(local).get("private-device-c") == 1, 5, 0.05, "the bridge to leave c")
        assert "private-device-d reason" not in bridge.log() and "private-device-e reason" not in bridge.log()
    finally:
        for closable in (collector, devices, more):
            if closable:
                closable.close()
        local.stop()

"""Webhooks in (docs/contract.md §7.2) with real parts: mosquitto, pusher-local, the daemon's webhook
listener, requests signed the way the official `pusher` library signs and checks them, paho-mqtt
subscribers, and pusher-local's own webhooks triggered by pysher clients joining a presence channel.

`run_webhook_outage` (Tests/testkit/bridge_testkit/webhooks.py) is also the `webhooks-broker-outage` row of the fault matrix
(Tests/faults/webhook_rows.py)."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time

import pytest

from bridge_testkit.prometheus import books_balance
from bridge_testkit.webhooks import (NAME, PREFIX, metric, post, run_webhook_outage, sign, signed_post,
                                     webhook_config)
from bridge_testkit.harness import Bridge, MQTTCollector, PusherLocal, free_port, port_open, retained, wait_until

def start_bridge(bridges, config: str, webhook_port: int, metrics_port: int) -> Bridge:
    bridge = bridges(config)
    wait_until(lambda: (port_open(webhook_port) and port_open(metrics_port)) or not bridge.running(), 20,
               what="the webhook and metrics listeners")
    assert bridge.running(), bridge.log()
    wait_until(lambda: metric(metrics_port, "pusher_mqtt_bridge_connection_up", side="mqtt") == 1, 15, 0.1, "MQTT up")
    return bridge


@pytest.fixture
def setup(workdir, broker, pusher, bridges):
    webhook_port, metrics_port = free_port(), free_port()
    bridge = start_bridge(bridges, webhook_config(pusher, broker, workdir, webhook_port, metrics_port), webhook_port,
                          metrics_port)
    return webhook_port, metrics_port, bridge


def test_signed_requests_are_published_and_bad_ones_refused(setup, broker, pusher):
    webhook_port, metrics_port, bridge = setup
    # Zero series from the start.
    for outcome in ("accepted", "duplicate", "unauthorized", "too_large", "bad_request", "unavailable", "unknown_event"):
        assert metric(metrics_port, "pusher_mqtt_bridge_webhooks_total", bridge=NAME, outcome=outcome) == 0
    collector = MQTTCollector(broker.port, [f"{PREFIX}/#"])
    try:
        status, _ = signed_post(webhook_port, pusher, [
            {"name": "channel_occupied", "channel": "presence-room/1"},
            {"name": "member_added", "channel": "presence-room/1", "user_id": "alice"},
            {"name": "client_event", "channel": "private-chat", "event": "client-typing", "data": '{"who":"bob"}',
             "user_id": "bob", "socket_id": "1.1"},
            {"name": "cache_miss", "channel": "cache-prices"},
            {"name": "subscription_count", "channel": "lobby", "subscription_count": 4},
            {"name": "channel_renamed", "channel": "lobby"},
        ])
        assert status == 200
        base = f"{PREFIX}/channels"
        expected = {
            f"{base}/presence-room%2F1/occupied": b"true",
            f"{base}/presence-room%2F1/members/alice": b"{}",
            f"{base}/presence-room%2F1/count": b"1",
            f"{base}/private-chat/client-events/client-typing": b'{"who":"bob"}',
            f"{base}/cache-prices/cache-miss": b"{}",
            f"{base}/lobby/subscription_count": b"4",
        }
        wait_until(lambda: len(collector.snapshot()) >= len(expected), 10, what="the webhook publishes")
        got = {m.topic: m.payload for m in collector.snapshot()}
        assert got == expected
        client_event = next(m for m in collector.snapshot() if "client-events" in m.topic)
        assert ("pusher-user-id", "bob") in (client_event.properties.UserProperty or [])
        assert not client_event.retain
        held = retained(broker.port, f"{PREFIX}/#")
        assert set(held) == {f"{base}/presence-room%2F1/occupied", f"{base}/presence-room%2F1/members/alice",
                             f"{base}/presence-room%2F1/count", f"{base}/lobby/subscription_count"}

        before = len(collector.snapshot())
        good = json.dumps({"time_ms": int(time.time() * 1000), "events": [{"name": "cache_miss", "channel": "x"}]}).encode()
        assert post(webhook_port, good, key=pusher.key, signature=sign("wrong-secret", good))[0] == 401
        assert post(webhook_port, good, key="other-key", signature=sign(pusher.secret, good))[0] == 401
        assert post(webhook_port, good, key=pusher.key, signature=None)[0] == 401
        huge = b"{" + b" " * (1024 * 1024) + b"}"
        assert post(webhook_port, huge, key=pusher.key, signature=sign(pusher.secret, huge))[0] == 413
        not_json = b"this is not json"
        assert post(webhook_port, not_json, key=pusher.key, signature=sign(pusher.secret, not_json))[0] == 400
        assert post(webhook_port, good, key=pusher.key, signature=sign(pusher.secret, good), bridge="nope")[0] == 404
        assert post(webhook_port, b"", key=None, signature=None, method="GET")[0] == 405
        # The same body twice (Pusher's retry): published once.
        assert post(webhook_port, good, key=pusher.key, signature=sign(pusher.secret, good))[0] == 200
        assert post(webhook_port, good, key=pusher.key, signature=sign(pusher.secret, good))[0] == 200
        time.sleep(1.0)
        assert [m.topic for m in collector.snapshot()[before:]] == [f"{base}/x/cache-miss"]

        counts = {outcome: metric(metrics_port, "pusher_mqtt_bridge_webhooks_total", bridge=NAME, outcome=outcome)
                  for outcome in ("accepted", "duplicate", "unauthorized", "too_large", "bad_request", "unknown_event")}
        assert counts == {"accepted": 2, "duplicate": 1, "unauthorized": 3, "too_large": 1, "bad_request": 1,
                          "unknown_event": 1}
        assert metric(metrics_port, "pusher_mqtt_bridge_messages_total", bridge=NAME, rule="webhooks",
                      outcome="delivered") == 7
        wait_until(lambda: (lambda r, o, b: r == o + b)(*books_balance(metrics_port)), 5, 0.2, "the counters to balance")
        assert "webhook refused" in bridge.log()
    finally:
        collector.close()


def test_member_flapping_keeps_the_count_right(setup, broker, pusher):
    webhook_port, metrics_port, _ = setup
    channel = "presence-flap"
    sequence = [("member_added", "a"), ("member_added", "b"), ("member_removed", "a"), ("member_added", "a"),
                ("member_removed", "b"), ("member_added", "b"), ("member_removed", "a"), ("member_removed", "b"),
                ("member_added", "c")]
    collector = MQTTCollector(broker.port, [f"{PREFIX}/channels/{channel}/count"])
    try:
        for index, (name, user) in enumerate(sequence):
            status, _ = signed_post(webhook_port, pusher, [{"name": name, "channel": channel, "user_id": user}], seq=index)
            assert status == 200
        wait_until(lambda: len(collector.payloads()) >= len(sequence), 10, what="every count")
        assert collector.payloads() == [b"1", b"2", b"1", b"2", b"1", b"2", b"1", b"0", b"1"]
    finally:
        collector.close()
    held = retained(broker.port, f"{PREFIX}/channels/{channel}/#")
    assert held == {f"{PREFIX}/channels/{channel}/count": b"1", f"{PREFIX}/channels/{channel}/members/c": b"{}"}


def test_outage_with_persist_accepts_and_delivers_everything_once(workdir):
    out = run_webhook_outage(workdir / "persist", requests=60, persist=True)
    assert out["failures"] == []
    assert out["statuses"]["outage"] == {200: 80}  # 60 requests + 20 retries, the retries duplicates
    assert [seq for seq, _ in out["received"]["webhooks"]] == list(range(60))
    assert out["webhooks_total"] == {"accepted": 60, "duplicate": 20, "unavailable": 0}


def test_outage_without_persist_is_503_then_the_retry_is_published(workdir):
    out = run_webhook_outage(workdir / "memory", requests=30, persist=False)
    assert out["failures"] == []
    assert out["statuses"]["outage"] == {503: 40}
    assert out["statuses"]["retry"] == {200: 30}
    assert [seq for seq, _ in out["received"]["webhooks"]] == list(range(30))
    assert out["webhooks_total"] == {"accepted": 30, "duplicate": 0, "unavailable": 40}


def test_pusher_locals_own_webhooks_reach_mqtt(workdir, broker, bridges):
    """pusher-local posts its own webhooks (batched, signed) as pysher clients come and go: presence
    members and count, occupancy, subscription counts and a client event arrive on MQTT."""
    import pysher

    webhook_port, metrics_port = free_port(), free_port()
    local = PusherLocal(workdir, extra=["--activity-timeout", "2", "--subscription-count", "--webhook",
                                       f"http://127.0.0.1:{webhook_port}/webhooks/{NAME}"]).start()
    clients = []
    try:
        start_bridge(bridges, webhook_config(local, broker, workdir, webhook_port, metrics_port), webhook_port, metrics_port)
        channel = "presence-lobby"
        base = f"{PREFIX}/channels/{channel}"
        collector = MQTTCollector(broker.port, [f"{base}/client-events/#"])
        try:
            lobbies = []
            for user in ("alice", "bob"):
                client = pysher.Pusher(local.key, custom_host="127.0.0.1", port=local.port, secure=False, secret=local.secret,
                                       user_data={"user_id": user}, log_level=logging.WARNING)
                connected = threading.Event()
                client.connection.bind("pusher:connection_established", lambda _data, c=connected: c.set())
                client.connect()
                assert connected.wait(10)
                lobbies.append(client.subscribe(channel))
                client.subscribe("private-ops")
                clients.append(client)
            wait_until(lambda: retained(broker.port, f"{base}/#", settle=0.3).get(f"{base}/count") == b"2", 15, 0.2,
                       "count 2 from pusher-local's member_added webhooks")
            held = retained(broker.port, f"{base}/#")
            assert held == {f"{base}/occupied": b"true", f"{base}/members/alice": b"{}", f"{base}/members/bob": b"{}",
                            f"{base}/count": b"2"}
            ops = f"{PREFIX}/channels/private-ops/subscription_count"
            wait_until(lambda: retained(broker.port, ops, settle=0.3).get(ops) == b"2", 15, 0.2, "subscription_count 2")
            lobbies[0].trigger("client-hello", {"from": "alice"})
            wait_until(lambda: collector.snapshot(), 15, 0.1, "the client_event webhook")
            event = collector.snapshot()[0]
            assert event.topic == f"{base}/client-events/client-hello"
            assert json.loads(event.payload) == {"from": "alice"}
            assert ("pusher-user-id", "alice") in (event.properties.UserProperty or [])
            clients.pop().disconnect(timeout=2)
            wait_until(lambda: retained(broker.port, f"{base}/#", settle=0.3).get(f"{base}/count") == b"1", 15, 0.2,
                       "count 1 after bob left")
            clients.pop().disconnect(timeout=2)
            wait_until(lambda: f"{base}/occupied" not in retained(broker.port, f"{base}/#", settle=0.3), 15, 0.2,
                       "channel_vacated deletes occupied")
            assert retained(broker.port, f"{base}/#") == {f"{base}/count": b"0"}
            assert metric(metrics_port, "pusher_mqtt_bridge_webhooks_total", bridge=NAME, outcome="unauthorized") == 0
            assert metric(metrics_port, "pusher_mqtt_bridge_webhooks_total", bridge=NAME, outcome="accepted") >= 1
        finally:
            collector.close()
    finally:
        for client in clients:
            client.disconnect(timeout=2)
        local.stop()


def test_reload_swaps_bridge_webhooks_in_place(workdir, broker, pusher, bridges):
    webhook_port, metrics_port = free_port(), free_port()
    config = webhook_config(pusher, broker, workdir, webhook_port, metrics_port)
    bridge = start_bridge(bridges, config, webhook_port, metrics_port)
    assert signed_post(webhook_port, pusher, [{"name": "member_added", "channel": "presence-r", "user_id": "a"}])[0] == 200
    reconnects = metric(metrics_port, "pusher_mqtt_bridge_reconnects_total", bridge=NAME)
    bridge.write_config(config.replace(f'topic_prefix = "{PREFIX}"', 'topic_prefix = "hooks/moved"\nqos = 0'))
    bridge.send_signal(signal.SIGHUP)
    wait_until(lambda: "reloaded" in bridge.log(), 10, 0.1, "the reload")
    assert "bridge rules changed; connections kept" in bridge.log()
    collector = MQTTCollector(broker.port, ["hooks/moved/#"])
    try:
        # The members known before the reload are kept: b makes the count 2.
        assert signed_post(webhook_port, pusher, [{"name": "member_added", "channel": "presence-r", "user_id": "b"}])[0] == 200
        wait_until(lambda: len(collector.snapshot()) >= 2, 10, what="the publishes under the new prefix")
        got = {m.topic: (m.payload, m.qos) for m in collector.snapshot()}
        assert got == {"hooks/moved/channels/presence-r/members/b": (b"{}", 0), "hooks/moved/channels/presence-r/count": (b"2", 0)}
    finally:
        collector.close()
    assert metric(metrics_port, "pusher_mqtt_bridge_reconnects_total", bridge=NAME) == reconnects
    # Removing [bridge.webhooks] turns this bridge's endpoint off: 404.
    bridge.write_config(config[:config.index("[bridge.webhooks]")])
    bridge.send_signal(signal.SIGHUP)
    wait_until(lambda: bridge.log().count("reloaded") >= 2, 10, 0.1, "the second reload")
    assert signed_post(webhook_port, pusher, [{"name": "cache_miss", "channel": "c"}])[0] == 404


def test_concurrent_requests_keep_the_count_in_order(setup, broker, pusher):
    """Requests handled at once must reach the outbox in the order their counts were computed: the
    retained count ends at the number of members, never at an older value."""
    webhook_port, _, _ = setup
    channel = "presence-crowd"
    users = [f"u{n}" for n in range(40)]
    statuses: list[int] = []

    def join(user: str):
        statuses.append(signed_post(webhook_port, pusher, [{"name": "member_added", "channel": channel, "user_id": user}])[0])

    threads = [threading.Thread(target=join, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert statuses == [200] * len(users)
    base = f"{PREFIX}/channels/{channel}"
    wait_until(lambda: len(retained(broker.port, f"{base}/#", settle=0.3)) == len(users) + 1, 10, 0.2, "every member")
    assert retained(broker.port, f"{base}/count") == {f"{base}/count": str(len(users)).encode()}


def test_an_accepted_request_survives_a_sigkill_in_the_spool(workdir, broker, pusher, bridges):
    """200 with persist = true means spooled: accepted while the broker is down, the daemon killed,
    both back -- the events arrive (Pusher would not send them again after a 200)."""
    webhook_port, metrics_port = free_port(), free_port()
    config = webhook_config(pusher, broker, workdir, webhook_port, metrics_port)
    bridge = start_bridge(bridges, config, webhook_port, metrics_port)
    broker.stop(signal.SIGTERM)
    wait_until(lambda: metric(metrics_port, "pusher_mqtt_bridge_connection_up", side="mqtt") == 0, 10, 0.1, "MQTT down")
    for seq in range(10):
        status, _ = signed_post(webhook_port, pusher, [{"name": "client_event", "channel": "private-k", "event": "client-n",
                                                        "data": str(seq)}])
        assert status == 200
    bridge.kill()
    broker.start()
    collector = MQTTCollector(broker.port, [f"{PREFIX}/channels/private-k/client-events/#"])
    try:
        start_bridge(bridges, config, webhook_port, metrics_port)
        wait_until(lambda: len(collector.payloads()) >= 10, 15, 0.1, "the spooled webhook publishes")
        assert collector.payloads() == [str(seq).encode() for seq in range(10)]
    finally:
        collector.close()

"""Operating the daemon: presence mirror with ghost cleanup, private channels, SIGHUP reload,
sd_notify, /metrics, the tap and trigger commands, exit codes."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
import urllib.request

import pysher

from bridge_testkit.clients import NotifySocket, PysherListener, wait_bridge_subscribed
from bridge_testkit.harness import MQTTCollector, binary, bridge_config, free_port, publish, retained, rule, wait_until
from test_flow import PUSHER_TO_MQTT
from test_reload_check import EXTRA_RULE

PRESENCE = """
[[bridge.presence]]
channel = "presence-operators"
topic = "dash/operators"
qos = 1
"""


class PresenceMember:
    """A pysher client that joins a presence channel as `user_id`, signing with the app secret."""

    def __init__(self, pusher_local, user_id: str, info: dict):
        self.joined = threading.Event()
        self.client = pysher.Pusher(pusher_local.key, custom_host="127.0.0.1", port=pusher_local.port, secure=False,
                                    secret=pusher_local.secret, user_data={"user_id": user_id, "user_info": info})

        def on_connect(_):
            ch = self.client.subscribe("presence-operators")
            ch.bind("pusher_internal:subscription_succeeded", lambda _d: self.joined.set())

        self.client.connection.bind("pusher:connection_established", on_connect)
        self.client.connect()
        assert self.joined.wait(10), f"{user_id} could not join"

    def leave(self):
        self.client.disconnect(timeout=2)  # pysher joins its thread; without a timeout it can wait ~100 s


def members(port) -> dict[str, bytes]:
    return {t: p for t, p in retained(port, "dash/operators/#", 0.4).items() if p}


def test_presence_members_become_retained_and_ghosts_are_cleared(pusher, broker, workdir, bridges):
    config = bridge_config(pusher, broker, workdir, PRESENCE, extra_pusher='user_id = "bridge-e2e"')
    alice = PresenceMember(pusher, "alice", {"name": "Alice"})
    bridge = bridges(config, name="presence1")
    wait_until(lambda: members(broker.port).get("dash/operators/members/alice") == b'{"name":"Alice"}', 10, 0.2, "alice retained")
    bob = PresenceMember(pusher, "bob/1", {})
    # user ids are escaped into one topic level (docs/contract.md §5.1); the bridge itself is not listed.
    wait_until(lambda: "dash/operators/members/bob%2F1" in members(broker.port), 10, 0.2, "bob retained")
    state = members(broker.port)
    assert state["dash/operators/count"] == b"2"
    assert not any("bridge-e2e" in t for t in state)
    bob.leave()
    wait_until(lambda: "dash/operators/members/bob%2F1" not in members(broker.port), 10, 0.2, "bob removed")
    assert members(broker.port)["dash/operators/count"] == b"1"

    # Ghost: alice leaves while the bridge is down; the restarted bridge clears her.
    assert bridge.stop() == 0
    alice.leave()
    time.sleep(0.5)
    carol = PresenceMember(pusher, "carol", {"role": "ops"})
    bridges(config, name="presence2")
    wait_until(lambda: "dash/operators/members/carol" in members(broker.port)
               and "dash/operators/members/alice" not in members(broker.port), 10, 0.2, "ghost alice cleared, carol listed")
    assert members(broker.port)["dash/operators/count"] == b"1"
    carol.leave()


def test_private_channel_with_inline_signing(pusher, broker, workdir, bridges):
    rules = rule("orders", "pusher", channel="private-orders", topic="shop/orders", qos=1)
    bridges(bridge_config(pusher, broker, workdir, rules))
    collector = MQTTCollector(broker.port, ["shop/#"])
    wait_bridge_subscribed(pusher, "private-orders")
    pusher.http_client().trigger("private-orders", "created", '{"id":7}')
    wait_until(lambda: collector.payloads("shop/orders") == [b'{"id":7}'], 10, 0.1, "private event at MQTT")
    collector.close()


def metric(port: int, name_and_labels: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name_and_labels + " "):
                return float(line.split()[-1])
    return 0.0


def test_sd_notify_reload_metrics_and_sigterm(pusher, broker, workdir, bridges):
    notify = NotifySocket(str(workdir / "notify.sock"))
    metrics_port = free_port()
    config = bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT).replace('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"')
    bridge = bridges(config, env={"NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "2000000"})
    collector = MQTTCollector(broker.port, ["dash/#", "sensors-out/#"])
    wait_until(lambda: notify.seen("READY=1"), 10, 0.05, "READY=1")
    wait_until(lambda: notify.seen("WATCHDOG=1"), 5, 0.05, "WATCHDOG=1 (every WATCHDOG_USEC/2)")
    wait_until(lambda: any("pusher connected, mqtt connected" in m for m in notify.seen("STATUS=")), 10, 0.1, "STATUS with both connected")
    wait_bridge_subscribed(pusher, "market-data")

    http = pusher.http_client()
    for i in range(20):
        http.trigger("market-data", "new-price", f"m{i}")
    wait_until(lambda: len(collector.payloads("dash/prices/new-price")) >= 20, 10, 0.1, "20 messages")
    delivered = 'pusher_mqtt_bridge_messages_total{bridge="e2e",rule="prices",direction="pusher_to_mqtt",outcome="delivered"}'
    wait_until(lambda: metric(metrics_port, delivered) >= 20, 5, 0.2, "/metrics to count 20 deliveries")
    assert metric(metrics_port, 'pusher_mqtt_bridge_connection_up{bridge="e2e",side="pusher"}') == 1

    # SIGHUP adds a rule; neither connection is dropped.
    opened = json.loads(pusher.control("GET", f"/pusher-local/apps/{pusher.app_id}/stats")[1])["connections_opened"]
    mqtt_connects = bridge.log().count("mqtt connected")
    bridge.write_config(config + EXTRA_RULE)
    bridge.send_signal(signal.SIGHUP)
    wait_until(lambda: notify.seen("RELOADING=1"), 5, 0.05, "RELOADING=1")
    wait_until(lambda: len(notify.seen("READY=1")) >= 2, 5, 0.05, "READY=1 after the reload")
    wait_bridge_subscribed(pusher, "alerts")
    http.trigger("alerts", "fire", "hot")
    wait_until(lambda: collector.payloads("dash/alerts/fire") == [b"hot"], 10, 0.1, "the new rule to work")
    assert json.loads(pusher.control("GET", f"/pusher-local/apps/{pusher.app_id}/stats")[1])["connections_opened"] == opened
    assert bridge.log().count("mqtt connected") == mqtt_connects

    # An invalid config on SIGHUP keeps the old one running.
    bridge.write_config(config.replace('qos = 1', 'qos = 7', 1))
    bridge.send_signal(signal.SIGHUP)
    wait_until(lambda: "reload refused" in bridge.log(), 5, 0.1, "the reload to be refused")
    http.trigger("alerts", "fire", "still")
    wait_until(lambda: b"still" in collector.payloads("dash/alerts/fire"), 10, 0.1, "the old config to keep working")

    assert bridge.stop(signal.SIGTERM) == 0
    assert notify.seen("STOPPING=1")
    collector.close()


def test_tap_and_trigger_commands(pusher, broker, workdir, bridges):
    config_path = workdir / "cli.conf"
    config_path.write_text(bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT))
    bridge_bin = binary("BRIDGE_BIN", "pusher-mqtt-bridge")
    tap = subprocess.Popen([bridge_bin, "tap", "--config", str(config_path), "--channel", "market-data"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        wait_bridge_subscribed(pusher, "market-data")
        result = subprocess.run([bridge_bin, "trigger", "--config", str(config_path), "--channel", "market-data",
                                 "--event", "new-price", "--data", '{"p":"ü"}'], capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        line = json.loads(tap.stdout.readline())
        assert line == {"channel": "market-data", "event": "new-price", "data": '{"p":"ü"}'}
    finally:
        tap.send_signal(signal.SIGINT)
        assert tap.wait(10) == 0


def test_invalid_config_exits_78(workdir):
    bad = workdir / "bad.conf"
    bad.write_text('[daemon]\nlog_levle = "info"\n')
    bridge_bin = binary("BRIDGE_BIN", "pusher-mqtt-bridge")
    for command in ("run", "check"):
        result = subprocess.run([bridge_bin, command, "--config", str(bad)], capture_output=True, text=True, timeout=30)
        assert result.returncode == 78
        assert "did you mean" in result.stderr


def test_encrypted_channel_both_ways_through_tap(pusher, broker, workdir, bridges):
    """MQTT -> private-encrypted channel: the bridge encrypts (key derived from the master key);
    `tap` with the same config decrypts. The server only ever sees ciphertext."""
    master = "OHRXNUZRTG5pUTFzQlFGd3J3N3Q2VFZFc0paZDEweVk="  # the official test vector's 32-byte key
    rules = rule("secret-in", "mqtt", topic="vault/+", channel="private-encrypted-vault", event="{1}", qos=1)
    config = bridge_config(pusher, broker, workdir, rules, extra_pusher=f'encryption_master_key_base64 = "{master}"')
    bridges(config)
    config_path = workdir / "tap.conf"
    config_path.write_text(config.replace('name = "e2e"', 'name = "tap"'))
    tap = subprocess.Popen([binary("BRIDGE_BIN", "pusher-mqtt-bridge"), "tap", "--config", str(config_path),
                            "--channel", "private-encrypted-vault"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: json.loads(pusher.control("GET", f"/pusher-local/apps/{pusher.app_id}/stats")[1])["subscriptions"]
                   .get("private-encrypted-vault", 0) >= 1, 15, 0.2, "tap subscribed")
        raw = PysherListener(pusher, "private-encrypted-vault", ["opened"])  # no key: sees the wire
        time.sleep(1.0)
        publish(broker.port, "vault/opened", '{"door":"north"}')
        line = json.loads(tap.stdout.readline())
        assert line == {"channel": "private-encrypted-vault", "event": "opened", "data": '{"door":"north"}'}
        wire = wait_until(lambda: raw.data(), 10, 0.1, "the ciphertext at pysher")[0]
        assert set(json.loads(wire)) == {"nonce", "ciphertext"} and "north" not in wire
        raw.close()
    finally:
        tap.send_signal(signal.SIGINT)
        tap.wait(10)

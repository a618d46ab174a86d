"""Payload rules end to end (docs/contract.md §7.3), with the recipes of docs/guide/recipes.md as
the rules so that they never rot: real mosquitto, real pusher-local, the daemon, paho-mqtt publishing, pysher
and the official `pusher` library on the Pusher side, /metrics for the outcomes."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path

import paho.mqtt.client as mqtt

from bridge_testkit.clients import PysherListener, wait_bridge_subscribed
from bridge_testkit.harness import MQTTCollector, bridge_config, free_port, publish, wait_until

RECIPES = Path(__file__).resolve().parents[2] / "docs/guide/recipes.md"


def recipe(name: str) -> str:
    """The TOML block that follows `<!-- recipe: NAME -->` in docs/guide/recipes.md."""
    text = RECIPES.read_text()
    match = re.search(r"<!-- recipe: " + re.escape(name) + r" -->\s*```toml\n(.*?)```", text, re.S)
    assert match, f"docs/guide/recipes.md has no recipe {name}"
    return match.group(1)


def metrics(port: int) -> list[tuple[str, dict[str, str], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    samples = []
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+)(?:\{(.*)\})? (\S+)$", line)
        if m:
            labels = dict(re.findall(r'([a-z_]+)="([^"]*)"', m.group(2) or ""))
            samples.append((m.group(1), labels, float(m.group(3))))
    return samples


def outcome(port: int, rule: str, outcome: str) -> float:
    return sum(v for name, labels, v in metrics(port)
               if name == "pusher_mqtt_bridge_messages_total" and labels.get("rule") == rule
               and labels.get("outcome") == outcome)


def books_balance(port: int) -> bool:
    """received_total = the outcomes of messages_total + buffered_messages, per direction (§7.6)."""
    samples = metrics(port)
    for direction in ["pusher_to_mqtt", "mqtt_to_pusher"]:
        received = sum(v for n, lb, v in samples if n == "pusher_mqtt_bridge_received_total" and lb.get("direction") == direction)
        outcomes = sum(v for n, lb, v in samples if n == "pusher_mqtt_bridge_messages_total" and lb.get("direction") == direction)
        buffered = sum(v for n, lb, v in samples if n == "pusher_mqtt_bridge_buffered_messages" and lb.get("direction") == direction)
        if received != outcomes + buffered:
            print(f"{direction}: received {received} != outcomes {outcomes} + buffered {buffered}")
            return False
    return True


def start(pusher, broker, workdir, bridges, rules: str) -> int:
    port = free_port()
    config = bridge_config(pusher, broker, workdir, rules).replace('metrics = ""', f'metrics = "127.0.0.1:{port}"')
    bridges(config)
    return port


def test_recipes_pass_check(pusher, broker, workdir, bridges):
    """Every recipe in docs/guide/recipes.md is a valid config (`check` exits 0 and lists its conditions)."""
    from bridge_testkit.harness import Bridge
    for name in ["zigbee2mqtt", "home-assistant", "report-by-exception"]:
        b = Bridge(workdir, bridge_config(pusher, broker, workdir, recipe(name)), name=f"check-{name}")
        result = b.cli("check", "--config", str(b.config_path))
        assert result.returncode == 0, f"{name}: {result.stdout}{result.stderr}"


def test_zigbee2mqtt_recipe_throttles_a_50hz_burst_to_the_latest_per_second(pusher, broker, workdir, bridges):
    port = start(pusher, broker, workdir, bridges, recipe("zigbee2mqtt"))
    kitchen = PysherListener(pusher, "private-device-kitchen", ["state"])
    alerts = PysherListener(pusher, "private-alerts", ["low-battery"])
    probe = PysherListener(pusher, "private-device-probe", ["state"])
    wait_until(lambda: probe.data() or publish(broker.port, "zigbee2mqtt/probe", '{"temperature":1}'),
               20, 0.5, "the bridge to forward zigbee2mqtt/probe")
    time.sleep(1.5)  # a probe still held by the 1 s throttle goes out before the counters are read
    rule = "zigbee-devices"
    before = {o: outcome(port, rule, o) for o in ["delivered", "coalesced", "filtered"]}

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="e2e-zigbee")
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    sent = []
    start_time = time.monotonic()
    for i in range(150):  # 50 Hz for 3 s
        payload = json.dumps({"temperature": 20 + i / 100, "humidity": 40, "battery": 87, "seq": i})
        sent.append(payload)
        client.publish("zigbee2mqtt/kitchen", payload, qos=1).wait_for_publish(5)
        time.sleep(max(0.0, start_time + (i + 1) / 50 - time.monotonic()))
    client.publish("zigbee2mqtt/bridge", '{"state":"online"}', qos=1).wait_for_publish(5)  # no /temperature
    client.publish("zigbee2mqtt/hall", '{"temperature":19,"battery":15}', qos=1).wait_for_publish(5)
    client.publish("zigbee2mqtt/attic", '{"temperature":19,"battery":0}', qos=1).wait_for_publish(5)
    client.loop_stop()
    client.disconnect()

    wait_until(lambda: kitchen.data() and json.loads(kitchen.data()[-1])["seq"] == 149, 5, 0.1,
               "the last reading of the burst, released at the end of its interval")
    seqs = [json.loads(d)["seq"] for d in kitchen.data()]
    assert seqs == sorted(set(seqs)), seqs  # in order, no duplicates
    assert 3 <= len(seqs) <= 5, seqs  # ~3 s at one per second (+ the trailing one)
    wait_until(lambda: alerts.data() == ["15"], 5, 0.1, "one low-battery alert with the projected value")

    wait_until(lambda: outcome(port, rule, "delivered") - before["delivered"] >= len(seqs) + 2, 5, 0.2,
               "deliveries counted")
    delivered = outcome(port, rule, "delivered") - before["delivered"]
    coalesced = outcome(port, rule, "coalesced") - before["coalesced"]
    filtered = outcome(port, rule, "filtered") - before["filtered"]
    # 150 kitchen + hall + attic came in for the rule; the bridge message has no /temperature.
    assert delivered + coalesced == 152, (delivered, coalesced)
    assert delivered == len(seqs) + 2
    assert filtered == 1
    # The low-battery rule: hall (15) forwarded; attic (0) and every kitchen reading filtered.
    assert outcome(port, "zigbee-low-battery", "delivered") == 1
    throttle_targets = [v for name, labels, v in metrics(port)
                        if name == "pusher_mqtt_bridge_throttle_targets" and labels.get("rule") == rule]
    wait_until(lambda: any(v >= 1 for name, labels, v in metrics(port)
                           if name == "pusher_mqtt_bridge_throttle_targets" and labels.get("rule") == rule),
               5, 0.2, f"the throttle_targets gauge (was {throttle_targets})")
    wait_until(lambda: books_balance(port), 5, 0.3, "received = outcomes + buffered")
    for listener in (kitchen, alerts, probe):
        listener.close()


def test_home_assistant_recipe_routes_by_payload_values(pusher, broker, workdir, bridges):
    port = start(pusher, broker, workdir, bridges, recipe("home-assistant"))
    collector = MQTTCollector(broker.port, ["homeassistant/#", "pusher-mqtt-bridge/e2e/dead-letter"])
    wait_bridge_subscribed(pusher, "orders")
    http = pusher.http_client()
    http.trigger("orders", "order-placed", json.dumps({"store": {"id": "berlin"}, "total": 42.5}))
    http.trigger("orders", "order-placed", json.dumps({"store": {"id": "paris"}, "total": 0}))  # filtered
    http.trigger("orders", "order-placed", json.dumps({"total": 3}))  # no /store/id: dead letter
    http.trigger("orders", "order-placed", json.dumps({"store": {"id": "Lyon 2/3"}, "total": 7.25}))
    wait_until(lambda: len(collector.payloads("homeassistant/sensor/store_Lyon 2%2F3/state")) == 1, 10, 0.1,
               "the escaped store id topic")
    assert collector.payloads("homeassistant/sensor/store_berlin/state") == [b"42.5"]
    assert collector.payloads("homeassistant/sensor/store_Lyon 2%2F3/state") == [b"7.25"]
    assert not [m.topic for m in collector.snapshot() if "paris" in m.topic]
    wait_until(lambda: collector.payloads("pusher-mqtt-bridge/e2e/dead-letter"), 10, 0.1, "the dead letter")
    letter = json.loads(collector.payloads("pusher-mqtt-bridge/e2e/dead-letter")[0])
    assert letter["code"] == "template_value_missing"
    assert letter["rule"] == "store-last-order"
    assert outcome(port, "store-last-order", "filtered") == 1
    assert outcome(port, "store-last-order", "dead_lettered") == 1
    wait_until(lambda: books_balance(port), 5, 0.3, "received = outcomes + buffered")
    collector.close()


def test_report_by_exception_recipe_drops_repeats(pusher, broker, workdir, bridges):
    port = start(pusher, broker, workdir, bridges, recipe("report-by-exception"))
    listener = PysherListener(pusher, "plant-status", ["line1", "probe"])
    wait_until(lambda: publish(broker.port, "plant/probe/status", str(time.monotonic())) or listener.received,
               20, 0.3, "the bridge to forward plant/+/status")
    for status in ["ok", "ok", "ok", "fault", "fault", "ok", "ok"]:
        publish(broker.port, "plant/line1/status", status)
    wait_until(lambda: len([e for e, _ in listener.received if e == "line1"]) >= 3, 10, 0.1, "three changes")
    time.sleep(0.5)
    assert [d for e, d in listener.received if e == "line1"] == ["ok", "fault", "ok"]
    assert outcome(port, "plant-status", "unchanged") == 4
    wait_until(lambda: books_balance(port), 5, 0.3, "received = outcomes + buffered")
    listener.close()

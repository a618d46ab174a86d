"""Messages flow both ways through the daemon, byte for byte and in order, between third-party clients:
the official `pusher` library triggers, `paho-mqtt` subscribes and publishes, `pysher` subscribes."""

from __future__ import annotations

import json
import signal
import time

from bridge_testkit.clients import PysherListener, wait_bridge_subscribed
from bridge_testkit.harness import MQTTCollector, bridge_config, publish, retained, rule, wait_until


PUSHER_TO_MQTT = rule("prices", "pusher", channel="market-data", events=["new-price"], topic="dash/prices/{event}", qos=1,
                      payload="data")
MQTT_TO_PUSHER = rule("temperatures", "mqtt", topic="sensors/+/temperature", channel="sensor-{1}", event="temperature",
                      qos=1, payload="data")


def test_pusher_to_mqtt_1000_in_order_byte_exact(pusher, broker, workdir, bridges):
    bridges(bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT))
    collector = MQTTCollector(broker.port, ["dash/prices/#"])
    wait_bridge_subscribed(pusher, "market-data")
    http = pusher.http_client()
    sent = [json.dumps({"seq": i, "name": "Zürich ☃ 株価", "price": i * 1.5}, ensure_ascii=False) for i in range(1000)]
    for i in range(0, 1000, 10):
        http.trigger_batch([{"channel": "market-data", "name": "new-price", "data": d} for d in sent[i:i + 10]])
    wait_until(lambda: len(collector.payloads("dash/prices/new-price")) >= 1000, 30, what="1000 messages at MQTT")
    got = collector.payloads("dash/prices/new-price")
    assert [g.decode("utf-8") for g in got] == sent  # byte-exact, in order, no duplicates
    collector.close()


def test_mqtt_to_pusher_1000_in_order_byte_exact(pusher, broker, workdir, bridges):
    bridges(bridge_config(pusher, broker, workdir, MQTT_TO_PUSHER))
    listener = PysherListener(pusher, "sensor-kitchen", ["temperature"])
    # Wait until the bridge's MQTT subscription is live: probe until one crosses.
    wait_until(lambda: publish(broker.port, "sensors/kitchen/temperature", "probe") or "probe" in listener.data(),
               20, 0.3, "the bridge to forward MQTT -> Pusher")
    time.sleep(0.5)
    base = len(listener.data())
    sent = [json.dumps({"seq": i, "t": 20 + i / 100, "room": "Küche ☀"}, ensure_ascii=False) for i in range(1000)]
    import paho.mqtt.client as mqtt
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="e2e-publisher")
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    infos = [client.publish("sensors/kitchen/temperature", s.encode(), qos=1) for s in sent]
    for info in infos:
        info.wait_for_publish(10)
    client.loop_stop()
    client.disconnect()
    wait_until(lambda: len(listener.data()) - base >= 1000, 30, what="1000 events at pysher")
    got = [d for d in listener.data()[base:] if d != "probe"]
    assert got == sent
    listener.close()


def test_status_topic_online_then_offline_on_sigterm(pusher, broker, workdir, bridges):
    bridge = bridges(bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT))
    wait_until(lambda: retained(broker.port, "pusher-mqtt-bridge/e2e/status", 0.3).get("pusher-mqtt-bridge/e2e/status") == b"online",
               15, 0.2, "retained online")
    assert bridge.stop(signal.SIGTERM) == 0
    assert retained(broker.port, "pusher-mqtt-bridge/e2e/status")["pusher-mqtt-bridge/e2e/status"] == b"offline"


def test_last_will_offline_on_sigkill(pusher, broker, workdir, bridges):
    bridge = bridges(bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT))
    wait_until(lambda: retained(broker.port, "pusher-mqtt-bridge/e2e/status", 0.3).get("pusher-mqtt-bridge/e2e/status") == b"online",
               15, 0.2, "retained online")
    bridge.kill()
    # The broker publishes the will after the keepalive grace (1.5 × 5 s) at the latest.
    wait_until(lambda: retained(broker.port, "pusher-mqtt-bridge/e2e/status", 0.3).get("pusher-mqtt-bridge/e2e/status") == b"offline",
               15, 0.5, "Last Will offline")


def test_mqtt_to_pusher_as_client_events(pusher, broker, workdir, bridges):
    rules = rule("chat", "mqtt", topic="chat/+", channel="private-chat", event="client-{1}", via="client-event", qos=1)
    bridges(bridge_config(pusher, broker, workdir, rules))
    listener = PysherListener(pusher, "private-chat", ["client-hello"])
    # The bridge's own connection must be subscribed before it may send client events.
    wait_until(lambda: json_subs(pusher, "private-chat") >= 2, 15, 0.2, "the bridge and pysher both subscribed")
    for i in range(5):  # Pusher allows 10 client events per second per connection
        publish(broker.port, "chat/hello", f"hi {i}")
    wait_until(lambda: len(listener.data()) >= 5, 15, 0.1, "5 client events at pysher")
    assert listener.data() == [f"hi {i}" for i in range(5)]
    listener.close()


def json_subs(pusher_local, channel: str) -> int:
    status, body = pusher_local.control("GET", f"/pusher-local/apps/{pusher_local.app_id}/stats")
    return json.loads(body)["subscriptions"].get(channel, 0) if status == 200 else 0

"""The paced drain (docs/contract.md §8.3, `drain_rate`): after an outage the backlog leaves at
most at the configured rate, in order, nothing lost, and live traffic after it is not held. Real
mosquitto, pusher-local (its `quota` switch for the Pusher outage), the daemon; the rate is read
from the daemon's own delivered counter, sampled every 50 ms."""

from __future__ import annotations

import re
import signal
import time
import urllib.request

import paho.mqtt.client as mqtt

from bridge_testkit.clients import PysherListener, wait_bridge_subscribed
from bridge_testkit.harness import MQTTCollector, bridge_config, free_port, publish, wait_until
from test_flow import MQTT_TO_PUSHER, PUSHER_TO_MQTT

DRAIN = 100  # messages a second
BACKLOG = 500


def delivered(port: int, direction: str) -> float:
    """messages_total{outcome="delivered"} of `direction`, summed over rules."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("pusher_mqtt_bridge_messages_total{") and f'direction="{direction}"' in line \
                and 'outcome="delivered"' in line and not re.search(r'rule="(gaps|users|presence)?"', line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def drain_rate_seen(port: int, direction: str, start: float, base: float, backlog: int,
                    timeout: float = 30) -> tuple[float, float]:
    """Samples the delivered counter (`base` before the outage ended) until `backlog` more were
    delivered; returns (messages per second between 10 % and 90 % of the backlog, seconds from
    `start` in all)."""
    samples = [(time.monotonic(), 0.0)]
    deadline = time.monotonic() + timeout
    while samples[-1][1] < backlog and time.monotonic() < deadline:
        time.sleep(0.05)
        samples.append((time.monotonic(), delivered(port, direction) - base))
    assert samples[-1][1] >= backlog, (f"only {samples[-1][1]:g} of {backlog} delivered in {timeout} s; every second: "
                                       f"{[n for t, n in samples[::20]]}")
    t10 = next(t for t, n in samples if n >= backlog * 0.1)
    t90 = next(t for t, n in samples if n >= backlog * 0.9)
    return (backlog * 0.8) / (t90 - t10), samples[-1][0] - start


def config_with_metrics(pusher, broker, workdir, rules: str, **extra) -> tuple[str, int]:
    port = free_port()
    config = bridge_config(pusher, broker, workdir, rules, **extra)
    return config.replace('metrics = ""', f'metrics = "127.0.0.1:{port}"'), port


def test_mqtt_to_pusher_backlog_drains_at_the_rate_and_live_messages_are_not_held(pusher, broker, workdir, bridges):
    config, port = config_with_metrics(pusher, broker, workdir, MQTT_TO_PUSHER, extra_pusher=f'drain_rate = "{DRAIN}/s"')
    bridges(config)
    listener = PysherListener(pusher, "sensor-kitchen", ["temperature"])
    wait_until(lambda: publish(broker.port, "sensors/kitchen/temperature", "probe") or "probe" in listener.data(),
               20, 0.3, "a probe to reach sensor-kitchen")
    time.sleep(2.5)  # the start's own backlog boundary lies behind us: the probe's successors are live
    with listener.lock:
        listener.received.clear()

    status, body = pusher.control("POST", f"/pusher-local/apps/{pusher.app_id}/quota?exceeded=true")
    assert status == 200, body
    publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="drain-publisher")
    publisher.max_queued_messages_set(0)
    publisher.connect("127.0.0.1", broker.port)
    publisher.loop_start()
    acks = [publisher.publish("sensors/kitchen/temperature", f"b{i}", qos=1) for i in range(BACKLOG)]
    for ack in acks:
        ack.wait_for_publish(10)
    # Everything is in the bridge's buffer before the outage ends (received, not delivered).
    wait_until(lambda: sum(float(line.rsplit(" ", 1)[1]) for line in urllib.request.urlopen(
        f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode().splitlines()
        if line.startswith("pusher_mqtt_bridge_buffered_messages{") and 'direction="mqtt_to_pusher"' in line) >= BACKLOG - 10,
        15, 0.1, "the backlog buffered")

    base = delivered(port, "mqtt_to_pusher")
    lifted = time.monotonic()
    status, body = pusher.control("POST", f"/pusher-local/apps/{pusher.app_id}/quota?exceeded=false")
    assert status == 200, body
    rate, took = drain_rate_seen(port, "mqtt_to_pusher", lifted, base, BACKLOG)
    print(f"\nMQTT -> Pusher backlog of {BACKLOG} at drain_rate {DRAIN}/s: {rate:.1f}/s between 10 % and 90 %, "
          f"{took:.2f} s after the outage ended")
    assert DRAIN * 0.9 <= rate <= DRAIN * 1.1, f"the backlog left at {rate:.1f}/s, not {DRAIN}/s ± 10 %"

    # Live messages after the backlog go at once.
    wait_until(lambda: len(listener.data()) >= BACKLOG, 15, 0.05, "the whole backlog at pysher")
    latencies = []
    for i in range(20):
        sent = time.monotonic()
        publisher.publish("sensors/kitchen/temperature", f"live{i}", qos=1).wait_for_publish(5)
        wait_until(lambda i=i: f"live{i}" in listener.data(), 5, 0.005, f"live{i} at pysher")
        latencies.append(time.monotonic() - sent)
    publisher.loop_stop()
    publisher.disconnect()
    print(f"live latency after the drain: median {sorted(latencies)[10] * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms")
    assert max(latencies) < 1.0, latencies
    assert listener.data() == [f"b{i}" for i in range(BACKLOG)] + [f"live{i}" for i in range(20)]
    listener.close()


def test_pusher_to_mqtt_backlog_drains_at_the_rate_after_the_broker_is_back(pusher, broker, workdir, bridges):
    config, port = config_with_metrics(pusher, broker, workdir, PUSHER_TO_MQTT, extra_mqtt=f'drain_rate = "{DRAIN}/s"')
    bridges(config)
    wait_bridge_subscribed(pusher, "market-data")
    http = pusher.http_client()
    time.sleep(2.5)  # past the start's backlog boundary
    broker.stop(signal.SIGTERM)
    for i in range(0, BACKLOG, 10):
        http.trigger_batch([{"channel": "market-data", "name": "new-price", "data": f"p{j}"} for j in range(i, i + 10)])
    wait_until(lambda: sum(float(line.rsplit(" ", 1)[1]) for line in urllib.request.urlopen(
        f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode().splitlines()
        if line.startswith("pusher_mqtt_bridge_buffered_messages{") and 'direction="pusher_to_mqtt"' in line) >= BACKLOG,
        15, 0.1, "the backlog buffered")
    base = delivered(port, "pusher_to_mqtt")
    broker.start()
    back = time.monotonic()
    rate, took = drain_rate_seen(port, "pusher_to_mqtt", back, base, BACKLOG)
    collector = MQTTCollector(broker.port, ["dash/prices/#"])
    print(f"\nPusher -> MQTT backlog of {BACKLOG} at drain_rate {DRAIN}/s: {rate:.1f}/s between 10 % and 90 %, "
          f"{took:.2f} s after the broker was back")
    assert DRAIN * 0.9 <= rate <= DRAIN * 1.1, f"the backlog left at {rate:.1f}/s, not {DRAIN}/s ± 10 %"
    # Live events after it are not held.
    wait_until(lambda: delivered(port, "pusher_to_mqtt") >= BACKLOG, 10, 0.1, "the backlog delivered")
    sent = time.monotonic()
    http.trigger("market-data", "new-price", "live")
    wait_until(lambda: b"live" in collector.payloads("dash/prices/new-price"), 5, 0.005, "the live event at MQTT")
    latency = time.monotonic() - sent
    print(f"live latency after the drain: {latency * 1000:.0f} ms")
    assert latency < 1.0
    collector.close()

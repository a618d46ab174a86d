"""Reloads that restart a bridge (issue 26, defect 1), with a real mosquitto, pusher-local, paho-mqtt,
the official `pusher` library and pysher.

The daemon used to start the new bridge before the old one had closed its spools: about one reload in
two logged "directory is in use by another spool", the bridge stayed stopped for good, and `/readyz`
still answered 200. Now a restart waits for the old bridge to release everything, a bridge that
cannot start is retried with its backoff and reported (log, errors_total, `/readyz` 503 naming it),
and a rules-only reload that moves the MQTT → Pusher overflow default keeps both connections."""

from __future__ import annotations

import fcntl
import os
import signal
import threading
import time

import paho.mqtt.client as mqtt

from bridge_testkit.clients import NotifySocket, PysherListener, wait_bridge_subscribed
from bridge_testkit.harness import (MQTTCollector, bridge_config, free_port, http_get, metric_value, publish,
                                    pusher_connections, wait_until)
from test_flow import PUSHER_TO_MQTT
MQTT_TO_PUSHER_QOS1 = """
[[bridge.rule]]
name = "readings"
from = "mqtt"
topic = "sensors/+/reading"
channel = "sensor-{1}"
event = "reading"
qos = 1
payload = "data"
"""

RELOADS = 20


def with_metrics(config: str, port: int) -> str:
    return config.replace('metrics = ""', f'metrics = "127.0.0.1:{port}"')


class ReadyzPoller:
    """Polls `/readyz` every 20 ms in a thread and keeps every answer."""

    def __init__(self, port: int):
        self.port = port
        self.answers: list[tuple[int, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            try:
                self.answers.append(http_get(f"http://127.0.0.1:{self.port}/readyz", timeout=2))
            except OSError as error:
                self.answers.append((0, str(error)))
            time.sleep(0.02)

    def close(self):
        self.stop.set()
        self.thread.join(5)


def metrics_text(port: int) -> str:
    return http_get(f"http://127.0.0.1:{port}/metrics")[1]


def both_up(port: int) -> bool:
    text = metrics_text(port)
    return all(metric_value(text, f'pusher_mqtt_bridge_connection_up{{bridge="e2e",side="{side}"}}') == 1
               for side in ("pusher", "mqtt"))


def ready(port: int) -> bool:
    return http_get(f"http://127.0.0.1:{port}/readyz")[0] == 200


def test_twenty_reloads_that_restart_the_bridge_under_traffic_lose_nothing_at_qos1(pusher, broker, workdir, bridges):
    port = free_port()
    base = with_metrics(bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT + MQTT_TO_PUSHER_QOS1), port)
    bridge = bridges(base)
    collector = MQTTCollector(broker.port, ["dash/prices/#"])
    listener = PysherListener(pusher, "sensor-s1", ["reading"])
    wait_bridge_subscribed(pusher, "market-data")
    wait_until(lambda: ready(port), 15, 0.05, "the bridge to be ready")
    poller = ReadyzPoller(port)

    # MQTT → Pusher at QoS 1 all along: the broker's session holds what arrives during a restart.
    published: list[str] = []
    stop_traffic = threading.Event()

    publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="reload-loop-publisher")
    publisher.connect("127.0.0.1", broker.port)
    publisher.loop_start()

    def mqtt_traffic():
        n = 0
        while not stop_traffic.is_set():
            payload = f"m{n}"
            publisher.publish("sensors/s1/reading", payload, qos=1).wait_for_publish(10)
            published.append(payload)
            n += 1
            time.sleep(0.02)

    # Pusher → MQTT all along (Pusher has no replay: events during a restart's gap are lost, which
    # issue 28 addresses; here each reload must end with events flowing again).
    http = pusher.http_client()

    def pusher_traffic():
        n = 0
        while not stop_traffic.is_set():
            http.trigger("market-data", "new-price", f"p{n}")
            n += 1
            time.sleep(0.02)

    threads = [threading.Thread(target=mqtt_traffic, daemon=True), threading.Thread(target=pusher_traffic, daemon=True)]
    for thread in threads:
        thread.start()
    try:
        for i in range(RELOADS):
            keepalive = "6s" if i % 2 == 0 else "5s"  # a connection setting: the bridge restarts
            bridge.write_config(base.replace('keepalive = "5s"', f'keepalive = "{keepalive}"'))
            before = bridge.log().count("reloaded [")
            restarted = bridge.log().count("bridge connection settings changed; reconnecting it")
            bridge.send_signal(signal.SIGHUP)
            wait_until(lambda: bridge.log().count("reloaded [") > before, 20, 0.02, f"reload {i + 1}")
            assert bridge.log().count("bridge connection settings changed; reconnecting it") == restarted + 1
            # Every reload ends with the bridge connected on both sides and ready.
            wait_until(lambda: ready(port) and both_up(port), 20, 0.05, f"the bridge to be ready after reload {i + 1}")
            # Ready means bridging: a fresh event goes through both ways.
            marker = f"after-reload-{i}"
            wait_bridge_subscribed(pusher, "market-data")
            http.trigger("market-data", "new-price", marker)
            wait_until(lambda: marker.encode() in collector.payloads("dash/prices/new-price"), 10, 0.05,
                       f"Pusher → MQTT after reload {i + 1}")
            publish(broker.port, "sensors/s1/reading", marker, qos=1)
            wait_until(lambda: marker in listener.data(), 10, 0.05, f"MQTT → Pusher after reload {i + 1}")
    finally:
        stop_traffic.set()
        for thread in threads:
            thread.join(10)
        poller.close()
        publisher.loop_stop()
        publisher.disconnect()

    log = bridge.log()
    assert "in use by another spool" not in log
    assert "cannot start bridge" not in log
    # MQTT → Pusher at QoS 1: every message arrived (at least once).
    wait_until(lambda: set(published) <= set(listener.data()), 20, 0.1, "every MQTT message to reach Pusher")
    received = [d for d in listener.data() if d.startswith("m")]
    duplicates = len(received) - len(set(received))
    print(f"\nreload loop: {RELOADS} reloads, {len(published)} MQTT → Pusher at QoS 1, 0 lost, {duplicates} duplicates; "
          f"{len(poller.answers)} /readyz polls, {sum(1 for s, _ in poller.answers if s == 503)} answered 503")
    # `/readyz` never answered without naming what is wrong, and never failed to answer.
    for status, body in poller.answers:
        assert status in (200, 503), body
        if status == 503:
            assert body.strip() and all(line.startswith("e2e: ") for line in body.strip().splitlines()), body
        else:
            assert body.strip() == "ready", body
    assert any(status == 503 for status, _ in poller.answers), "a restart was never seen as not ready"
    collector.close()
    listener.close()


def test_a_reload_that_moves_the_overflow_default_keeps_both_connections(pusher, broker, workdir, bridges):
    """QoS 0 → QoS 1 MQTT rules without an `overflow` key: drop-oldest → backpressure in place."""
    port = free_port()
    qos0 = MQTT_TO_PUSHER_QOS1.replace("qos = 1", "qos = 0")
    base = with_metrics(bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT + qos0), port)
    base = base.replace('overflow = "drop-oldest"\n', "")
    bridge = bridges(base)
    listener = PysherListener(pusher, "sensor-s1", ["reading"])
    wait_until(lambda: ready(port) and both_up(port), 15, 0.05, "the bridge to be ready")
    sockets_before = pusher_socket_ids(pusher)
    assert len(sockets_before) == 2, sockets_before  # the bridge and pysher
    text = metrics_text(port)
    reconnects_before = [metric_value(text, f'pusher_mqtt_bridge_reconnects_total{{bridge="e2e",side="{side}"}}')
                         for side in ("pusher", "mqtt")]

    bridge.write_config(base.replace("qos = 0", "qos = 1"))
    bridge.send_signal(signal.SIGHUP)
    wait_until(lambda: "reloaded [" in bridge.log(), 20, 0.05, "the reload")
    log = bridge.log()
    assert "rules_changed=1" in log and "restarted=0" in log, log[-3000:]
    assert "MQTT → Pusher overflow policy changed in place" in log
    assert "reconnecting it" not in log
    assert log.count("pusher connected") == 1
    # The same Pusher connection, the same MQTT connection.
    assert pusher_socket_ids(pusher) == sockets_before
    text = metrics_text(port)
    assert [metric_value(text, f'pusher_mqtt_bridge_reconnects_total{{bridge="e2e",side="{side}"}}')
            for side in ("pusher", "mqtt")] == reconnects_before
    assert both_up(port)
    publish(broker.port, "sensors/s1/reading", "after", qos=1)
    wait_until(lambda: "after" in listener.data(), 10, 0.05, "the QoS 1 rule to work")
    listener.close()


def pusher_socket_ids(pusher) -> set[str]:
    return {c["socket_id"] for c in pusher_connections(pusher)}


def test_a_bridge_that_cannot_start_is_retried_and_reported(pusher, broker, workdir, bridges):
    """A reload adds a bridge whose spool's lock another process holds: it cannot start; `/readyz`,
    STATUS=, the log and errors_total say so until the lock is free, then a retry starts it."""
    port = free_port()
    notify = NotifySocket(str(workdir / "notify.sock"))
    base = with_metrics(bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT), port)
    bridge = bridges(base, env={"NOTIFY_SOCKET": notify.path})
    collector = MQTTCollector(broker.port, ["dash/prices/#", "second/#"])
    wait_until(lambda: ready(port), 15, 0.05, "the bridge to be ready")

    spool = workdir / "state" / "second" / "pusher_to_mqtt.spool"
    spool.mkdir(parents=True)
    holder = os.open(spool / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    second = bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT.replace("dash/prices", "second/prices"), name="second")
    bridge.write_config(base + second[second.index("[[bridge]]"):])
    try:
        bridge.send_signal(signal.SIGHUP)
        wait_until(lambda: "cannot start bridge; retrying" in bridge.log(), 20, 0.05, "the failed start")
        assert "bridge added [bridge=second]" in bridge.log()
        status, body = http_get(f"http://127.0.0.1:{port}/readyz")
        assert status == 503, body
        assert "second: not running: cannot start" in body and "in use by another spool" in body, body
        assert not any(line.startswith("e2e:") for line in body.splitlines()), body  # the first bridge is fine
        text = metrics_text(port)
        assert metric_value(text, 'pusher_mqtt_bridge_errors_total{bridge="second",kind="start"}') >= 1
        assert metric_value(text, 'pusher_mqtt_bridge_connection_up{bridge="second",side="mqtt"}') == 0
        assert both_up(port)  # bridge e2e
        # STATUS= (sent when it changes, checked every second) names it too.
        wait_until(lambda: any("second: not running: cannot start" in m and "in use by another spool" in m
                               for m in notify.seen("STATUS=")), 5, 0.05, "STATUS= naming the bridge")
        # Retried with the backoff (max_delay 2 s): still refused while the lock is held.
        wait_until(lambda: bridge.log().count("cannot start bridge; retrying") >= 3, 20, 0.05, "the retries")
        assert http_get(f"http://127.0.0.1:{port}/readyz")[0] == 503
        assert bridge.running()
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
    wait_until(lambda: ready(port), 20, 0.05, "a retry to start the bridge")
    assert "bridge started [bridge=second" in bridge.log()
    # Ready does not wait for subscriptions, and bridge e2e already occupies the channel: wait for
    # bridge second's own subscription. Then each bridge delivers on its own connections, in
    # either order: wait for both.
    wait_until(lambda: "subscribed [bridge=second pusher.channel=market-data" in bridge.log(), 15, 0.05,
               "bridge second to subscribe market-data")
    pusher.http_client().trigger("market-data", "new-price", "back")
    wait_until(lambda: collector.payloads("second/prices/new-price") == [b"back"]
               and collector.payloads("dash/prices/new-price") == [b"back"], 10, 0.05, "both bridges bridging")
    collector.close()

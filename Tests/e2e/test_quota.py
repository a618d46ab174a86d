"""Pusher answering 403 (over quota) pauses MQTT -> Pusher instead of dead-lettering
(docs/contract.md §7.3): real mosquitto, pusher-local with its `quota` switch, the daemon, paho
publishing QoS 1 and pysher listening."""

from __future__ import annotations

import time

import paho.mqtt.client as mqtt

from bridge_testkit.clients import NotifySocket, PysherListener
from bridge_testkit.harness import MQTTCollector, bridge_config, free_port, publish, readyz, wait_until
from test_flow import MQTT_TO_PUSHER
from test_operations import metric

RATE = 50  # messages a second, over both channels
SECONDS = 20
QUOTA_FROM, QUOTA_UNTIL = 5.0, 15.0  # seconds into the run
ROOMS = ["kitchen", "hall"]


def quota(pusher, exceeded: bool):
    status, body = pusher.control("POST", f"/pusher-local/apps/{pusher.app_id}/quota?exceeded={'true' if exceeded else 'false'}")
    assert status == 200, body


def test_403_over_quota_pauses_buffers_and_resumes_in_order_without_dead_letters(pusher, broker, workdir, bridges):
    metrics_port = free_port()
    notify = NotifySocket(str(workdir / "notify.sock"))
    config = bridge_config(pusher, broker, workdir, MQTT_TO_PUSHER).replace('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"')
    bridge = bridges(config, env={"NOTIFY_SOCKET": notify.path})
    dead = MQTTCollector(broker.port, ["pusher-mqtt-bridge/e2e/dead-letter"])
    listeners = {room: PysherListener(pusher, f"sensor-{room}", ["temperature"]) for room in ROOMS}
    wait_until(lambda: readyz(metrics_port)[0] == 200, 15, 0.1, "/readyz 200 before the run")
    for room, listener in listeners.items():  # the bridge's MQTT subscription is in place
        wait_until(lambda room=room, listener=listener: publish(broker.port, f"sensors/{room}/temperature", "probe")
                   or "probe" in listener.data(), 20, 0.3, f"a probe to reach sensor-{room}")
    time.sleep(0.5)
    for listener in listeners.values():
        with listener.lock:
            listener.received.clear()

    publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="quota-publisher")
    publisher.connect("127.0.0.1", broker.port)
    publisher.loop_start()
    sent: dict[str, list[str]] = {room: [] for room in ROOMS}
    acks = []
    during: tuple[int, str] | None = None
    status_during: list[str] = []
    received_at_quota = received_before_lift = 0
    total = RATE * SECONDS
    start = time.monotonic()
    for i in range(total):
        due = start + i / RATE
        if (pause := due - time.monotonic()) > 0:
            time.sleep(pause)
        room = ROOMS[i % len(ROOMS)]
        payload = f"{room}-{len(sent[room])}"
        sent[room].append(payload)
        acks.append(publisher.publish(f"sensors/{room}/temperature", payload, qos=1))
        if i == int(QUOTA_FROM * RATE):
            quota(pusher, True)
        elif i == int((QUOTA_FROM + 1) * RATE):
            # A second in: whatever was in flight when the switch turned has arrived.
            received_at_quota = sum(len(listener.data()) for listener in listeners.values())
        elif i == int((QUOTA_FROM + 3) * RATE):
            during = readyz(metrics_port)
            status_during = [m for m in notify.seen("STATUS=") if "paused" in m]
        elif i == int(QUOTA_UNTIL * RATE) - 1:
            received_before_lift = sum(len(listener.data()) for listener in listeners.values())
            quota(pusher, False)
    for ack in acks:
        ack.wait_for_publish(10)
    publisher.loop_stop()
    publisher.disconnect()

    # While over quota: not ready, with the reason; STATUS= says so; nothing went out.
    assert during is not None and during[0] == 503, during
    assert "pusher api refused with 403" in during[1] and "Over quota" in during[1], during[1]
    assert "MQTT→Pusher paused, buffering" in during[1], during[1]
    assert status_during, notify.all()[-5:]
    assert received_before_lift == received_at_quota, "events reached Pusher while it refused them"

    # After: ready again, and every message arrived, in order per channel, none dead-lettered.
    wait_until(lambda: readyz(metrics_port)[0] == 200, 10, 0.1, "/readyz 200 after the quota is lifted")
    for room in ROOMS:
        wait_until(lambda room=room: len(listeners[room].data()) >= len(sent[room]), 30, 0.2, f"every message for {room}")
        assert listeners[room].data() == sent[room], f"{room}: lost, duplicated or reordered"
    dead_lettered = 'pusher_mqtt_bridge_messages_total{bridge="e2e",rule="temperatures",direction="mqtt_to_pusher",outcome="dead_lettered"}'
    assert metric(metrics_port, dead_lettered) == 0
    delivered = 'pusher_mqtt_bridge_messages_total{bridge="e2e",rule="temperatures",direction="mqtt_to_pusher",outcome="delivered"}'
    assert metric(metrics_port, delivered) >= total  # and the probes
    refusals = metric(metrics_port, 'pusher_mqtt_bridge_errors_total{bridge="e2e",kind="pusher_http"}')
    assert refusals >= 4, "the refused batches were retried at the cap (2 s) for 10 s"
    time.sleep(0.5)
    assert dead.payloads() == []

    # One log line on pause and one on resume, not one per retry (a 403 answer racing the first
    # 200 can pause once more).
    log = bridge.log()
    pauses, resumes = log.count("MQTT→Pusher paused:"), log.count("MQTT→Pusher resumed")
    assert 1 <= pauses <= 2 and pauses < refusals, (pauses, refusals)
    assert resumes == pauses, (pauses, resumes)
    assert any("paused" not in m for m in notify.seen("STATUS=")[-1:]), notify.all()[-3:]
    for listener in listeners.values():
        listener.close()
    dead.close()

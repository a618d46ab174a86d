"""Webhooks in (docs/contract.md §7.2): the daemon's webhook config, requests signed the way the
official `pusher` library signs them, metric reads, and the broker-outage scenario that is both
Tests/e2e/test_webhooks.py's and the `webhooks-broker-outage` row of the fault matrix
(Tests/faults/webhook_rows.py)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import paho.mqtt.client as mqtt
import pusher as pusher_http
import pusher.signature

from bridge_testkit.prometheus import books_balance, scrape
from bridge_testkit.harness import Bridge, Mosquitto, PusherLocal, bridge_config, free_port, port_open, wait_until

NAME = "hooks"
PREFIX = "hooks/factory"


def webhook_config(pusher: PusherLocal, broker: Mosquitto, workdir: Path, webhook_port: int, metrics_port: int, *,
                   persist: bool = True, section: str = "") -> str:
    config = bridge_config(pusher, broker, workdir, name=NAME, daemon=f'webhooks = "127.0.0.1:{webhook_port}"')
    config = config.replace('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"')
    if not persist:
        config = config.replace("persist = true", "persist = false")
    return config + f'\n[bridge.webhooks]\ntopic_prefix = "{PREFIX}"\n{section}\n'


def sign(secret: str, body: bytes) -> str:
    """X-Pusher-Signature exactly as the official library computes it (pusher/signature.py)."""
    return pusher.signature.sign(secret, body.decode())


def post(port: int, body: bytes, *, key: str | None, signature: str | None, bridge: str = NAME,
         method: str = "POST") -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/webhooks/{bridge}", data=body if method == "POST" else None,
                                     method=method)
    request.add_header("Content-Type", "application/json")
    if key is not None:
        request.add_header("X-Pusher-Key", key)
    if signature is not None:
        request.add_header("X-Pusher-Signature", signature)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def signed_post(port: int, pusher: PusherLocal, events: list[dict], **extra) -> tuple[int, str]:
    body = json.dumps({"time_ms": int(time.time() * 1000), "events": events, **extra}).encode()
    signature = sign(pusher.secret, body)
    # The official library's own check accepts what we send (key, signature, JSON, time_ms).
    assert pusher_http.Pusher(app_id=pusher.app_id, key=pusher.key, secret=pusher.secret).validate_webhook(
        pusher.key, signature, body.decode()) is not None
    return post(port, body, key=pusher.key, signature=signature)


def metric(port: int, name: str, **labels: str) -> float:
    lines = scrape(port)
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    values = [float(line.split()[-1]) for line in lines
              if line.startswith(name + "{") and all(w in line for w in wanted)]
    assert values, f"no series {name} {labels}"
    return sum(values)


def run_webhook_outage(workdir: Path, requests: int = 200, persist: bool = True) -> dict:
    """mosquitto stopped, then `requests` webhook requests (one client event each, numbered), a
    third of them sent twice as Pusher's retries; broker back. With persist = true every request
    is answered 200 during the outage (spooled) and every event arrives once, in order. With
    persist = false they are answered 503 while the broker is away, and Pusher's retry after it is
    back gets 200. Returns what was sent and received (per stream of numbered messages) for judging."""
    out = {"sent": {"webhooks": []}, "received": {}, "broker_back": None, "observations": [], "failures": [],
           "statuses": {}}
    broker = pusher = bridge = receiver = None
    try:
        broker = Mosquitto(workdir).start()
        pusher = PusherLocal(workdir, extra=["--activity-timeout", "2"]).start()
        webhook_port, metrics_port = free_port(), free_port()
        config = webhook_config(pusher, broker, workdir, webhook_port, metrics_port, persist=persist).replace(
            'log_level = "debug"', 'log_level = "info"')
        bridge = Bridge(workdir, config).start()
        wait_until(lambda: port_open(webhook_port) and port_open(metrics_port), 20, what="the webhook and metrics listeners")
        wait_until(lambda: metric(metrics_port, "pusher_mqtt_bridge_connection_up", side="mqtt") == 1, 15, 0.1, "MQTT up")

        received: list[tuple[int, float]] = []
        out["received"] = {"webhooks": received}
        receiver = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"hooks-recv-{os.getpid()}-{persist}",
                               clean_session=False)
        receiver.reconnect_delay_set(0.1, 1)
        connected = threading.Event()
        receiver.on_connect = lambda c, u, f, rc, p=None: (c.subscribe(f"{PREFIX}/channels/+/client-events/#", 1),
                                                            connected.set())
        receiver.on_message = lambda c, u, msg: received.append((json.loads(msg.payload)["seq"], time.monotonic()))
        receiver.connect("127.0.0.1", broker.port, keepalive=5)
        receiver.loop_start()
        assert connected.wait(10), "the receiver did not connect"
        time.sleep(0.3)

        broker.stop(signal.SIGTERM)
        wait_until(lambda: metric(metrics_port, "pusher_mqtt_bridge_connection_up", side="mqtt") == 0, 10, 0.1, "MQTT down")
        bodies = []
        statuses: dict[int, int] = {}
        for seq in range(requests):
            event = {"name": "client_event", "channel": "private-line", "event": "client-reading",
                     "data": json.dumps({"seq": seq}), "user_id": "sensor"}
            body = json.dumps({"time_ms": int(time.time() * 1000), "events": [event]}).encode()
            bodies.append(body)
            status, _ = post(webhook_port, body, key=pusher.key, signature=sign(pusher.secret, body))
            statuses[status] = statuses.get(status, 0) + 1
            if status == 200:
                out["sent"]["webhooks"].append((seq, time.monotonic()))
            if seq % 3 == 0:  # Pusher's retry of the same body
                status, _ = post(webhook_port, body, key=pusher.key, signature=sign(pusher.secret, body))
                statuses[status] = statuses.get(status, 0) + 1
        out["statuses"]["outage"] = dict(statuses)
        out["observations"].append(f"answers during the outage: {statuses}")

        broker.start()
        out["broker_back"] = time.monotonic()
        wait_until(lambda: metric(metrics_port, "pusher_mqtt_bridge_connection_up", side="mqtt") == 1, 20, 0.1, "MQTT back")
        if not persist:
            # Pusher retries what got 503; now each is accepted.
            retry_statuses: dict[int, int] = {}
            for seq, body in enumerate(bodies):
                status, _ = post(webhook_port, body, key=pusher.key, signature=sign(pusher.secret, body))
                retry_statuses[status] = retry_statuses.get(status, 0) + 1
                if status == 200:
                    out["sent"]["webhooks"].append((seq, time.monotonic()))
            out["statuses"]["retry"] = retry_statuses
            out["observations"].append(f"answers to the retries: {retry_statuses}")
        wait_until(lambda: len(received) >= len(out["sent"]["webhooks"]), 20, 0.1, "every accepted webhook on MQTT")
        # The buffered gauge is written by the housekeeping tick (about 1 s, after the spool syncs):
        # read until the books balance, at most 5 s, and judge the last reading.
        deadline = time.monotonic() + 5
        while True:
            received_total, outcomes, buffered = books_balance(metrics_port)
            if received_total == outcomes + buffered or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        mark = "=" if received_total == outcomes + buffered else "!="
        out["identity"] = {"pusher_to_mqtt": f"{received_total:g} {mark} {outcomes:g} + {buffered:g}"}
        if received_total != outcomes + buffered:
            out["failures"].append(f"counters do not balance: received {received_total:g} != {outcomes:g} + buffered {buffered:g}")
        out["webhooks_total"] = {o: metric(metrics_port, "pusher_mqtt_bridge_webhooks_total", bridge=NAME, outcome=o)
                                 for o in ("accepted", "duplicate", "unavailable")}
        out["observations"].append(f"webhooks_total: {out['webhooks_total']}")
    finally:
        if receiver:
            receiver.loop_stop()
            receiver.disconnect()
        for process in (bridge, pusher, broker):
            if process and process.running():
                process.stop()
    return out

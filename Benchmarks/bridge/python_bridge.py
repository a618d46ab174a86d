"""The Python baseline for `make bench`: what a user would write instead of pusher-mqtt-bridge.

pysher (Pusher WebSocket client) + paho-mqtt + the official `pusher` HTTP library, implementing
the two rules the benchmark gives the real bridge (Benchmarks/bridge/bench.py, `bridge_rules`):

- Pusher -> MQTT: every event of CHANNEL is published to TOPIC_TEMPLATE with `{event}` replaced by
  the event name; the MQTT payload is the event's `data` string (docs/contract.md §5.1 `payload = "data"`);
  QoS as given; up to 1000 publishes in flight (the daemon's window).
- MQTT -> Pusher: every message matching FILTER (`prefix/+`) becomes an event on CHANNEL named
  after the level `+` matched (`event = "{1}"`), with the payload as data (UTF-8; anything else
  is counted and dropped). Messages wait in a queue; one worker sends them with `trigger_batch`
  (batch_events) in batches of up to 10, as the daemon does.

Fair but plain: no multiprocessing, no hand-written protocol code, the libraries used the way
their documentation shows. Not a product: no reconnect buffering, no spool, no dead letters.

    python_bridge.py --pusher-port P --app-id ID --key K --secret S --mqtt-port M
        [--p2m-channel C --p2m-topic T --p2m-qos Q] [--m2p-filter F --m2p-channel C --m2p-qos Q]

Prints "ready" once the MQTT subscription is acknowledged and the Pusher connection is
established (the driver then checks end to end with probe messages). Stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import queue
import signal
import sys
import threading

import paho.mqtt.client as mqtt
import pusher
import pysher


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pusher-host", default="127.0.0.1")
    parser.add_argument("--pusher-port", type=int, required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--mqtt-port", type=int, required=True)
    parser.add_argument("--p2m-channel")
    parser.add_argument("--p2m-topic", default="bench/p2m/{event}")
    parser.add_argument("--p2m-qos", type=int, default=0)
    parser.add_argument("--m2p-filter")
    parser.add_argument("--m2p-channel")
    parser.add_argument("--m2p-qos", type=int, default=0)
    args = parser.parse_args()
    if args.m2p_filter and (not args.m2p_channel or not args.m2p_filter.endswith("/+")):
        parser.error("--m2p-filter must end in /+ and needs --m2p-channel")
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="python_bridge %(levelname)s %(message)s")
    log = logging.getLogger("python_bridge")

    stopping = threading.Event()
    mqtt_ready = threading.Event()
    pusher_ready = threading.Event()
    dropped = {"non_utf8": 0, "http_errors": 0}

    # --- MQTT side ---------------------------------------------------------------------------
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="python-bridge", protocol=mqtt.MQTTv5)
    client.max_inflight_messages_set(1000)
    outbox: queue.Queue = queue.Queue()

    def on_connect(c, userdata, flags, reason_code, properties=None):
        if args.m2p_filter:
            c.subscribe(args.m2p_filter, args.m2p_qos)
        else:
            mqtt_ready.set()

    def on_subscribe(c, userdata, mid, reason_codes, properties=None):
        mqtt_ready.set()

    def on_message(c, userdata, msg):
        try:
            data = msg.payload.decode("utf-8")
        except UnicodeDecodeError:
            dropped["non_utf8"] += 1
            return
        outbox.put((msg.topic.rsplit("/", 1)[1], data))

    client.on_connect = on_connect
    client.on_subscribe = on_subscribe
    client.on_message = on_message
    client.connect("127.0.0.1", args.mqtt_port, keepalive=30)
    client.loop_start()

    # --- MQTT -> Pusher: one worker, batch_events of up to 10 ----------------------------------
    http = pusher.Pusher(app_id=args.app_id, key=args.key, secret=args.secret, host=args.pusher_host,
                         port=args.pusher_port, ssl=False)

    def target(level: str, data: str) -> dict:
        # Like the daemon's rules: `bench-m2p-{1}` puts the topic level in the channel (event
        # "bench"); a fixed channel takes the level as the event name.
        if "{1}" in args.m2p_channel:
            return {"channel": args.m2p_channel.replace("{1}", level), "name": "bench", "data": data}
        return {"channel": args.m2p_channel, "name": level, "data": data}

    def forward():
        while not stopping.is_set():
            try:
                first = outbox.get(timeout=0.2)
            except queue.Empty:
                continue
            batch = [first]
            while len(batch) < 10:
                try:
                    batch.append(outbox.get_nowait())
                except queue.Empty:
                    break
            try:
                http.trigger_batch([target(level, data) for level, data in batch])
            except Exception as error:  # the library raises several types; count and go on
                dropped["http_errors"] += len(batch)
                log.warning("trigger_batch failed: %s", error)

    if args.m2p_filter:
        threading.Thread(target=forward, daemon=True, name="forward").start()

    # --- Pusher -> MQTT ---------------------------------------------------------------------
    socket = pysher.Pusher(args.key, custom_host=args.pusher_host, port=args.pusher_port, secure=False,
                           secret=args.secret, log_level=logging.WARNING)

    def on_event(data, event_name):
        client.publish(args.p2m_topic.replace("{event}", event_name), data, qos=args.p2m_qos)

    def on_established(_data):
        if args.p2m_channel:
            channel = socket.subscribe(args.p2m_channel)
            # pysher calls back with `data` only, so bind each event name the benchmark sends.
            for event_name in ("bench", "probe"):
                channel.bind(event_name, on_event, event_name)
        pusher_ready.set()

    socket.connection.bind("pusher:connection_established", on_established)
    socket.connect()

    if not mqtt_ready.wait(15) or not pusher_ready.wait(15):
        log.error("not connected after 15 s (mqtt %s, pusher %s)", mqtt_ready.is_set(), pusher_ready.is_set())
        return 1
    print("ready", flush=True)

    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    while not stopping.wait(0.5):
        pass
    if dropped["non_utf8"] or dropped["http_errors"]:
        log.warning("dropped: %s", dropped)
    socket.disconnect(timeout=2)
    client.loop_stop()
    client.disconnect()
    return 0


if __name__ == "__main__":
    sys.exit(main())

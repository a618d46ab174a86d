"""Tagged traffic both ways through the bridge, at a steady rate, with receivers that record every
arrival.

- Pusher -> MQTT: `PusherSender` triggers `{"tag":"p2m:N"}` on several channels with the official
  `pusher` library (`trigger_batch`, 10 events per request) straight to pusher-local;
  `MQTTReceiver` is a paho-mqtt QoS 1 subscriber with a persistent session (clean_session false,
  its own reconnects), so the receiver itself loses nothing across broker restarts.
- MQTT -> Pusher: `MQTTSender` publishes `{"tag":"m2p:N"}` at QoS 1 on several topics from a
  paho-mqtt client with a persistent session (it queues while the broker is away and resends
  unacknowledged messages on reconnect); `PysherReceiver` subscribes with pysher, and the HTTP
  fault proxy records what the Pusher HTTP API accepted (proxy.HTTPFaultProxy.events()).

Every sender records (stream, seq, send time) in send order; every receiver (stream, seq, arrival
time) in arrival order. Times are time.monotonic().
"""

from __future__ import annotations

import json
import threading
import time

import paho.mqtt.client as mqtt
import pusher as pusher_http
import pysher

from checker import parse_tag


def tagged(direction: str, seq: int) -> str:
    return json.dumps({"tag": f"{direction}:{seq}"}, separators=(",", ":"))


def tag_of(data) -> int | None:
    """The sequence number in a tagged payload (bytes or str), or None."""
    try:
        if isinstance(data, (bytes, bytearray)):
            data = data.decode()
        parsed = parse_tag(json.loads(data).get("tag", ""))
    except (ValueError, AttributeError, UnicodeDecodeError):
        return None
    return parsed[1] if parsed else None


class Recorder:
    """(stream, seq, time) records, thread-safe."""

    def __init__(self):
        self.lock = threading.Lock()
        self.records: dict[str, list[tuple[int, float]]] = {}
        self.malformed = 0

    def add(self, stream: str, seq: int | None, at: float | None = None):
        with self.lock:
            if seq is None:
                self.malformed += 1
                return
            self.records.setdefault(stream, []).append((seq, at if at is not None else time.monotonic()))

    def snapshot(self) -> dict[str, list[tuple[int, float]]]:
        with self.lock:
            return {k: list(v) for k, v in self.records.items()}

    def count(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.records.values())


class _Paced(threading.Thread):
    """Calls `self.emit(seqs)` for consecutive batches so that `rate` messages/s go out."""

    def __init__(self, rate: float, batch: int, name: str):
        super().__init__(name=name, daemon=True)
        self.rate, self.batch = rate, batch
        self.stopping = threading.Event()
        self.sent = Recorder()
        self.errors = 0

    def run(self):
        start = time.monotonic()
        seq = 0
        while not self.stopping.is_set():
            due = start + seq / self.rate
            delay = due - time.monotonic()
            if delay > 0:
                self.stopping.wait(delay)
                if self.stopping.is_set():
                    break
            self.emit(list(range(seq, seq + self.batch)))
            seq += self.batch

    def stop(self):
        self.stopping.set()
        self.join(30)


class PusherSender(_Paced):
    """Pusher -> MQTT load: round-robin over `channels`, `trigger_batch` of `batch` events."""

    def __init__(self, host: str, port: int, app_id: str, key: str, secret: str, channels: list[str],
                 event: str = "tagged", rate: float = 200, batch: int = 10):
        super().__init__(rate, batch, "p2m-sender")
        self.http = pusher_http.Pusher(app_id=app_id, key=key, secret=secret, host=host, port=port, ssl=False, timeout=5)
        self.channels, self.event = channels, event

    def emit(self, seqs: list[int]):
        batch = [{"channel": self.channels[s % len(self.channels)], "name": self.event, "data": tagged("p2m", s)} for s in seqs]
        now = time.monotonic()
        try:
            self.http.trigger_batch(batch)
        except Exception:
            self.errors += 1  # not accepted by Pusher: not sent, so not counted
            return
        for s, item in zip(seqs, batch):
            self.sent.add(f"p2m/{item['channel']}", s, now)


class MQTTSender(_Paced):
    """MQTT -> Pusher load: QoS 1 publishes round-robin over `topics` from a persistent session."""

    def __init__(self, port: int, topics: list[str], client_id: str, rate: float = 200, host: str = "127.0.0.1"):
        super().__init__(rate, 1, "m2p-sender")
        self.topics = topics
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False,
                                  protocol=mqtt.MQTTv311)
        self.client.max_queued_messages_set(0)
        self.client.max_inflight_messages_set(100)
        self.client.reconnect_delay_set(0.1, 1)
        self.client.connect(host, port, keepalive=5)
        self.client.loop_start()

    def emit(self, seqs: list[int]):
        for s in seqs:
            topic = self.topics[s % len(self.topics)]
            now = time.monotonic()
            info = self.client.publish(topic, tagged("m2p", s), qos=1)
            # Queued (also while disconnected: paho resends it after reconnecting) = sent.
            if info.rc in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN):
                self.sent.add(f"m2p/{topic}", s, now)
            else:
                self.errors += 1

    def stop(self):
        super().stop()

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


class MQTTReceiver:
    """Pusher -> MQTT receiver: QoS 1, persistent session, reconnects by itself; stream = p2m/<channel>."""

    def __init__(self, port: int, topic_filter: str, client_id: str, host: str = "127.0.0.1"):
        self.received = Recorder()
        self.connected = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False,
                                  protocol=mqtt.MQTTv311)
        self.client.reconnect_delay_set(0.1, 1)

        def on_connect(client, userdata, flags, reason_code, properties=None):
            client.subscribe(topic_filter, 1)
            self.connected.set()

        def on_message(client, userdata, msg):
            channel = msg.topic.rsplit("/", 1)[-1]
            self.received.add(f"p2m/{channel}", tag_of(msg.payload))

        self.client.on_connect = on_connect
        self.client.on_message = on_message
        self.client.connect(host, port, keepalive=5)
        self.client.loop_start()
        if not self.connected.wait(10):
            raise RuntimeError("MQTT receiver could not connect")
        time.sleep(0.3)  # SUBACK

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


class PysherReceiver:
    """MQTT -> Pusher end-to-end receiver (pysher); stream = m2p/<topic> from the channel name."""

    def __init__(self, host: str, port: int, key: str, channel_to_topic: dict[str, str], event: str = "tagged"):
        self.received = Recorder()
        self.subscribed = threading.Event()
        self.client = pysher.Pusher(key, custom_host=host, port=port, secure=False, reconnect_interval=1)

        def on_connect(_data):
            for channel, topic in channel_to_topic.items():
                ch = self.client.subscribe(channel)
                ch.bind(event, lambda data, topic=topic: self.received.add(f"m2p/{topic}", tag_of(data)))
                ch.bind("pusher_internal:subscription_succeeded", lambda _d: self.subscribed.set())

        self.client.connection.bind("pusher:connection_established", on_connect)
        self.client.connect()
        if not self.subscribed.wait(10):
            raise RuntimeError("pysher did not subscribe")

    def close(self):
        self.client.disconnect(timeout=2)

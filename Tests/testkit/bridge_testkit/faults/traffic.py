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

import collections
import json
import threading
import time

import paho.mqtt.client as mqtt
import pusher as pusher_http
import pysher

from bridge_testkit.faults.checker import parse_tag


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


class PusherSenders:
    """Pusher -> MQTT load from `senders` PusherSenders, each on its own share of `channels` at its share
    of `rate`, recording into one Recorder (`sent`): one PusherSender waits for each request's answer,
    so a slow HTTP API caps it (a debug pusher-local on a busy 2-core machine: about 200 events/s
    instead of 500). Each channel has one sender, so its events are still triggered in order."""

    def __init__(self, host: str, port: int, app_id: str, key: str, secret: str, channels: list[str],
                 event: str = "tagged", rate: float = 200, senders: int = 3):
        senders = max(1, min(senders, len(channels)))
        self.sent = Recorder()
        self.senders = [PusherSender(host, port, app_id, key, secret, channels[n::senders], event=event,
                                     rate=rate * len(channels[n::senders]) / len(channels)) for n in range(senders)]
        for sender in self.senders:
            sender.sent = self.sent

    @property
    def errors(self) -> int:
        return sum(s.errors for s in self.senders)

    def start(self):
        for s in self.senders:
            s.start()

    def stop(self):
        for s in self.senders:
            s.stopping.set()
        for s in self.senders:
            s.join(30)


class MQTTSender(_Paced):
    """MQTT -> Pusher load: QoS 1 publishes round-robin over `topics`, at least once and in order.

    paho-mqtt itself reorders across a reconnect: publishes made from another thread while it
    handles the CONNACK go out before the in-flight messages it resends (seen in this matrix
    without any bridge in the path: ~100 messages per broker restart). The matrix measures the
    bridge's order, so this sender keeps its own list of unacknowledged messages, uses a new
    paho client for every connection, and on reconnect republishes that list in order before
    anything newer (duplicates possible and counted, never reordering). `username` / `password`
    for a broker that wants them (ejabberd's mod_mqtt refuses a CONNECT without a password)."""

    def __init__(self, port: int, topics: list[str], client_id: str, rate: float = 200, host: str = "127.0.0.1",
                 username: str | None = None, password: str | None = None):
        super().__init__(rate, 1, "m2p-sender")
        self.topics, self.client_id, self.host, self.port = topics, client_id, host, port
        self.username, self.password = username, password
        self.pending: dict[int, tuple[str, str]] = {}  # seq -> (topic, payload), insertion = send order
        self.client = None
        self.broken = threading.Event()
        self.next_attempt = 0.0
        self.connections = 0
        if not self._connect():
            raise RuntimeError("MQTT sender could not connect")

    def _connect(self) -> bool:
        acks: collections.deque = collections.deque()
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id, clean_session=True,
                             protocol=mqtt.MQTTv311, userdata=acks)
        client.max_inflight_messages_set(1000)
        client.max_queued_messages_set(0)
        if self.username is not None:
            client.username_pw_set(self.username, self.password)
        connected = threading.Event()

        def on_publish(c, userdata, mid, reason_code=None, properties=None):
            # paho calls this holding its own lock: only note the ack; the sender thread applies it.
            userdata.append(mid)

        client.on_connect = lambda c, u, f, rc, p=None: connected.set() if not rc.is_failure else None
        client.on_disconnect = lambda c, u, f, rc, p=None: self.broken.set()
        client.on_publish = on_publish
        try:
            client.connect(self.host, self.port, keepalive=5)
        except OSError:
            return False
        client.loop_start()
        if not connected.wait(2):
            client.loop_stop()
            return False
        self.broken.clear()
        self.client, self.acks, self.mids = client, acks, {}
        self.connections += 1
        for seq, (topic, payload) in list(self.pending.items()):
            self._publish(seq, topic, payload)
        return True

    def _publish(self, seq: int, topic: str, payload: str):
        info = self.client.publish(topic, payload, qos=1)
        if info.rc == mqtt.MQTT_ERR_SUCCESS:
            self.mids[info.mid] = seq
        else:
            self.broken.set()

    def _apply_acks(self):
        if self.client is None:
            return
        while self.acks:
            mid = self.acks.popleft()
            seq = self.mids.pop(mid, None)
            if seq is not None:
                self.pending.pop(seq, None)

    def _ensure_connected(self):
        self._apply_acks()
        if self.client is not None and not self.broken.is_set():
            return True
        if time.monotonic() < self.next_attempt:
            return False
        if self.client is not None:
            self.client.loop_stop()
            try:
                self.client.disconnect()
            except Exception:
                pass
            self.client = None
        if not self._connect():
            self.next_attempt = time.monotonic() + 0.2
            return False
        return True

    def emit(self, seqs: list[int]):
        ready = self._ensure_connected()
        for s in seqs:
            topic = self.topics[s % len(self.topics)]
            payload = tagged("m2p", s)
            now = time.monotonic()
            self.pending[s] = (topic, payload)
            if ready and not self.broken.is_set():
                self._publish(s, topic, payload)
            self.sent.add(f"m2p/{topic}", s, now)

    def stop(self):
        super().stop()
        # What is still unacknowledged goes out before the sender is closed.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            self._ensure_connected()
            if not self.pending:
                break
            time.sleep(0.1)

    def close(self):
        if self.client is not None:
            self.client.loop_stop()
            self.client.disconnect()


class MQTTReceiver:
    """Pusher -> MQTT receiver: QoS 1, persistent session, reconnects by itself; stream = p2m/<channel>.
    `username` / `password` for a broker that wants them (as MQTTSender); `recorder` to count into
    one shared with other receivers (MQTTReceivers)."""

    def __init__(self, port: int, topic_filter: str, client_id: str, host: str = "127.0.0.1",
                 username: str | None = None, password: str | None = None, recorder: Recorder | None = None):
        self.received = recorder if recorder is not None else Recorder()
        self.connected = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False,
                                  protocol=mqtt.MQTTv311)
        if username is not None:
            self.client.username_pw_set(username, password)
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


class MQTTReceivers:
    """Pusher -> MQTT receiver as one MQTTReceiver (one session) per topic filter, all counting into one
    Recorder (`received`). For a broker that keeps one QoS 1 message in flight per session: ejabberd's
    mod_mqtt sends a session's next message only after the PUBACK of the one before, so one subscriber
    receives at most 1 / round trip messages a second (at 500/s through a busy test process: a backlog
    of 24 s in a trial run, the test's own limit, not the bridge's)."""

    def __init__(self, port: int, topic_filters: list[str], client_id: str, host: str = "127.0.0.1",
                 username: str | None = None, password: str | None = None):
        self.received = Recorder()
        self.receivers: list[MQTTReceiver] = []
        try:
            for n, topic_filter in enumerate(topic_filters):
                self.receivers.append(MQTTReceiver(port, topic_filter, f"{client_id}-{n}", host=host, username=username,
                                                   password=password, recorder=self.received))
        except Exception:
            self.close()  # the ones already connected: the rig never sees this object
            raise

    def close(self):
        for r in self.receivers:
            r.close()


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

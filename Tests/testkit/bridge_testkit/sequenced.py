"""Sequenced MQTT -> Pusher traffic for the cluster tests (Tests/e2e/test_cluster*.py,
Tests/ejabberd/test_partition_mode.py): a paced QoS 1 publisher that numbers each channel's
messages (`{"seq": n}`), a pysher subscriber that records every `seq` per channel in arrival order,
and the verdict over both (lost, duplicates, first arrivals out of order)."""

from __future__ import annotations

import json
import threading
import time

import paho.mqtt.client as mqtt
import pysher

from bridge_testkit.harness import wait_until


class SequencedPublisher(threading.Thread):
    """QoS 1 publishes round-robin over `topics` ({channel: topic}) at `rate` a second from one MQTT
    5 client, `batch` per wake-up (Python's sleep is too coarse for thousands a second)."""

    def __init__(self, port: int, topics: dict[str, str], rate: float, *, username: str | None = None,
                 password: str | None = None, batch: int = 1):
        super().__init__(daemon=True)
        self.topics, self.rate, self.batch = topics, rate, batch
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"seq-pub-{time.monotonic_ns()}",
                                  protocol=mqtt.MQTTv5)
        if username is not None:
            self.client.username_pw_set(username, password)
        self.client.max_inflight_messages_set(2000)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        self.sent = {c: 0 for c in topics}
        self.stopping = threading.Event()
        self.infos = []

    def run(self):
        channels = list(self.topics)
        interval, next_at, n = self.batch / self.rate, time.monotonic(), 0
        while not self.stopping.is_set():
            for _ in range(self.batch):
                channel = channels[n % len(channels)]
                seq = self.sent[channel]
                self.sent[channel] += 1
                self.infos.append(self.client.publish(self.topics[channel], json.dumps({"seq": seq}), qos=1))
                n += 1
            next_at += interval
            time.sleep(max(0.0, next_at - time.monotonic()))

    def stop(self):
        self.stopping.set()
        self.join(5)
        for info in self.infos:
            info.wait_for_publish(30)
            assert info.is_published(), "the broker did not acknowledge every publish"
        self.client.loop_stop()
        self.client.disconnect()


class SequencedCounter:
    """pysher on `channels`: every `tagged` event's `seq`, per channel, in arrival order."""

    def __init__(self, pusher, channels, reconnect_interval: int = 1):
        self.lock = threading.Lock()
        self.seqs: dict[str, list[int]] = {c: [] for c in channels}
        self.subscribed: set[str] = set()
        self.client = pysher.Pusher(pusher.key, custom_host="127.0.0.1", port=pusher.port, secure=False,
                                    reconnect_interval=reconnect_interval)

        def on_connect(_data):
            for c in channels:
                ch = self.client.subscribe(c)
                ch.bind("tagged", lambda data, c=c: self._add(c, data))
                ch.bind("pusher_internal:subscription_succeeded", lambda _d, c=c: self._subscribed(c))

        self.client.connection.bind("pusher:connection_established", on_connect)
        self.client.connect()
        wait_until(lambda: len(self.subscribed) == len(channels), 20, 0.05, "pysher to subscribe")

    def _subscribed(self, c):
        with self.lock:
            self.subscribed.add(c)

    def _add(self, channel, data):
        seq = json.loads(data)["seq"]
        with self.lock:
            self.seqs[channel].append(seq)

    def all_seqs(self) -> list[int]:
        with self.lock:
            return [s for v in self.seqs.values() for s in v]

    def snapshot(self) -> dict[str, list[int]]:
        with self.lock:
            return {c: list(v) for c, v in self.seqs.items()}

    def close(self):
        self.client.disconnect(timeout=2)


def verdict(sent: dict[str, int], arrivals: dict[str, list[int]]) -> tuple[int, int, int]:
    """(lost, duplicates, first arrivals after a later sequence's) over every channel of `sent`."""
    lost = dups = reordered = 0
    for c, n in sent.items():
        got = arrivals.get(c, [])
        lost += n - len(set(got) & set(range(n)))
        dups += len(got) - len(set(got))
        seen, highest = set(), -1
        for s in got:
            if s in seen:
                continue
            seen.add(s)
            reordered += s < highest
            highest = max(highest, s)
    return lost, dups, reordered

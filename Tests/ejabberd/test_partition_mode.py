"""MQTT -> Pusher through a bridge cluster on the two-node ejabberd cluster, which refuses `$share`:
`[bridge.cluster] mqtt_to_pusher = "partition"` (docs/contract.md §8.4). Three members spread
over both nodes as in test_bridge_cluster.py; a publisher on node 2 sends QoS 1 messages at
2,000 a second over 200 channels (`{"seq": n}` per channel), counted by a pysher subscriber on
every channel: nothing lost, each channel's first arrivals in order across the cluster, the
duplicates counted -- in steady state; while node 1 is stopped under the traffic (its two members
fail over to node 2), nothing lost, and the reordering measured (not kept: see the end of the test).
"""

from __future__ import annotations

import json
import signal
import threading
import time

import paho.mqtt.client as mqtt
import pysher
import pytest

from bridge_testkit.ejabberd import PASSWORD, USERNAME
from bridge_testkit.harness import rule, wait_until
from test_bridge_cluster import broker_node, members, start_members  # noqa: F401 (a fixture)

CHANNELS = [f"pm-{n:03d}" for n in range(200)]
RATE = 2000.0
RULE = rule("m2p", "mqtt", topic="pm/+", channel="pm-{1}", event="tagged", qos=1)


class Publisher(threading.Thread):
    """QoS 1 round-robin over the channels' topics at RATE from one MQTT 5 client on `port`."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"pm-pub-{time.monotonic_ns()}",
                                  protocol=mqtt.MQTTv5)
        self.client.username_pw_set(USERNAME, PASSWORD)
        self.client.max_inflight_messages_set(2000)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        self.sent = {c: 0 for c in CHANNELS}
        self.stopping = threading.Event()
        self.infos = []

    def run(self):
        interval, next_at, n = 1 / RATE, time.monotonic(), 0
        while not self.stopping.is_set():
            for _ in range(20):  # 20 per wake-up: Python's sleep is too coarse for 2,000 a second
                channel = CHANNELS[n % len(CHANNELS)]
                seq = self.sent[channel]
                self.sent[channel] += 1
                self.infos.append(self.client.publish(f"pm/{channel[3:]}", json.dumps({"seq": seq}), qos=1))
                n += 1
            next_at += 20 * interval
            time.sleep(max(0.0, next_at - time.monotonic()))

    def stop(self):
        self.stopping.set()
        self.join(5)
        for info in self.infos:
            info.wait_for_publish(30)
            assert info.is_published(), "the broker did not acknowledge every publish"
        self.client.loop_stop()
        self.client.disconnect()


class Counter:
    """pysher on every channel: each `seq` in arrival order, per channel."""

    def __init__(self, pusher):
        self.lock = threading.Lock()
        self.seqs: dict[str, list[int]] = {c: [] for c in CHANNELS}
        self.subscribed: set[str] = set()
        self.client = pysher.Pusher(pusher.key, custom_host="127.0.0.1", port=pusher.port, secure=False)

        def on_connect(_data):
            for c in CHANNELS:
                ch = self.client.subscribe(c)
                ch.bind("tagged", lambda data, c=c: self._add(c, data))
                ch.bind("pusher_internal:subscription_succeeded", lambda _d, c=c: self._subscribed(c))

        self.client.connection.bind("pusher:connection_established", on_connect)
        self.client.connect()
        wait_until(lambda: len(self.subscribed) == len(CHANNELS), 20, 0.05, "pysher to subscribe")

    def _subscribed(self, c):
        with self.lock:
            self.subscribed.add(c)

    def _add(self, channel, data):
        seq = json.loads(data)["seq"]
        with self.lock:
            self.seqs[channel].append(seq)

    def snapshot(self) -> dict[str, list[int]]:
        with self.lock:
            return {c: list(v) for c, v in self.seqs.items()}

    def close(self):
        self.client.disconnect(timeout=2)


def verdict(sent: dict[str, int], arrivals: dict[str, list[int]]) -> tuple[int, int, int]:
    """(lost, duplicates, first arrivals after a later sequence's) over all channels."""
    lost = dups = reordered = 0
    for c, n in sent.items():
        got = arrivals[c]
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


@pytest.mark.parametrize("fault", ["none", "node-stopped"])
def test_partition_mode_2000_per_second_over_200_channels_nothing_lost_in_order(own_cluster, pusher, workdir, members,
                                                                               fault):
    # The rules follow the [bridge.cluster] table (member_config): its mode first.
    started = start_members(members, own_cluster, pusher, workdir, 'mqtt_to_pusher = "partition"\n' + RULE)
    assert 'mqtt_to_pusher = "partition"' in (workdir / "cluster.conf").read_text()
    wait_until(lambda: [broker_node(m, own_cluster) for m in started] == [1, 2, 1], 30, 0.2, "members on their nodes")
    wait_until(lambda: all(m.readyz()[0] == 200 for m in started), 30, 0.2, "every member ready")
    # Every member counts the three (each settles join_settle after it saw the others): no channel moves now.
    members_metric = 'pusher_mqtt_bridge_cluster_members{bridge="e2e"}'
    wait_until(lambda: all(m.metric(members_metric) == 3 for m in started), 30, 0.2, "every member counting three")
    # And the membership has settled for the partition too: every member's heartbeat saying it is
    # active has reached the others (a member counts as sending from it: two heartbeat intervals),
    # and the members that sent a channel before its last move have stopped (the 5 s linger).
    time.sleep(2 * 1.0 + 5.0)
    counter = Counter(pusher)
    publisher = Publisher(own_cluster.nodes[1].mqtt_port)
    try:
        publisher.start()
        time.sleep(8)
        if fault == "node-stopped":
            own_cluster.stop_node(0, signal.SIGTERM)
            wait_until(lambda: [broker_node(m, own_cluster) for m in started] == [2, 2, 2], 20, 0.1,
                       "every member on node 2")
            time.sleep(8)
    finally:
        publisher.stop()
    sent = dict(publisher.sent)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(set(v) >= set(range(sent[c])) for c, v in counter.snapshot().items()):
        time.sleep(0.5)
    time.sleep(1.0)  # late duplicates
    counter.close()
    lost, dups, reordered = verdict(sent, counter.snapshot())
    total = sum(sent.values())
    print(f"\npartition mode on ejabberd ({fault}): sent {total}, lost {lost}, duplicates {dups}, reordered {reordered}")
    if dups:
        at = sorted(s for v in counter.snapshot().values() for s in {x for x in v if v.count(x) > 1})
        print(f"duplicated seqs (per channel, 10 a second): first {at[:3]}, median {at[len(at) // 2]}, last {at[-3:]}")
    if lost:
        missing = {c: sorted(set(range(sent[c])) - set(v))[:5] for c, v in counter.snapshot().items() if set(range(sent[c])) - set(v)}
        print(f"missing (first channels, first seqs): {dict(list(missing.items())[:5])} of {len(missing)} channels")
    assert lost == 0
    if fault == "none":
        # Steady members, the traffic started once every member counts three: nothing moves.
        assert reordered == 0
        assert dups == 0
    # With node 1 stopped, order across the cluster is not kept (found by this test, 860 of 34,820
    # first arrivals): m2 times m1 and m3 out and replays 8 s of their channels while they come back
    # through node 2 and send the same channels' newer messages at once (docs/brokers.md).

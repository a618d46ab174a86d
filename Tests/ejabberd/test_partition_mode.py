"""MQTT -> Pusher through a bridge cluster on the two-node ejabberd cluster, which refuses `$share`:
`[bridge.cluster] mqtt_to_pusher = "partition"` (docs/contract.md §8.4). Three members spread
over both nodes as in test_bridge_cluster.py; a publisher on node 2 sends QoS 1 messages at
2,000 a second over 200 channels (`{"seq": n}` per channel), counted by a pysher subscriber on
every channel: nothing lost, each channel's first arrivals in order across the cluster, the
duplicates counted -- in steady state; while node 1 is stopped under the traffic (its two members
fail over to node 2), nothing lost, and the reordering measured (not kept: see the end of the test).
"""

from __future__ import annotations

import signal
import time

import pytest

from bridge_testkit.ejabberd import PASSWORD, USERNAME
from bridge_testkit.harness import rule, wait_until
from bridge_testkit.sequenced import SequencedCounter, SequencedPublisher, verdict
from test_bridge_cluster import broker_node, members, start_members  # noqa: F401 (a fixture)

CHANNELS = [f"pm-{n:03d}" for n in range(200)]
RATE = 2000.0
RULE = rule("m2p", "mqtt", topic="pm/+", channel="pm-{1}", event="tagged", qos=1)


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
    counter = SequencedCounter(pusher, CHANNELS, reconnect_interval=10)
    publisher = SequencedPublisher(own_cluster.nodes[1].mqtt_port, {c: f"pm/{c[3:]}" for c in CHANNELS}, RATE,
                                   username=USERNAME, password=PASSWORD, batch=20)
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

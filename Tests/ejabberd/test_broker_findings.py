"""What a bridge cluster relies on (docs/contract.md §7.4), checked on a two-node ejabberd 23.01
cluster: each test is one finding of docs/brokers.md ("ejabberd"), and asserts what the broker
does today, so a new ejabberd that behaves otherwise fails here and the page is updated."""

from __future__ import annotations

from mqtt5 import V5, unique, wait_disconnect

SHARED_NOT_SUPPORTED = 0x9E
SESSION_TAKEN_OVER = 0x8E


def test_shared_subscriptions_are_announced_unavailable_and_a_share_filter_ends_the_connection(shared_cluster):
    node1 = shared_cluster.nodes[0]
    client = V5(node1.mqtt_port)
    # CONNACK says so: Shared Subscription Available = 0.
    assert client.connack_property("SharedSubscriptionAvailable") == 0
    # A $share filter is not answered with a SUBACK: the broker sends DISCONNECT 0x9E and closes.
    mid = client.subscribe(f"$share/group/{unique('t')}/#", wait=False)
    assert wait_disconnect(client) == SHARED_NOT_SUPPORTED
    assert mid not in client.subacks
    client.drop()


def test_a_retained_message_is_served_only_by_the_node_it_was_published_on(shared_cluster):
    node1, node2 = shared_cluster.nodes
    base = unique("retained")
    topic = f"{base}/record"
    publisher = V5(node1.mqtt_port)
    live2 = V5(node2.mqtt_port)
    live2.subscribe(f"{base}/#")
    publisher.publish(topic, b"record", retain=True)

    # Live delivery crosses nodes (the retain flag cleared, as for any live message).
    [live] = live2.wait_message(topic)
    assert live.payload == b"record" and not live.retain

    def retained_seen(port: int) -> list[bytes]:
        fresh = V5(port)
        fresh.subscribe(f"{base}/#")
        fresh.settle(f"{base}/marker")
        fresh.close()
        return [m.payload for m in fresh.received(topic) if m.retain]

    assert retained_seen(node1.mqtt_port) == [b"record"]
    # A new subscriber on node 2 is not sent it, though Mnesia holds it on both nodes.
    assert retained_seen(node2.mqtt_port) == []

    # A zero-length retained message deletes it (published on either node), and subscribers see
    # the deletion live.
    other = f"{base}/on-node2"
    V5(node2.mqtt_port).publish(other, b"second", retain=True)
    publisher.publish(other, b"", retain=True)
    publisher.publish(topic, b"", retain=True)
    assert [m.payload for m in live2.wait_message(topic, 2)] == [b"record", b""]
    assert retained_seen(node1.mqtt_port) == []
    fresh2 = V5(node2.mqtt_port)
    fresh2.subscribe(f"{base}/#")
    fresh2.settle(f"{base}/marker")
    # The record published on node 2 and deleted through node 1 is gone on node 2 too.
    assert [m.payload for m in fresh2.received(other) if m.retain] == []
    for c in (publisher, live2, fresh2):
        c.close()


def test_a_will_with_user_properties_crosses_nodes_and_a_retained_empty_will_deletes_the_record(shared_cluster):
    node1, node2 = shared_cluster.nodes
    base = unique("will")
    topic = f"{base}/members/a"
    watcher = V5(node2.mqtt_port)
    watcher.subscribe(f"{base}/#")
    properties = [("incarnation", "i-123"), ("started_at", "1764340000000")]
    member = V5(node1.mqtt_port, clean_start=True, session_expiry=60, will=(topic, b"", 1, True, properties))
    member.publish(topic, b'{"instance":"a"}', retain=True)
    watcher.wait_message(topic)

    member.drop()
    will = watcher.wait_message(topic, 2)[1]
    assert will.payload == b""
    assert list(will.properties.UserProperty) == properties

    fresh = V5(node1.mqtt_port)
    fresh.subscribe(f"{base}/#")
    fresh.settle(f"{base}/marker")
    assert [m for m in fresh.received(topic) if m.retain] == []
    for c in (watcher, fresh):
        c.close()


def test_a_persistent_session_resumes_on_the_same_node_and_on_the_other_node(shared_cluster):
    node1, node2 = shared_cluster.nodes
    base = unique("session")
    client_id = unique("persistent")
    publisher = V5(node2.mqtt_port)

    first = V5(node1.mqtt_port, client_id, clean_start=True, session_expiry=300)
    first.subscribe(f"{base}/#")
    first.drop()
    publisher.publish(f"{base}/while-away-1", b"1")

    again = V5(node1.mqtt_port, client_id, clean_start=False, session_expiry=300)
    assert again.connack[0] is True  # session present
    assert again.wait_message(f"{base}/while-away-1")[0].payload == b"1"
    again.drop()
    publisher.publish(f"{base}/while-away-2", b"2")

    # The session moves with the client to the other node (Mnesia shares the session table).
    moved = V5(node2.mqtt_port, client_id, clean_start=False, session_expiry=300)
    assert moved.connack[0] is True
    assert moved.wait_message(f"{base}/while-away-2")[0].payload == b"2"
    moved.settle(f"{base}/marker")
    assert [m.payload for m in moved.received(f"{base}/while-away-1")] == []  # not delivered twice
    for c in (moved, publisher):
        c.close()


def test_no_local_keeps_a_client_s_own_messages_from_it(shared_cluster):
    node1, node2 = shared_cluster.nodes
    base = unique("nolocal")
    me = V5(node1.mqtt_port)
    me.subscribe(f"{base}/data", no_local=True)
    me.subscribe(f"{base}/marker")
    other = V5(node2.mqtt_port)
    other.subscribe(f"{base}/data")
    me.publish(f"{base}/data", b"mine")
    assert other.wait_message(f"{base}/data")[0].payload == b"mine"
    me.settle(f"{base}/marker")
    assert me.received(f"{base}/data") == []
    other.publish(f"{base}/data", b"theirs")
    assert [m.payload for m in me.wait_message(f"{base}/data")] == [b"theirs"]
    for c in (me, other):
        c.close()


def test_qos_1_messages_cross_nodes_each_once(shared_cluster):
    node1, node2 = shared_cluster.nodes
    topic = unique("qos1")
    subscriber = V5(node2.mqtt_port)
    assert subscriber.subscribe(topic) in subscriber.subacks
    publisher = V5(node1.mqtt_port)
    for i in range(1000):
        publisher.client.publish(topic, str(i).encode(), qos=1)
    got = subscriber.wait_message(topic, 1000, timeout=30)
    assert sorted(int(m.payload) for m in got) == list(range(1000))
    assert {m.qos for m in got} == {1}
    for c in (subscriber, publisher):
        c.close()


def test_packet_sizes(shared_cluster):
    node1, node2 = shared_cluster.nodes
    base = unique("size")
    # No Maximum Packet Size in CONNACK: the broker takes any size (its listener has no max_payload_size).
    assert V5(node1.mqtt_port).connack_property("MaximumPacketSize") is None

    # 256 KiB published on node 1 reaches each of three subscribers on node 2.
    remote = [V5(node2.mqtt_port) for _ in range(3)]
    for c in remote:
        c.subscribe(f"{base}/#")
    quarter = bytes(range(256)) * 1024
    publisher = V5(node1.mqtt_port)
    publisher.publish(f"{base}/quarter", quarter)
    for c in remote:
        assert c.wait_message(f"{base}/quarter")[0].payload == quarter

    # 1 MiB on one node reaches every subscriber there -- a client's own Maximum Packet Size
    # (1 KiB, MQTT 5 §3.1.2.11.4) is not honoured: the message is sent to it all the same.
    local = [V5(node1.mqtt_port), V5(node1.mqtt_port, max_packet=1024)]
    for c in local:
        c.subscribe(f"{base}/#")
    mib = bytes(range(256)) * 4096
    publisher.publish(f"{base}/mib", mib)
    for c in local:
        assert c.wait_message(f"{base}/mib")[0].payload == mib
    # Not asserted: on the other node, messages from about 512 KiB up reached only some of several
    # subscribers in every probe so far (docs/brokers.md, "Packet sizes").
    for c in remote + local + [publisher]:
        c.close()


def test_a_second_connection_with_the_same_client_id_on_the_other_node_takes_the_session_over(shared_cluster):
    node1, node2 = shared_cluster.nodes
    client_id = unique("dup")
    base = unique("takeover")
    watcher = V5(node1.mqtt_port)
    watcher.subscribe(f"{base}/#")
    first = V5(node1.mqtt_port, client_id, session_expiry=300, will=(f"{base}/will", b"gone", 1, False, []))
    second = V5(node2.mqtt_port, client_id, clean_start=False, session_expiry=300)
    assert wait_disconnect(first) == SESSION_TAKEN_OVER
    assert second.connack[1].value == 0 and second.connack[0] is True  # the session moved with it
    # The taken-over connection's Will is published.
    assert watcher.wait_message(f"{base}/will")[0].payload == b"gone"
    first.drop()
    for c in (second, watcher):
        c.close()


def test_a_session_held_by_a_stopped_node_is_gone_on_the_other_node(own_cluster):
    node1, node2 = own_cluster.nodes
    client_id = unique("stranded")
    first = V5(node1.mqtt_port, client_id, session_expiry=300)
    first.subscribe(f"{client_id}/#")
    own_cluster.stop_node(0)
    wait_disconnect(first)
    first.drop()
    # The session lived in node 1's processes: node 2 starts a new one (session present = 0).
    moved = V5(node2.mqtt_port, client_id, clean_start=False, session_expiry=300)
    assert moved.connack[0] is False
    moved.close()

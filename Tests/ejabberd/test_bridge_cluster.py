"""A bridge cluster (docs/contract.md §7.4) on a two-node ejabberd 23.01 cluster: three daemons from
ONE config file, spread over the nodes through `[bridge.mqtt] hosts` (members 1 and 3 list node 1
first, member 2 node 2; all list both), pusher-local, 500 Pusher -> MQTT channels.

"Held by exactly one" is pusher-local's view (its connection records), as in Tests/e2e/test_cluster.py.
MQTT -> Pusher through a cluster needs `$share`, which ejabberd refuses: here only the refusal is
checked (the bridge says so and stays connected); partition mode (`mqtt_to_pusher = "partition"`,
not in this branch) is what such a broker needs.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

from bridge_testkit.ejabberd import PASSWORD, USERNAME
from bridge_testkit.harness import ClusterMember, bridge_config, holders, pusher_connections, rule, wait_until
from mqtt5 import V5

GROUP = "ejabberd"
CHANNELS = [f"ej-{n:03d}" for n in range(500)]
TOPIC = "ejabberd/p2m"
HELD = 'pusher_mqtt_bridge_cluster_channels_held{bridge="e2e"}'
MEMBERS = 'pusher_mqtt_bridge_cluster_members{bridge="e2e"}'
KILL_GOAL_S = 5.0  # docs/contract.md §7.4 "failover"
NODE_GOAL_S = 10.0  # a broker node stopped: its members on the other node, their channels held again

CLUSTER = f"""
[bridge.cluster]
group = "{GROUP}"
instance = "${{BRIDGE_INSTANCE}}"
"""


def member_config(pusher, workdir, rules: str) -> str:
    """Tests/e2e/test_cluster.py's cluster_config, with the broker given as `hosts` from the
    environment (each member its own order) and ejabberd's user name and password."""
    config = bridge_config(pusher, SimpleNamespace(port=1), workdir, CLUSTER + rules)
    mqtt = 'host = "127.0.0.1"\nport = 1\nclient_id'
    assert mqtt in config
    hosts = (f'hosts = ["${{MQTT_FIRST}}", "${{MQTT_SECOND}}"]\nusername = "{USERNAME}"\n'
             f'password = "{PASSWORD}"\nclient_id')
    return (config.replace(mqtt, hosts)
            .replace('metrics = ""', 'metrics = "127.0.0.1:${METRICS_PORT}"')
            .replace('log_level = "debug"', 'log_level = "info"'))


def p2m_rules(channels) -> str:
    return "".join(rule(f"p2m-{c}", "pusher", channel=c, events=["tagged"], topic=TOPIC + "/{channel}", qos=1)
                   for c in channels)


@pytest.fixture
def members():
    started: list[ClusterMember] = []
    yield started
    threads = [threading.Thread(target=m.stop, kwargs={"timeout": 10}) for m in started]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    import sys
    for m in started:
        sys.stderr.write(f"\n----- {m.name} log (tail) -----\n{m.log()[-3000:]}\n")


def start_members(started, cluster, pusher, workdir, rules: str, names=("m1", "m2", "m3")) -> list[ClusterMember]:
    path = workdir / "cluster.conf"
    path.write_text(member_config(pusher, workdir, rules))
    node1, node2 = (n.address for n in cluster.nodes)
    for name in names:
        first, second = (node2, node1) if name == "m2" else (node1, node2)
        member = ClusterMember(workdir, path, name, env={"MQTT_FIRST": first, "MQTT_SECOND": second})
        started.append(member.start())
    return started


def settled(pusher, members: int) -> bool:
    """Each channel held by exactly one connection, and `members` connections share them."""
    counts = holders(pusher, CHANNELS)
    if any(n != 1 for n in counts.values()):
        return False
    wanted = set(CHANNELS)
    return len([r for r in pusher_connections(pusher) if wanted & set(r["channels"])]) == members


def broker_node(member: ClusterMember, cluster) -> int | None:
    """Which ejabberd node (1-based) the member's MQTT connection goes to, from the kernel's
    socket table (`ss`), None while it has none."""
    out = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True, text=True).stdout
    ports = {n.mqtt_port: i + 1 for i, n in enumerate(cluster.nodes)}
    for line in out.splitlines():
        if f"pid={member.pid}," not in line:
            continue
        peer = line.split()[3] if len(line.split()) > 3 else ""
        m = re.search(r":(\d+)$", peer)
        if m and int(m.group(1)) in ports:
            return ports[int(m.group(1))]
    return None


def held_metrics(members) -> list[float | None]:
    return [m.metric(HELD) for m in members]


def trigger_each_channel(pusher, tag: str):
    client = pusher.http_client()
    for start in range(0, len(CHANNELS), 100):
        client.trigger(CHANNELS[start:start + 100], "tagged", {"tag": tag})


def test_three_members_on_two_nodes_hold_500_channels_once_and_a_killed_member_s_are_held_again_within_5_s(
        own_cluster, pusher, workdir, members):
    started = start_members(members, own_cluster, pusher, workdir, p2m_rules(CHANNELS))
    assert wait_until(lambda: [broker_node(m, own_cluster) for m in started] == [1, 2, 1], 30, 0.2,
                      "members 1 and 3 on node 1, member 2 on node 2")
    wait_until(lambda: settled(pusher, 3), 60, 0.2, "each of 500 channels held by exactly one of three connections")
    wait_until(lambda: sum(h or 0 for h in held_metrics(started)) == len(CHANNELS)
               and all(m.metric(MEMBERS) == 3 for m in started), 10, 0.2, "the members' metrics to agree")
    print(f"\nheld per member: {held_metrics(started)}")

    # One event on every channel reaches MQTT once, seen from either node.
    collectors = [V5(n.mqtt_port) for n in own_cluster.nodes]
    for c in collectors:
        c.subscribe(f"{TOPIC}/#")
    trigger_each_channel(pusher, "first")
    for c in collectors:
        wait_until(lambda c=c: len(c.received()) >= len(CHANNELS), 30, 0.1, "500 messages")
    time.sleep(1.0)  # late duplicates
    for c in collectors:
        topics = sorted(m.topic for m in c.received())
        assert topics == sorted(f"{TOPIC}/{ch}" for ch in CHANNELS), f"{len(topics)} messages, {len(set(topics))} topics"
        assert all(json.loads(m.payload)["tag"] == "first" for m in c.received())

    # SIGKILL member 2: its channels are held again, each by one connection, within 5 s.
    victim = started[1]
    before = {r["socket_id"]: set(r["channels"]) & set(CHANNELS) for r in pusher_connections(pusher)
              if set(r["channels"]) & set(CHANNELS)}
    killed = time.monotonic()
    victim.kill()

    def orphans_held():
        now = {r["socket_id"] for r in pusher_connections(pusher)}
        gone = [s for s in before if s not in now]
        return len(gone) == 1 and all(n == 1 for n in holders(pusher, CHANNELS).values()) and before[gone[0]]

    orphans = wait_until(orphans_held, 15, 0.05, "the killed member's channels to be held again")
    window = time.monotonic() - killed
    print(f"failover after SIGKILL of m2: {len(orphans)} channels held again after {window:.2f} s")
    assert window <= KILL_GOAL_S, f"{len(orphans)} channels took {window:.2f} s (goal {KILL_GOAL_S} s)"
    for c in collectors:
        c.close()


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "killed"])
def test_a_broker_node_stopped_its_members_move_to_the_other_node_and_hold_their_channels_within_10_s(
        own_cluster, pusher, workdir, members, how):
    started = start_members(members, own_cluster, pusher, workdir, p2m_rules(CHANNELS))
    wait_until(lambda: [broker_node(m, own_cluster) for m in started] == [1, 2, 1], 30, 0.2, "members on their nodes")
    wait_until(lambda: settled(pusher, 3), 60, 0.2, "each of 500 channels held by exactly one of three connections")

    stopped = time.monotonic()
    own_cluster.stop_node(0, how)
    node_down = time.monotonic() - stopped
    wait_until(lambda: [broker_node(m, own_cluster) for m in started] == [2, 2, 2], NODE_GOAL_S * 2, 0.1,
               "every member connected to node 2")
    moved = time.monotonic() - stopped
    wait_until(lambda: settled(pusher, 3) and all((h or 0) > 0 for h in held_metrics(started)), NODE_GOAL_S * 3, 0.1,
               "each channel held once again, shared by the three members")
    window = time.monotonic() - stopped
    print(f"\nnode 1 {'stopped' if how == signal.SIGTERM else 'killed'}: down after {node_down:.2f} s, members on "
          f"node 2 after {moved:.2f} s, every channel held once by three members after {window:.2f} s; "
          f"held per member {held_metrics(started)}")
    assert window <= NODE_GOAL_S, f"channels held again after {window:.2f} s (goal {NODE_GOAL_S} s)"

    collector = V5(own_cluster.nodes[1].mqtt_port)
    collector.subscribe(f"{TOPIC}/#")
    trigger_each_channel(pusher, "after")
    wait_until(lambda: len(collector.received()) >= len(CHANNELS), 30, 0.1, "500 messages after the failover")
    time.sleep(1.0)  # late duplicates
    assert sorted(m.topic for m in collector.received()) == sorted(f"{TOPIC}/{ch}" for ch in CHANNELS)
    collector.close()


def test_a_shared_subscription_is_refused_clearly_and_the_member_stays_connected(own_cluster, pusher, workdir, members):
    """A cluster's MQTT -> Pusher rule subscribes `$share/<group>/<filter>`: ejabberd's CONNACK says
    Shared Subscription Available = 0, so the client does not send it (ejabberd would end the
    connection), and the daemon reports it (SharedSubscriptionRefusal.swift)."""
    m2p = rule("m2p", "mqtt", topic="ejabberd/m2p/+", channel="ej-m2p-{1}", event="tagged", qos=1)
    [member] = start_members(members, own_cluster, pusher, workdir, p2m_rules(CHANNELS[:5]) + m2p, names=("m1",))
    problem = ("the broker refused the shared subscription $share/ejabberd/ejabberd/m2p/+ (reason 0x9E: "
               "broker refused the subscription")
    advice = "this broker does not support shared subscriptions; use [bridge.cluster] mqtt_to_pusher = \"partition\""

    def reported():
        status, body = member.readyz()
        return status == 503 and problem in body and advice in body and body

    body = wait_until(reported, 30, 0.2, "/readyz to report the refused shared subscription")
    print(f"\n/readyz: {body.strip()}")
    errors = 'pusher_mqtt_bridge_errors_total{bridge="e2e",kind="subscribe"}'
    assert (member.metric(errors) or 0) >= 1
    log = member.log()
    refused = [line for line in log.splitlines() if "MQTT refused the shared subscription" in line]
    assert refused and "$share/ejabberd/ejabberd/m2p/+" in refused[0] and "0x9E" in refused[0], refused
    # The connection stays up: one CONNACK, no disconnect over the filter; the channels are held.
    wait_until(lambda: settled_subset(pusher, CHANNELS[:5]), 30, 0.2, "the 5 channels held")
    assert member.metric('pusher_mqtt_bridge_connection_up{bridge="e2e",side="mqtt"}') == 1
    assert member.log().count("mqtt connected") == 1


def settled_subset(pusher, channels) -> bool:
    return all(n == 1 for n in holders(pusher, channels).values())

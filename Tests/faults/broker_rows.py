"""Fault-matrix row for broker failover (docs/contract.md §8.4, `[bridge.mqtt] hosts`), run by
matrix.py on the common rig.

Row (expectation in `rows()`, written before running):
- `mqtt-node-failover`: `hosts = [node 1, node 2]`, both leading to the rig's one mosquitto (node 1
  through a proxy of its own, node 2 through the rig's MQTT proxy), so the session is shared as in a
  broker cluster. Node 1's proxy resets every connection for 5 s (the bridge must move to node 2),
  then passes again and node 2's resets for 5 s (back to node 1); three rounds. Expected: nothing
  lost either way and order kept (the broker keeps the session's QoS 1 messages; the bridge's
  buffer keeps Pusher -> MQTT); each switch within the reconnect backoff (the rig's initial delay is
  200 ms, its max_delay 2 s: a switch takes at most 2.5 s), and since the switch happens while the
  node is down, both directions are back to normal within 2 s and 3 s of each fault's end.
"""

from __future__ import annotations

import re
import time
import types
from datetime import datetime

from bridge_testkit.faults.checker import Expectation
from bridge_testkit.faults.proxy import TCPFaultProxy

ROUNDS = 3
DOWN_S = 5.0
NODE_1: dict = {}


def two_nodes(config: str) -> str:
    """Node 1: a proxy of its own (to mosquitto once the row starts); node 2: the rig's MQTT proxy."""
    match = re.search(r'\[bridge\.mqtt\]\nhost = "127\.0\.0\.1"\nport = (\d+)\n', config)
    assert match, "the rig's [bridge.mqtt] table"
    port = int(match.group(1))
    proxy = TCPFaultProxy(port, name="mqtt-node-1")
    NODE_1["proxy"] = proxy
    return config.replace(match.group(0), f'[bridge.mqtt]\nhosts = ["127.0.0.1:{proxy.port}", "127.0.0.1:{port}"]\n')


def node_losses(rig) -> list[float]:
    node1 = NODE_1.pop("proxy")
    rig.closers.append(node1.close)
    # Made before the broker's port was known: from now on straight to mosquitto, beside node 2.
    node1.set_upstream(rig.broker.port)
    ends = []
    for _ in range(ROUNDS):
        for down, other in ((node1, rig.mqtt_proxy), (rig.mqtt_proxy, node1)):
            down.set_mode("reset")
            time.sleep(DOWN_S)
            down.set_mode("pass")
            ends.append(time.monotonic())
            time.sleep(1.0)
    connected = rig.bridge.log().count("info pusher-mqtt-bridge: connected [")
    rig.observations.append(f"{connected} MQTT connections made over {2 * ROUNDS} node losses")
    return ends


def switch_times(log: str) -> list[float]:
    """Seconds from each lost MQTT connection to the next one made (the daemon's own log times)."""
    times, lost = [], None
    for line in log.splitlines():
        if " info pusher-mqtt-bridge: " not in line:
            continue
        at = datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00")).timestamp()
        if "disconnected; reconnecting after backoff" in line and lost is None:
            lost = at
        elif "pusher-mqtt-bridge: connected [" in line and lost is not None:
            times.append(at - lost)
            lost = None
    return times


def every_loss_moved_the_bridge(rig, p2m_reports) -> None:
    log = rig.bridge.log()
    connected = log.count("info pusher-mqtt-bridge: connected [")
    if connected < 2 * ROUNDS + 1:
        rig.failures.append(f"only {connected} MQTT connections for {2 * ROUNDS} node losses")
    switches = switch_times(log)
    rig.observations.append("from a node's loss to the next node: " + ", ".join(f"{t:.2f} s" for t in switches)
                            + " (the reconnect backoff, growing while connections last less than stable_after)")
    if switches and max(switches) > 2.5:
        rig.failures.append(f"a switch took {max(switches):.2f} s, more than the rig's max_delay (2 s) and a connect")


def rows(matrix: types.ModuleType) -> list:
    return [
        matrix.Row("mqtt-node-failover", f"hosts = [node 1, node 2] on one mosquitto: each node resets every "
                                         f"connection for {DOWN_S:g} s in turn, {ROUNDS} rounds",
                   Expectation(0, max_recovery_s=2,
                               why="docs/contract.md §8.4: the next node at the usual backoff; the buffer keeps "
                                   "what arrives meanwhile: 0 lost, in order"),
                   Expectation(0, max_recovery_s=3,
                               why="docs/contract.md §8.4: the shared session keeps QoS 1 messages; 0 lost, in order"),
                   node_losses, config=two_nodes, check=every_loss_moved_the_bridge),
    ]

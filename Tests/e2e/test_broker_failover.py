"""Broker failover (docs/contract.md §8.4, `[bridge.mqtt] hosts`): the daemon against two mosquittos
standing in for two nodes of a broker cluster. Third-party clients only: the official `pusher`
library triggers, paho subscribes and publishes, pysher listens."""

from __future__ import annotations

import json

from bridge_testkit.clients import PysherListener, wait_bridge_subscribed
from bridge_testkit.harness import (MQTTCollector, Mosquitto, bridge_config, publish, retained, rule, wait_until)

STATUS = "pusher-mqtt-bridge/e2e/status"
RULES = (rule("out", "pusher", channel="fo", events=["tick"], topic="out/{channel}", qos=1, payload="data")
         + rule("back", "mqtt", topic="in/+", channel="back-{1}", event="e", qos=1, payload="data"))


def failover_config(pusher, first: Mosquitto, second: Mosquitto, workdir) -> str:
    config = bridge_config(pusher, first, workdir, RULES)
    single = f'[bridge.mqtt]\nhost = "127.0.0.1"\nport = {first.port}\n'
    assert single in config
    return config.replace(single, f'[bridge.mqtt]\nhosts = ["127.0.0.1:{first.port}", "127.0.0.1:{second.port}"]\n')


def online(broker: Mosquitto) -> bool:
    return retained(broker.port, STATUS, 0.3).get(STATUS) == b"online"


def sequences(collector: MQTTCollector) -> list[int]:
    return [json.loads(p)["seq"] for p in collector.payloads("out/fo")]


def test_a_lost_node_fails_over_to_the_next_and_back(pusher, broker, workdir, bridges):
    """hosts = [m1, m2]. Expected: the bridge connects to m1 (the first that answers) and publishes
    `online` there; m1 stopped → within 5 s it is connected to m2 (`online` retained there, a
    "connected" log line naming m2's port), publishes Pusher → MQTT there, and its MQTT → Pusher
    subscription is set up again on m2 (a message published to m2 reaches pysher); every event
    triggered before, during and after the switch reaches MQTT at least once, in order on each
    node. m1 back and m2 stopped → it goes back to m1."""
    second = Mosquitto(workdir).start()
    try:
        bridge = bridges(failover_config(pusher, broker, second, workdir))
        wait_until(lambda: online(broker), 15, 0.2, "online on the first node")
        wait_bridge_subscribed(pusher, "fo")
        on_first = MQTTCollector(broker.port, ["out/#"])
        on_second = MQTTCollector(second.port, ["out/#"])
        http = pusher.http_client()
        for seq in range(20):
            http.trigger(["fo"], "tick", json.dumps({"seq": seq}))
        wait_until(lambda: len(sequences(on_first)) >= 20, 10, 0.1, "20 events on the first node")

        broker.stop()
        for seq in range(20, 30):  # while the bridge is between nodes: kept in its buffer
            http.trigger(["fo"], "tick", json.dumps({"seq": seq}))
        wait_until(lambda: online(second), 5, 0.1, "online on the second node within 5 s of the first's loss")
        assert f'mqtt.port={second.port}' in bridge.log(), "no log line names the second node"
        for seq in range(30, 40):
            http.trigger(["fo"], "tick", json.dumps({"seq": seq}))
        wait_until(lambda: set(sequences(on_first)) | set(sequences(on_second)) >= set(range(40)), 10, 0.1,
                   "every event on one of the nodes")
        for got in (sequences(on_first), sequences(on_second)):
            assert got == sorted(got), got
        assert sequences(on_second)[-10:] == list(range(30, 40))

        listener = PysherListener(pusher, "back-x", ["e"])
        wait_until(lambda: publish(second.port, "in/x", "via-second") or "via-second" in listener.data(), 15, 0.3,
                   "MQTT -> Pusher through the second node")
        listener.close()

        on_first.close()
        on_second.close()
        broker.start()
        second.stop()
        wait_until(lambda: online(broker), 10, 0.2, "online on the first node again")
        back = MQTTCollector(broker.port, ["out/#"])
        http.trigger(["fo"], "tick", json.dumps({"seq": 40}))
        wait_until(lambda: 40 in sequences(back), 10, 0.1, "an event on the first node again")
        back.close()
    finally:
        second.stop()


def test_check_lists_the_nodes_and_refuses_hosts_beside_host(pusher, broker, workdir):
    """`check` shows the failover nodes; `hosts` beside `host` is refused with its position (exit 78)."""
    import subprocess
    from bridge_testkit.harness import binary
    second_port = broker.port + 1
    config = workdir / "bridges.conf"
    text = bridge_config(pusher, broker, workdir, RULES)
    single = f'[bridge.mqtt]\nhost = "127.0.0.1"\nport = {broker.port}\n'
    config.write_text(text.replace(single, f'[bridge.mqtt]\nhosts = ["127.0.0.1:{broker.port}", "127.0.0.1:{second_port}"]\n'))
    ok = subprocess.run([binary("BRIDGE_BIN", "pusher-mqtt-bridge"), "check", "--config", str(config)],
                        capture_output=True, text=True, timeout=30)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert f"failover to 127.0.0.1:{second_port} in turn" in ok.stdout, ok.stdout
    config.write_text(text.replace(single, single + f'hosts = ["127.0.0.1:{second_port}"]\n'))
    bad = subprocess.run([binary("BRIDGE_BIN", "pusher-mqtt-bridge"), "check", "--config", str(config)],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 78, bad.stdout + bad.stderr
    assert "bridge.e2e.mqtt.host: set either hosts" in bad.stdout + bad.stderr

"""Home Assistant MQTT discovery of the bridge itself (docs/contract.md §8.3), seen from the broker
with paho-mqtt only: the retained configs at their exact topics, the retained state, a republish
after Home Assistant's birth message, the removal by a reload that turns discovery off, and the
config check's refusals. `make test-homeassistant` runs the same against a real Home Assistant."""

from __future__ import annotations

import json
import signal
import time

from bridge_testkit.clients import wait_bridge_subscribed
from bridge_testkit.harness import MQTTCollector, bridge_config, publish, retained, wait_until
from test_flow import PUSHER_TO_MQTT

NODE = "pusher_mqtt_bridge_e2e"
OBJECTS = [
    ("binary_sensor", "mqtt_connection"), ("binary_sensor", "pusher_connection"),
    ("sensor", "pusher_to_mqtt_rate"), ("sensor", "mqtt_to_pusher_rate"),
    ("sensor", "buffered_messages"), ("sensor", "dead_letters"),
]
CONFIG_TOPICS = [f"homeassistant/{component}/{NODE}/{object_id}/config" for component, object_id in OBJECTS]
STATUS = "pusher-mqtt-bridge/e2e/status"
STATE = f"{STATUS}/state"


def configs(port: int) -> dict[str, dict]:
    """The retained discovery configs under `homeassistant/`, parsed (removed ones are absent)."""
    return {topic: json.loads(payload) for topic, payload in retained(port, "homeassistant/#").items()
            if topic.endswith("/config") and payload}


def test_configs_state_birth_and_removal(pusher, broker, workdir, bridges):
    config = bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT, daemon="homeassistant = true")
    bridge = bridges(config)
    wait_bridge_subscribed(pusher, "market-data")

    # The configs, retained, at exactly these topics, each pointing at the state and status topics.
    found = wait_until(lambda: (c := configs(broker.port)) and len(c) == len(CONFIG_TOPICS) and c, 10, 0.2,
                       "the retained configs")
    assert sorted(found) == sorted(CONFIG_TOPICS)
    for (component, object_id), topic in zip(OBJECTS, CONFIG_TOPICS):
        document = found[topic]
        assert document["unique_id"] == f"{NODE}_{object_id}"
        assert document["state_topic"] == STATE
        assert document["availability_topic"] == STATUS
        assert document["device"]["identifiers"] == [NODE]
        assert document["device"]["name"] == "pusher-mqtt-bridge e2e"
        assert document["device"]["sw_version"]
        assert "value_json." in document["value_template"]
        if component == "binary_sensor":
            assert document["device_class"] == "connectivity"

    # The state: retained JSON, both sides up, and a message counted in the next rate.
    state = wait_until(lambda: (s := retained(broker.port, STATE).get(STATE)) and json.loads(s), 10, 0.2, "the state")
    assert state["mqtt_connected"] is True
    assert set(state) == {"mqtt_connected", "pusher_connected", "pusher_to_mqtt_per_second",
                          "mqtt_to_pusher_per_second", "buffered", "dead_letters"}
    wait_until(lambda: json.loads(retained(broker.port, STATE)[STATE])["pusher_connected"] is True, 15, 0.5,
               "the state to say Pusher is connected")
    assert retained(broker.port, STATUS)[STATUS] == b"online"
    assert f"Home Assistant discovery on [bridge=e2e homeassistant.node_id={NODE} homeassistant.prefix=homeassistant]" in bridge.log()

    # Home Assistant's birth message: every config is published again (live, not only retained).
    watcher = MQTTCollector(broker.port, ["homeassistant/+/+/+/config"], client_id="ha-watcher")
    time.sleep(0.5)
    before = len(watcher.snapshot())  # the retained copies at subscribe
    publish(broker.port, "homeassistant/status", "offline")
    time.sleep(0.5)
    assert len(watcher.snapshot()) == before, "Home Assistant's `offline` republished the configs"
    publish(broker.port, "homeassistant/status", "online")
    wait_until(lambda: len([m for m in watcher.snapshot()[before:] if not m.retain]) >= len(CONFIG_TOPICS), 10, 0.1,
               "the configs to be republished after the birth message")
    republished = [m for m in watcher.snapshot()[before:] if not m.retain]
    assert sorted({m.topic for m in republished}) == sorted(CONFIG_TOPICS)
    watcher.close()

    # A reload that turns discovery off removes every config (and the state), connections kept.
    bridge.write_config(config.replace("homeassistant = true", "homeassistant = false"))
    bridge.send_signal(signal.SIGHUP)
    wait_until(lambda: "reloaded" in bridge.log(), 10, 0.1, "the reload")
    wait_until(lambda: configs(broker.port) == {}, 10, 0.2, "the configs to be removed")
    assert STATE not in retained(broker.port, STATE)
    assert "Home Assistant discovery off" in bridge.log()
    assert bridge.log().count("mqtt connected") == 1
    assert "take effect at the next restart" not in bridge.log()

    # Off: a birth message republishes nothing. On again by reload: everything is back.
    publish(broker.port, "homeassistant/status", "online")
    time.sleep(1)
    assert configs(broker.port) == {}
    bridge.write_config(config)
    bridge.send_signal(signal.SIGHUP)
    wait_until(lambda: bridge.log().count("reloaded") == 2, 10, 0.1, "the second reload")
    wait_until(lambda: sorted(configs(broker.port)) == sorted(CONFIG_TOPICS), 10, 0.2, "the configs to be back")
    assert bridge.log().count("mqtt connected") == 1


def test_cluster_member_is_a_device_of_its_own(pusher, broker, workdir, bridges):
    config = bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT,
                           daemon='homeassistant = true\nhomeassistant_prefix = "ha/discovery"',
                           extra_mqtt='\n[bridge.cluster]\ngroup = "g"\ninstance = "node-1"\n')
    bridge = bridges(config)
    node = f"{NODE}_node-1"
    expected = [f"ha/discovery/{c}/{node}/{o}/config" for c, o in OBJECTS] + [
        f"ha/discovery/sensor/{node}/cluster_members/config", f"ha/discovery/sensor/{node}/channels_held/config"]
    found = wait_until(lambda: (c := {t: json.loads(p) for t, p in retained(broker.port, "ha/discovery/#").items()})
                       and len(c) == len(expected) and c, 15, 0.2, "the member's configs")
    assert sorted(found) == sorted(expected)
    member_state = f"{STATUS}/node-1/state"
    assert all(d["state_topic"] == member_state and d["availability_topic"] == f"{STATUS}/node-1" for d in found.values())
    state = wait_until(lambda: (s := retained(broker.port, member_state).get(member_state))
                       and (j := json.loads(s)).get("cluster_members") == 1 and j, 15, 0.5, "the member's state")
    wait_until(lambda: json.loads(retained(broker.port, member_state)[member_state])["channels_held"] == 1, 15, 0.5,
               "the member to report its channel")
    assert state["mqtt_connected"] is True

    # A reload that restarts the member under another instance name: another device; the old one leaves.
    bridge.write_config(config.replace('instance = "node-1"', 'instance = "node-2"'))
    bridge.send_signal(signal.SIGHUP)
    wait_until(lambda: "reloaded" in bridge.log(), 15, 0.1, "the reload")
    renamed = [topic.replace("_node-1/", "_node-2/") for topic in expected]
    def configs_now():
        return sorted(t for t, p in retained(broker.port, "ha/discovery/#").items() if p)
    try:
        wait_until(lambda: configs_now() == sorted(renamed), 15, 0.2, "only node-2's configs")
    except AssertionError:
        raise AssertionError(f"retained configs after the rename: {configs_now()}")


def test_check_refuses_a_bad_prefix_with_its_position(pusher, broker, workdir):
    from bridge_testkit.harness import Bridge
    config = bridge_config(pusher, broker, workdir, PUSHER_TO_MQTT,
                           daemon='homeassistant = "yes"\nhomeassistant_prefix = "home/+/x"')
    bridge = Bridge(workdir, config)
    lines = config.splitlines()
    line_of = {key: lines.index(next(l for l in lines if l.startswith(key))) + 1
               for key in ("homeassistant =", "homeassistant_prefix =")}
    for command in (["check", "--config", str(bridge.config_path)], ["run", "--config", str(bridge.config_path)]):
        result = bridge.cli(*command, timeout=30)
        assert result.returncode == 78, (command, result.returncode, result.stderr[-2000:])
        output = result.stdout + result.stderr
        assert f"{bridge.config_path}:{line_of['homeassistant =']}: error: daemon.homeassistant: expected true or false, found a string" in output
        assert (f"{bridge.config_path}:{line_of['homeassistant_prefix =']}: error: daemon.homeassistant_prefix: "
                "topic contains a wildcard ('+' or '#')") in output

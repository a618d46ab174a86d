"""Home Assistant discovery of the bridge (docs/contract.md §8.3) against a real Home Assistant:
its MQTT integration at the test's mosquitto, the bridge's entities read through its REST API —
device class, state, availability; following a Pusher outage, the bridge's death, a broker outage;
gone after a reload that turns discovery off. `make test-homeassistant`."""

from __future__ import annotations

import signal
import sys
import time

from bridge_testkit.clients import wait_bridge_subscribed
from bridge_testkit.harness import Bridge, Mosquitto, PusherLocal, bridge_config, publish, rule, start_cluster, wait_until
from homeassistant_process import HomeAssistant

BRIDGE = "ha"
NODE = f"pusher_mqtt_bridge_{BRIDGE}"
MQTT_SIDE = f"binary_sensor.{NODE}_mqtt_connection"
PUSHER_SIDE = f"binary_sensor.{NODE}_pusher_connection"
TO_MQTT_RATE = f"sensor.{NODE}_pusher_to_mqtt_rate"
SENSORS = [f"sensor.{NODE}_{name}" for name in ("pusher_to_mqtt_rate", "mqtt_to_pusher_rate", "buffered_messages", "dead_letters")]
EVERY = [MQTT_SIDE, PUSHER_SIDE, *SENSORS]
PRICES = rule("prices", "pusher", channel="market-data", events=["new-price"], topic="dash/prices/{event}", qos=1)
# A channel rendered from the topic: `bad/has space` makes a name Pusher refuses, a dead letter.
COMMANDS = rule("commands", "mqtt", topic="bad/+", channel="{1}", event="command", qos=1)


def test_home_assistant_discovers_follows_and_forgets_the_bridge(tmp_path):
    started = time.monotonic()
    processes = []
    try:
        broker = Mosquitto(tmp_path).start()
        processes.append(broker)
        pusher = PusherLocal(tmp_path, extra=["--activity-timeout", "2"]).start()
        processes.append(pusher)
        hass = HomeAssistant(tmp_path).start()
        processes.append(hass)
        hass.add_mqtt(broker.port)
        setup = time.monotonic() - started

        config = bridge_config(pusher, broker, tmp_path, PRICES + COMMANDS, name=BRIDGE, daemon="homeassistant = true")
        bridge = Bridge(tmp_path, config).start()
        processes.append(bridge)
        wait_bridge_subscribed(pusher, "market-data")

        # Discovered: the right device classes, states and device.
        mqtt_side = hass.wait_state(MQTT_SIDE, "on")
        assert mqtt_side["attributes"]["device_class"] == "connectivity"
        pusher_side = hass.wait_state(PUSHER_SIDE, "on")
        assert pusher_side["attributes"]["device_class"] == "connectivity"
        for entity in SENSORS:
            state = wait_until(lambda: (s := hass.state(entity)) and s["state"] not in ("unknown", "unavailable") and s,
                               20, 0.25, f"{entity} to have a value")
            float(state["state"])
        assert hass.state(f"sensor.{NODE}_dead_letters")["attributes"]["state_class"] == "total_increasing"
        assert hass.state(TO_MQTT_RATE)["attributes"]["unit_of_measurement"] == "msg/s"
        assert hass.template(f"{{{{ device_attr('{MQTT_SIDE}', 'name') }}}}") == f"pusher-mqtt-bridge {BRIDGE}"
        version = bridge.cli("--version").stdout
        assert hass.template(f"{{{{ device_attr('{MQTT_SIDE}', 'sw_version') }}}}") in version
        device = hass.template(f"{{{{ device_id('{MQTT_SIDE}') }}}}")
        assert sorted(hass.template(f"{{{{ device_entities('{device}') | sort | join(',') }}}}").split(",")) == sorted(EVERY)

        # Traffic shows in the rate within one state interval (10 s).
        http = pusher.http_client()
        for n in range(30):
            http.trigger("market-data", "new-price", str(n))
        wait_until(lambda: float(hass.state(TO_MQTT_RATE)["state"]) > 0, 25, 0.5, "the Pusher → MQTT rate to show the traffic")
        # A dead letter is counted.
        publish(broker.port, "bad/has space", "x")
        hass.wait_state(f"sensor.{NODE}_dead_letters", "1", 25)

        # A Pusher outage: the Pusher side goes off at once, on again when it is back.
        port = pusher.port
        pusher.stop()
        hass.wait_state(PUSHER_SIDE, "off", 20)
        assert hass.state(MQTT_SIDE)["state"] == "on"
        pusher = PusherLocal(tmp_path, port=port, extra=["--activity-timeout", "2"]).start()
        processes.append(pusher)
        hass.wait_state(PUSHER_SIDE, "on", 30)

        # The bridge dies: its Last Will (`offline` on the status topic) makes every entity unavailable.
        bridge.kill()
        for entity in EVERY:
            hass.wait_state(entity, "unavailable", 30)
        bridge = Bridge(tmp_path, config).start()
        processes.append(bridge)
        hass.wait_state(MQTT_SIDE, "on", 30)
        hass.wait_state(PUSHER_SIDE, "on", 30)

        # A broker outage: Home Assistant loses MQTT, the entities are unavailable; both come back.
        broker.stop()
        hass.wait_state(MQTT_SIDE, "unavailable", 30)
        broker = Mosquitto(tmp_path, port=broker.port).start()
        processes.append(broker)
        hass.wait_state(MQTT_SIDE, "on", 60)
        hass.wait_state(PUSHER_SIDE, "on", 30)
        # Home Assistant's own birth message, sent when it reconnected, reached the bridge.
        assert "Home Assistant status" in bridge.log()

        # A reload that turns discovery off: the entities and the device are gone, the bridge runs on.
        bridge.write_config(config.replace("homeassistant = true", "homeassistant = false"))
        bridge.send_signal(signal.SIGHUP)
        for entity in EVERY:
            hass.wait_state(entity, None, 30)
        assert hass.template(f"{{{{ device_id('{MQTT_SIDE}') }}}}") == "None"
        assert bridge.running()
        sys.stderr.write(f"\nHome Assistant test: setup {setup:.1f} s, total {time.monotonic() - started:.1f} s\n")
    finally:
        for process in reversed(processes):
            process.stop()
        for process in processes:
            if isinstance(process, (Bridge, HomeAssistant)):
                sys.stderr.write(f"\n----- {process.name} log -----\n{process.log()[-6000:]}\n")


CLUSTER = """
[bridge.cluster]
group = "g"
instance = "${BRIDGE_INSTANCE}"
"""
CLUSTER_CHANNELS = [f"cluster-{n}" for n in range(4)]


def test_each_cluster_member_is_a_device(tmp_path):
    """In a cluster every member is a device of its own, with the members and the channels it holds;
    a member that dies is unavailable (a survivor writes its `offline`), the survivor holds every channel."""
    processes = []
    try:
        broker = Mosquitto(tmp_path).start()
        processes.append(broker)
        pusher = PusherLocal(tmp_path, extra=["--activity-timeout", "2"]).start()
        processes.append(pusher)
        hass = HomeAssistant(tmp_path).start()
        processes.append(hass)
        hass.add_mqtt(broker.port)
        rules = "".join(rule(f"r-{c}", "pusher", channel=c, topic="cluster/{channel}", qos=1) for c in CLUSTER_CHANNELS)
        config = bridge_config(pusher, broker, tmp_path, CLUSTER + rules, name=BRIDGE, daemon="homeassistant = true")
        members = start_cluster(tmp_path, config, ["a", "b"])
        processes.extend(members)

        def sensor(member: str, name: str) -> str:
            return f"sensor.{NODE}_{member}_{name}"

        for member in ("a", "b"):
            hass.wait_state(sensor(member, "cluster_members"), "2", 30)
            mqtt_side = hass.wait_state(f"binary_sensor.{NODE}_{member}_mqtt_connection", "on", 30)
            assert hass.template(f"{{{{ device_attr('{mqtt_side['entity_id']}', 'name') }}}}") == \
                f"pusher-mqtt-bridge {BRIDGE} ({member})"
        wait_until(lambda: sum(int(float(hass.state(sensor(m, "channels_held"))["state"])) for m in ("a", "b"))
                   == len(CLUSTER_CHANNELS), 30, 0.5, "the members' channels to add up")

        members[1].kill()
        hass.wait_state(f"binary_sensor.{NODE}_b_mqtt_connection", "unavailable", 30)
        hass.wait_state(sensor("a", "cluster_members"), "1", 30)
        hass.wait_state(sensor("a", "channels_held"), str(len(CLUSTER_CHANNELS)), 30)
    finally:
        for process in reversed(processes):
            process.stop()
        for process in processes:
            if isinstance(process, (Bridge, HomeAssistant)):
                sys.stderr.write(f"\n----- {process.name} log -----\n{process.log()[-3000:]}\n")

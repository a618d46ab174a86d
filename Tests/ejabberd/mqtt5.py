"""A paho-mqtt MQTT 5 client for the ejabberd findings: every CONNACK, SUBACK, message and DISCONNECT
recorded, waits on events (never on time), and an abrupt drop (the socket closed without DISCONNECT,
as a killed process's is)."""

from __future__ import annotations

import threading
import uuid

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from bridge_testkit.ejabberd import PASSWORD, USERNAME
from bridge_testkit.harness import wait_until


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class V5:
    def __init__(self, port: int, client_id: str | None = None, *, clean_start: bool = True,
                 session_expiry: int | None = None, will: tuple | None = None, max_packet: int | None = None):
        """`will`: (topic, payload, qos, retain, [(name, value), …] user properties)."""
        self.client_id = client_id or unique("c")
        self.lock = threading.Lock()
        self.connacks: list = []
        self.subacks: dict[int, list] = {}
        self.messages: list = []
        self.disconnects: list = []
        self.connected = threading.Event()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=self.client_id, protocol=mqtt.MQTTv5)
        self.client.username_pw_set(USERNAME, PASSWORD)
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = self._on_subscribe
        self.client.on_message = self._on_message
        self.client.on_disconnect = self._on_disconnect
        if will:
            topic, payload, qos, retain, user_properties = will
            props = Properties(PacketTypes.WILLMESSAGE)
            props.UserProperty = list(user_properties)
            self.client.will_set(topic, payload, qos, retain, properties=props)
        props = Properties(PacketTypes.CONNECT)
        if session_expiry is not None:
            props.SessionExpiryInterval = session_expiry
        if max_packet is not None:
            props.MaximumPacketSize = max_packet
        self.client.reconnect_delay_set(60, 60)  # no reconnect while a test looks at a drop
        self.client.connect("127.0.0.1", port, keepalive=30, clean_start=clean_start, properties=props)
        self.client.loop_start()
        if not self.connected.wait(10):
            raise AssertionError(f"{self.client_id}: no CONNACK")

    # callbacks (paho's network thread)
    def _on_connect(self, _c, _u, flags, reason_code, properties=None):
        with self.lock:
            self.connacks.append((flags.session_present, reason_code, properties))
        self.connected.set()

    def _on_subscribe(self, _c, _u, mid, reason_codes, properties=None):
        with self.lock:
            self.subacks[mid] = [rc.value for rc in reason_codes]

    def _on_message(self, _c, _u, message):
        with self.lock:
            self.messages.append(message)

    def _on_disconnect(self, _c, _u, _flags, reason_code, properties=None):
        with self.lock:
            self.disconnects.append(reason_code.value)

    # the test's side
    @property
    def connack(self):
        with self.lock:
            return self.connacks[-1]

    def connack_property(self, name: str):
        props = self.connack[2]
        return getattr(props, name, None) if props is not None else None

    def subscribe(self, topic_filter: str, qos: int = 1, no_local: bool = False, wait: bool = True) -> int:
        _, mid = self.client.subscribe(topic_filter, options=SubscribeOptions(qos=qos, noLocal=no_local))
        if wait:
            wait_until(lambda: mid in self.subacks, 10, what=f"SUBACK for {topic_filter}")
        return mid

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False):
        info = self.client.publish(topic, payload, qos=qos, retain=retain)
        if qos:
            info.wait_for_publish(10)
            assert info.is_published(), f"{topic}: not acknowledged"

    def received(self, topic: str | None = None) -> list:
        with self.lock:
            return [m for m in self.messages if topic is None or m.topic == topic]

    def wait_message(self, topic: str, count: int = 1, timeout: float = 10) -> list:
        wait_until(lambda: len(self.received(topic)) >= count, timeout, what=f"{count} message(s) on {topic}")
        return self.received(topic)

    def settle(self, topic: str):
        """Returns once everything the broker had queued for this client before now has arrived: a
        QoS 1 marker on `topic` (which this client must be subscribed to) comes back after it."""
        marker = unique("marker").encode()
        self.publish(topic, marker)
        wait_until(lambda: any(m.payload == marker for m in self.received(topic)), 10, what=f"the marker on {topic}")

    def drop(self):
        """Closes the socket without DISCONNECT: the broker sees a dead client (its Will is due)."""
        self.client.loop_stop()
        sock = self.client.socket()
        if sock is not None:
            sock.close()

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def wait_disconnect(client: V5, timeout: float = 10) -> int:
    wait_until(lambda: client.disconnects, timeout, what=f"{client.client_id} to be disconnected")
    return client.disconnects[0]


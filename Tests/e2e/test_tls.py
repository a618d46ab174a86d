"""TLS end to end (docs/contract.md §4, §5.5, §6): the daemon against pusher-local serving https:// and
wss:// and against mosquitto over TLS requiring a client certificate, verification on everywhere,
with a CA the test makes with `openssl`. Third-party clients on the other ends: the official `pusher`
library (https), pysher (wss), paho-mqtt (TLS with its own client certificate).

Expectations, written before the first run:
- both ways, every message arrives, in order, and `/readyz` is 200;
- a wrong CA on one side: the daemon keeps running, `/readyz` is 503 naming the bridge, the side and
  "TLS certificate verify failed", the log has one error line `<side>: cannot connect: …` however
  many attempts failed, and after the config is fixed and SIGHUP reloads it, `/readyz` is 200;
- server certificates for another host name: `/readyz` names the host the daemon connected to;
- `[bridge.pusher] host` an IP address with TLS: swift-nio-ssl refuses IP addresses as the TLS
  server name, so the reason says to use a DNS name (a known limitation, stated rather than hidden);
- no client certificate for a broker that requires one: `/readyz` names the MQTT side (what
  libmosquitto can tell: the connection was lost; written after the first run showed it).
"""

from __future__ import annotations

import json
import signal

import paho.mqtt.client as mqtt
import pytest

from bridge_testkit.clients import PysherListener
from bridge_testkit.harness import (BrokerTLS, ClientTLS, MQTTCollector, Mosquitto, PusherLocal, TestCA, bridge_config,
                                    free_port, publish, readyz, wait_until)
from test_flow import MQTT_TO_PUSHER, PUSHER_TO_MQTT

RULES = PUSHER_TO_MQTT + MQTT_TO_PUSHER


class PKI:
    """The test's certificates: a CA and everything it signed, and a second CA that signed nothing
    these servers present (the "wrong CA")."""

    def __init__(self, directory):
        self.ca = TestCA(directory, "ca")
        self.wrong_ca = TestCA(directory, "wrong-ca")
        self.server = self.ca.issue("server", dns=("localhost",), ips=("127.0.0.1",))
        self.other_host = self.ca.issue("other-host", dns=("other.example",))
        self.bridge_client = self.ca.issue("bridge-client", client=True)
        self.test_client = self.ca.issue("test-client", client=True)

    def mqtt_client_tls(self) -> ClientTLS:
        return ClientTLS(self.ca.cert, *self.test_client)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> PKI:
    return PKI(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def servers(workdir, pki):
    """Starts a TLS mosquitto (client certificate required) and a TLS pusher-local with the given
    server certificate; both are stopped at the end."""
    started = []

    def start(server_cert=None):
        cert = server_cert or pki.server
        broker = Mosquitto(workdir, tls=BrokerTLS(pki.ca.cert, *cert)).start()
        started.append(broker)
        pusher = PusherLocal(workdir, extra=["--activity-timeout", "2"], tls=cert, ca_file=pki.ca.cert).start()
        started.append(pusher)
        return pusher, broker

    yield start
    for process in reversed(started):
        process.stop()


def tls_config(pusher, broker, workdir, pki, metrics_port, *, pusher_ca=None, mqtt_ca=None,
               pusher_host="localhost") -> str:
    """bridge_config with TLS on both sides, verification on, and the operations endpoint on.

    The Pusher side connects to `localhost` by default: the WebSocket client cannot send an IP
    address as the TLS server name (see test_pusher_tls_to_an_ip_address_says_use_a_dns_name)."""
    config = bridge_config(pusher, broker, workdir, RULES).replace('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"')
    plain_pusher = f'host = "127.0.0.1"\nport = {pusher.port}\ntls = false\n'
    plain_mqtt = f'host = "127.0.0.1"\nport = {broker.port}\n'
    assert plain_pusher in config and plain_mqtt in config
    cert, key = pki.bridge_client
    config = config.replace(plain_pusher, f'host = "{pusher_host}"\nport = {pusher.port}\ntls = true\n'
                                          f'ca_file = "{pusher_ca or pki.ca.cert}"\n')
    return config.replace(plain_mqtt, f'host = "127.0.0.1"\nport = {broker.port}\ntls = true\nca_file = "{mqtt_ca or pki.ca.cert}"\n'
                                      f'cert_file = "{cert}"\nkey_file = "{key}"\n')


def wait_ready(port: int, timeout: float = 20):
    wait_until(lambda: readyz(port)[0] == 200, timeout, 0.1, "/readyz 200")


def test_daemon_bridges_both_ways_over_tls_with_verification(servers, workdir, pki, bridges):
    pusher, broker = servers()
    metrics_port = free_port()
    bridge = bridges(tls_config(pusher, broker, workdir, pki, metrics_port))
    wait_ready(metrics_port)
    client_tls = pki.mqtt_client_tls()

    # Pusher -> MQTT: the official library triggers over https, paho collects over TLS.
    collector = MQTTCollector(broker.port, ["dash/prices/#"], tls=client_tls)
    http = pusher.http_client()
    wait_until(lambda: http.channel_info("market-data").get("occupied"), 15, 0.1, "the bridge to subscribe over wss")
    sent = [json.dumps({"seq": i, "price": i * 1.5, "name": "Zürich"}, ensure_ascii=False) for i in range(50)]
    for i in range(0, len(sent), 10):
        http.trigger_batch([{"channel": "market-data", "name": "new-price", "data": d} for d in sent[i:i + 10]])
    wait_until(lambda: len(collector.payloads("dash/prices/new-price")) >= len(sent), 15, 0.05, "50 messages at MQTT")
    assert [p.decode() for p in collector.payloads("dash/prices/new-price")] == sent
    collector.close()

    # MQTT -> Pusher: paho publishes over TLS, pysher receives over wss.
    listener = PysherListener(pusher, "sensor-kitchen", ["temperature"], ca_file=pki.ca.cert)
    wait_until(lambda: publish(broker.port, "sensors/kitchen/temperature", "probe", tls=client_tls)
               or "probe" in listener.data(), 15, 0.3, "the bridge to forward MQTT -> Pusher")
    base = len(listener.data())
    readings = [json.dumps({"seq": i, "t": 20 + i / 10}) for i in range(50)]
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="tls-publisher")
    client_tls.apply(client)
    client.connect("127.0.0.1", broker.port)
    client.loop_start()
    for info in [client.publish("sensors/kitchen/temperature", r.encode(), qos=1) for r in readings]:
        info.wait_for_publish(10)
    client.loop_stop()
    client.disconnect()
    # A probe of the wait above may still arrive after `base`: count the readings alone.
    wait_until(lambda: len([d for d in listener.data()[base:] if d != "probe"]) >= len(readings), 15, 0.05,
               "50 events at pysher")
    assert [d for d in listener.data()[base:] if d != "probe"] == readings
    listener.close()

    assert readyz(metrics_port) == (200, "ready\n")
    assert "cannot connect" not in bridge.log()


@pytest.mark.parametrize("side", ["pusher", "mqtt"])
def test_wrong_ca_is_named_in_readyz_and_logged_once_then_fixed_by_reload(servers, workdir, pki, bridges, side):
    pusher, broker = servers()
    metrics_port = free_port()
    good = tls_config(pusher, broker, workdir, pki, metrics_port)
    wrong = tls_config(pusher, broker, workdir, pki, metrics_port,
                       **{f"{side}_ca": pki.wrong_ca.cert})
    bridge = bridges(wrong)
    expected = {
        "pusher": "e2e: pusher reconnecting: TLS certificate verify failed: not signed by a CA in ca_file",
        "mqtt": "e2e: mqtt disconnected: TLS certificate verify failed: not signed by a CA in ca_file, or not issued for 127.0.0.1",
    }[side]
    other = "mqtt" if side == "pusher" else "pusher"
    # The refused side is named with its reason, and only it once the other side has connected
    # (which may take longer than the refusal: a TLS handshake under load).
    # One reading judged whole: between retries the refused side reads "connecting" (reason kept).
    status, body = wait_until(
        lambda: r if expected in (r := readyz(metrics_port))[1] and f"e2e: {other}" not in r[1] else None, 15, 0.1,
        f"/readyz to name the {side} side and the reason, and not the {other} side")
    assert status == 503, body

    # Several attempts fail (initial_delay 200 ms, max_delay 2 s), one error line says so.
    attempts = {"pusher": "Pusher connection failed", "mqtt": "disconnected; reconnecting after backoff"}[side]
    wait_until(lambda: bridge.log().count(attempts) >= 4, 15, 0.2, "four failed attempts")
    errors = [line for line in bridge.log().splitlines() if f"{side}: cannot connect:" in line]
    assert len(errors) == 1, errors
    assert " error " in errors[0] and "TLS certificate verify failed" in errors[0]
    assert bridge.running()

    bridge.write_config(good)
    bridge.send_signal(signal.SIGHUP)
    wait_ready(metrics_port)
    assert bridge.running()


def test_host_name_mismatch_names_the_host_on_both_sides(servers, workdir, pki, bridges):
    # Both servers present a certificate for other.example only (signed by the right CA).
    pusher, broker = servers(pki.other_host)
    metrics_port = free_port()
    bridge = bridges(tls_config(pusher, broker, workdir, pki, metrics_port))
    wanted = ["e2e: pusher reconnecting: TLS host name mismatch: the server's certificate is not for localhost",
              "e2e: mqtt disconnected: TLS certificate verify failed: not signed by a CA in ca_file, or not issued for 127.0.0.1"]
    wait_until(lambda: all(w in readyz(metrics_port)[1] for w in wanted), 15, 0.1, "/readyz to name both hosts")
    assert readyz(metrics_port)[0] == 503
    log = bridge.log()
    assert "pusher: cannot connect: TLS host name mismatch: the server's certificate is not for localhost" in log
    assert "mqtt: cannot connect: TLS certificate verify failed: not signed by a CA in ca_file, or not issued for 127.0.0.1" in log
    assert bridge.running()


def test_pusher_tls_to_an_ip_address_says_use_a_dns_name(servers, workdir, pki, bridges):
    pusher, broker = servers()
    metrics_port = free_port()
    bridge = bridges(tls_config(pusher, broker, workdir, pki, metrics_port, pusher_host="127.0.0.1"))
    wanted = ("e2e: pusher reconnecting: TLS to an IP address (127.0.0.1) is not supported: "
              "set host to a DNS name in the server's certificate")
    # MQTT over TLS to 127.0.0.1 works (the broker's certificate has an IP SAN). The two sides
    # connect concurrently, so the Pusher refusal can be reported while MQTT is still connecting:
    # wait for both facts together, as the bad-certificate test above does.
    # One reading judged whole: between retries the Pusher side reads "connecting" (reason kept).
    status, body = wait_until(
        lambda: r if wanted in (r := readyz(metrics_port))[1] and "e2e: mqtt" not in r[1] else None, 15, 0.1,
        "/readyz to explain the IP address, and MQTT connected")
    assert status == 503, body
    assert bridge.running()


def test_mqtt_without_a_client_certificate_is_reported_as_a_lost_connection(servers, workdir, pki, bridges):
    """The broker requires a client certificate and the config has none. Under TLS 1.3 the broker's
    refusal comes after the handshake, and libmosquitto only sees the connection lost (mosquitto's
    own log says "peer did not return a certificate"): that is what /readyz can say."""
    pusher, broker = servers()
    metrics_port = free_port()
    config = tls_config(pusher, broker, workdir, pki, metrics_port)
    cert, key = pki.bridge_client
    assert f'cert_file = "{cert}"\nkey_file = "{key}"\n' in config
    bridge = bridges(config.replace(f'cert_file = "{cert}"\nkey_file = "{key}"\n', ""))
    wanted = f"e2e: mqtt disconnected: connection to 127.0.0.1:{broker.port} lost"
    wait_until(lambda: wanted in readyz(metrics_port)[1], 15, 0.1, "/readyz to name the lost MQTT connection")
    assert "peer did not return a certificate" in broker.log()
    assert f"mqtt: cannot connect: connection to 127.0.0.1:{broker.port} lost" in bridge.log()
    assert bridge.running()

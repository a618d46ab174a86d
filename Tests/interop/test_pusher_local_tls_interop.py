"""pusher-local over TLS (`--tls-cert`, `--tls-key`) against third-party clients, verification on:
the official `pusher` library over https:// and pysher over wss://, both trusting a CA this test
makes with `openssl`, and both refusing the server when they do not trust that CA."""
import json
import logging
import ssl
import subprocess
import threading
import time
import urllib.request

import pusher
import pysher
import pytest
import requests
import websocket
from pusher.requests import RequestsBackend

from bridge_testkit.harness import PusherLocal

TIMEOUT = 10


def openssl(directory, *args):
    subprocess.run(["openssl", *map(str, args)], cwd=directory, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A test CA and a server certificate for localhost and 127.0.0.1 it signed: (ca, cert, key)."""
    d = tmp_path_factory.mktemp("tls")
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl(d, "req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=interop test CA")
    openssl(d, "req", *curve, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    openssl(d, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "1", "-extfile", "ext.cnf")
    return d / "ca.pem", d / "server.pem", d / "server.key"


@pytest.fixture
def tls_server(certificates, tmp_path):
    ca, cert, key = certificates
    server = PusherLocal(tmp_path, tls=(cert, key), ca_file=ca).start()
    try:
        yield server
    finally:
        server.stop()


def https_client(server, ca_file):
    """The official library over https. With ssl=True it pins its own bundled cacert.pem as
    requests' `verify` (so REQUESTS_CA_BUNDLE is ignored); a backend verifying against our CA
    keeps verification on."""
    class VerifyAgainstTestCA(RequestsBackend):
        def __init__(self, client, **options):
            super().__init__(client, **options)
            self.options["verify"] = str(ca_file)

    return pusher.Pusher(app_id=server.app_id, key=server.key, secret=server.secret, host=server.host,
                         port=server.port, ssl=True, backend=VerifyAgainstTestCA)


def test_ready_line_says_tls_and_the_control_endpoint_answers_over_https(tls_server, certificates):
    ca, _, _ = certificates
    assert tls_server.ready_line.startswith(f"pusher-local listening on 127.0.0.1:{tls_server.port} with TLS (apps: 1/app-key)")
    assert tls_server.http_url == f"https://127.0.0.1:{tls_server.port}"
    assert tls_server.ws_url.startswith("wss://")
    context = ssl.create_default_context(cafile=str(ca))
    with urllib.request.urlopen(f"{tls_server.http_url}/pusher-local/apps/1/stats", context=context,
                                timeout=TIMEOUT) as response:
        assert json.loads(response.read())["connections"] == 0


def test_pusher_library_over_https_reaches_pysher_over_wss(tls_server, certificates):
    ca, _, _ = certificates
    received, subscribed = [], threading.Event()
    client = pysher.Pusher(tls_server.key, custom_host=tls_server.host, port=tls_server.port, secure=True,
                           secret=tls_server.secret, log_level=logging.WARNING)
    # pysher passes socket_kwargs to websocket-client's run_forever: verify against the test CA
    # (CERT_REQUIRED and host name checking are websocket-client's defaults).
    client.connection.socket_kwargs["sslopt"] = {"ca_certs": str(ca)}

    def on_connect(_data):
        channel = client.subscribe("prices")
        channel.bind("update", received.append)
        channel.bind("pusher_internal:subscription_succeeded", lambda _d: subscribed.set())

    client.connection.bind("pusher:connection_established", on_connect)
    client.connect()
    try:
        assert subscribed.wait(TIMEOUT), "pysher did not subscribe over wss"
        http = https_client(tls_server, ca)
        assert http.channel_info("prices")["occupied"] is True
        http.trigger("prices", "update", {"price": 42})
        http.trigger_batch([{"channel": "prices", "name": "update", "data": "second"}])
        for _ in range(200):
            if len(received) >= 2:
                break
            time.sleep(0.05)
        assert received == ['{"price": 42}', "second"]  # the library's json.dumps spacing, byte for byte
    finally:
        client.disconnect(timeout=2)


def test_clients_that_do_not_trust_the_ca_are_refused(tls_server):
    # The library's own bundle does not hold the test CA.
    default = pusher.Pusher(app_id=tls_server.app_id, key=tls_server.key, secret=tls_server.secret,
                            host=tls_server.host, port=tls_server.port, ssl=True)
    with pytest.raises(requests.exceptions.SSLError):
        default.trigger("prices", "update", "x")
    # websocket-client (pysher's transport) with the system roots.
    with pytest.raises(ssl.SSLCertVerificationError):
        websocket.create_connection(f"wss://127.0.0.1:{tls_server.port}/app/{tls_server.key}?protocol=7", timeout=TIMEOUT)
    # Plain ws:// to the TLS port gets no WebSocket.
    with pytest.raises(Exception):
        websocket.create_connection(f"ws://127.0.0.1:{tls_server.port}/app/{tls_server.key}?protocol=7", timeout=TIMEOUT)

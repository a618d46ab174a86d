"""The fault proxies against tiny local servers (127.0.0.1 only, about a second in all)."""

from __future__ import annotations

import http.server
import json
import socket
import threading

import pytest

from bridge_testkit.faults.proxy import HTTPFaultProxy, TCPFaultProxy


@pytest.fixture
def echo_port():
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    def echo(conn):
        with conn:
            try:
                while data := conn.recv(4096):
                    conn.sendall(data)
            except OSError:
                pass  # the proxy resets connections on purpose

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


def roundtrip(port: int, payload: bytes, timeout: float = 1.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        return s.recv(4096)


def closed_by_peer(sock: socket.socket) -> bool:
    """True when the peer closed or reset the connection (recv gives b"" or raises a reset)."""
    try:
        return sock.recv(10) == b""
    except (ConnectionResetError, ConnectionAbortedError):
        return True


def test_tcp_pass_blackhole_reset(echo_port):
    proxy = TCPFaultProxy(echo_port)
    try:
        assert roundtrip(proxy.port, b"hello") == b"hello"
        open_conn = socket.create_connection(("127.0.0.1", proxy.port), timeout=1)
        open_conn.sendall(b"a")
        assert open_conn.recv(10) == b"a"

        proxy.set_mode("blackhole")
        # New connections are accepted and hang; open ones hang too.
        with pytest.raises(socket.timeout):
            roundtrip(proxy.port, b"lost", timeout=0.15)
        open_conn.settimeout(0.3)
        open_conn.sendall(b"b")
        with pytest.raises(socket.timeout):
            open_conn.recv(10)

        proxy.set_mode("pass")
        # The blackholed connection is reset; new ones pass again.
        open_conn.settimeout(1)
        assert closed_by_peer(open_conn)
        open_conn.close()
        assert roundtrip(proxy.port, b"again") == b"again"

        proxy.set_mode("reset")
        try:
            with socket.create_connection(("127.0.0.1", proxy.port), timeout=1) as s:
                assert closed_by_peer(s)
        except ConnectionResetError:
            pass  # the proxy's RST right after accept can beat connect()'s return on a busy machine (seen in CI)
    finally:
        proxy.close()


def test_tcp_blackhole_oldest_silences_one_connection_only(echo_port):
    """Expected: the oldest open connection goes silent both ways (not closed); a younger one and
    new ones still pass; with nothing open, nothing to black-hole."""
    proxy = TCPFaultProxy(echo_port)
    try:
        assert proxy.blackhole_oldest() is False
        old = socket.create_connection(("127.0.0.1", proxy.port), timeout=1)
        old.sendall(b"o")
        assert old.recv(10) == b"o"
        young = socket.create_connection(("127.0.0.1", proxy.port), timeout=1)
        young.sendall(b"y")
        assert young.recv(10) == b"y"
        assert proxy.blackhole_oldest() is True
        old.settimeout(0.3)
        old.sendall(b"lost")
        with pytest.raises(socket.timeout):
            old.recv(10)
        young.sendall(b"still")
        assert young.recv(10) == b"still"
        assert roundtrip(proxy.port, b"new") == b"new"
        old.close()
        young.close()
    finally:
        proxy.close()


@pytest.fixture
def api_port():
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b"{}"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def post(port: int, path: str, doc: dict, timeout: float = 1.0) -> int:
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("POST", path, body=json.dumps(doc), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def test_http_pass_records_accepted_events_and_faults_answer_or_hang(api_port):
    proxy = HTTPFaultProxy(api_port)
    try:
        batch = {"batch": [{"channel": "c1", "name": "e", "data": "d1"}, {"channel": "c2", "name": "e", "data": "d2"}]}
        assert post(proxy.port, "/apps/1/batch_events", batch) == 200
        assert post(proxy.port, "/apps/1/events", {"channels": ["c3"], "name": "e", "data": "d3"}) == 200
        assert [(c, d) for c, d, _ in proxy.events()] == [("c1", "d1"), ("c2", "d2"), ("c3", "d3")]

        proxy.set_mode("status", 429)
        assert post(proxy.port, "/apps/1/batch_events", batch) == 429
        proxy.set_mode("status", 503)
        assert post(proxy.port, "/apps/1/batch_events", batch) == 503
        proxy.set_mode("hang")
        with pytest.raises(socket.timeout):
            post(proxy.port, "/apps/1/batch_events", batch, timeout=0.15)
        assert len(proxy.events()) == 3  # nothing faulted was recorded as accepted
        assert proxy.requests["faulted"] == 2 and proxy.requests["hung"] == 1

        proxy.set_mode("pass")
        assert post(proxy.port, "/apps/1/batch_events", batch) == 200
        assert len(proxy.events()) == 5
    finally:
        proxy.close()

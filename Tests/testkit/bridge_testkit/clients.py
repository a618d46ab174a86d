"""Third-party clients the suites and the fault matrix share: a pysher listener, a raw websocket-client
subscriber, a client speaking the Pusher protocol by hand, and a stand-in for systemd's NOTIFY_SOCKET."""

from __future__ import annotations

import json
import socket
import threading

import websocket

import pysher

from bridge_testkit.harness import wait_until


class PysherListener:
    """A pysher client subscribed to one channel, recording (event, data) in arrival order. With
    `ca_file` it connects over wss://, verifying pusher-local's certificate against that CA."""

    def __init__(self, pusher_local, channel: str, events: list[str], ca_file=None):
        self.received: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.subscribed = threading.Event()
        self.client = pysher.Pusher(pusher_local.key, custom_host="127.0.0.1", port=pusher_local.port,
                                    secure=ca_file is not None, secret=pusher_local.secret)
        if ca_file is not None:
            # pysher hands socket_kwargs to websocket-client's run_forever; sslopt keeps verification
            # on (CERT_REQUIRED, host name checked) and trusts the test CA.
            self.client.connection.socket_kwargs["sslopt"] = {"ca_certs": str(ca_file)}

        def on_connect(_data):
            ch = self.client.subscribe(channel)
            for e in events:
                ch.bind(e, lambda data, e=e: self._record(e, data))
            ch.bind("pusher_internal:subscription_succeeded", lambda _d: self.subscribed.set())

        self.client.connection.bind("pusher:connection_established", on_connect)
        self.client.connect()
        if not self.subscribed.wait(10):
            raise RuntimeError("pysher did not subscribe" + (" over wss" if ca_file is not None else ""))

    def _record(self, event, data):
        with self.lock:
            self.received.append((event, data))

    def data(self) -> list[str]:
        with self.lock:
            return [d for _, d in self.received]

    def close(self):
        self.client.disconnect(timeout=2)  # pysher joins its thread; without a timeout it can wait ~100 s


def raw_subscriber(pusher_local, channel: str, timeout: float = 30) -> websocket.WebSocket:
    """A websocket-client connection to pusher-local subscribed to a public `channel` (its
    connection_established and subscription_succeeded read), for reading frames undecoded."""
    ws = websocket.create_connection(pusher_local.ws_url, timeout=timeout)
    json.loads(ws.recv())  # pusher:connection_established
    ws.send(json.dumps({"event": "pusher:subscribe", "data": {"channel": channel}}))
    json.loads(ws.recv())  # pusher_internal:subscription_succeeded
    return ws


def wait_bridge_subscribed(pusher_local, channel: str):
    http = pusher_local.http_client()
    wait_until(lambda: http.channel_info(channel).get("occupied"), 15, 0.1, f"the bridge to subscribe {channel}")


class NotifySocket:
    """A Unix datagram socket standing in for systemd's NOTIFY_SOCKET."""

    def __init__(self, path: str):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.messages: list[str] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        while True:
            try:
                data = self.sock.recv(4096)
            except OSError:
                return
            with self.lock:
                self.messages.append(data.decode())

    def seen(self, prefix: str) -> list[str]:
        with self.lock:
            return [m for m in self.messages if m.startswith(prefix)]

    def all(self) -> list[str]:
        with self.lock:
            return list(self.messages)


class Closed(Exception):
    """The server closed the connection with `code` (None: no close code)."""

    def __init__(self, code):
        super().__init__(f"closed with {code}")
        self.code = code


class RawPusherClient:
    """A websocket-client connection to a Pusher server speaking the protocol by hand, one JSON
    frame at a time (what pusher-js sends, for what no library here sends: pusher:signin, say).
    With `answer_pings` the server's pusher:ping frames are answered and skipped."""

    def __init__(self, server, timeout: float = 10, answer_pings: bool = False):
        self.server, self.timeout, self.answer_pings = server, timeout, answer_pings
        self.ws = websocket.create_connection(server.ws_url, timeout=timeout)
        hello = self.next_event()
        assert hello["event"] == "pusher:connection_established", hello
        self.socket_id = json.loads(hello["data"])["socket_id"]

    def send(self, event, data):
        self.ws.send(json.dumps({"event": event, "data": data}))

    def next_event(self, timeout=None):
        """The next text frame as an object; raises Closed when the server closes."""
        self.ws.settimeout(self.timeout if timeout is None else timeout)
        while True:
            opcode, frame = self.ws.recv_data_frame(True)
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                raise Closed(int.from_bytes(frame.data[:2], "big") if len(frame.data) >= 2 else None)
            if opcode == websocket.ABNF.OPCODE_TEXT:
                event = json.loads(frame.data)
                if self.answer_pings and event.get("event") == "pusher:ping":
                    self.send("pusher:pong", {})
                    continue
                return event

    def wait_for(self, event, timeout=None):
        """Frames up to the first named `event`, which is returned."""
        while True:
            received = self.next_event(timeout)
            if received["event"] == event:
                return received


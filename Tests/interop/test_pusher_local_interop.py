"""pusher-local against third-party clients: pysher (WebSocket) and the official `pusher`
library (signed HTTP API)."""
import contextlib
import json
import logging
import queue
import threading
import time
import types

import pusher
import pusher.errors
import pusher.http
import pysher
import pytest

from bridge_testkit.harness import PusherLocal, binary

TIMEOUT = 10


def connect_pysher(server, user_data=None):
    """A connected pysher client (signs private/presence subscriptions with the secret)."""
    client = pysher.Pusher(server.key, custom_host=server.host, port=server.port, secure=False,
                           secret=server.secret, user_data=user_data or {}, log_level=logging.WARNING)
    connected = threading.Event()
    client.connection.bind("pusher:connection_established", lambda _data: connected.set())
    client.connect()
    assert connected.wait(TIMEOUT), "pysher did not receive pusher:connection_established"
    return client


@contextlib.contextmanager
def pysher_clients(server, *user_data):
    """One connected pysher client per `user_data` (None: none), closed when the block ends."""
    clients = []
    try:
        for data in user_data:
            clients.append(connect_pysher(server, data))
        yield clients
    finally:
        for client in clients:
            close(client)


def close(client):
    """Disconnects a pysher client without waiting forever: pysher's disconnect() joins its
    thread without a timeout, and websocket-client can miss the wake-up when the socket is
    closed from another thread (its reader then sits in select). The thread is a daemon."""
    client.disconnect(timeout=2)


def subscription_count(server, channel_name):
    status, body = server.app_control("GET", "stats")
    assert status == 200, body
    return json.loads(body)["subscriptions"].get(channel_name, 0)


def subscribe(server, client, channel_name, *events, auth=None):
    """Subscribes and binds `events`; returns (channel, queue of (event, data)) once the server
    counts the subscription. (pysher creates the Channel object only after sending the
    subscribe frame, so a subscription_succeeded that arrives quickly can beat any binding: the
    server's counters are the reliable signal.)"""
    received = queue.Queue()
    before = subscription_count(server, channel_name)
    channel = client.subscribe(channel_name, auth=auth)
    for event in events:
        channel.bind(event, lambda data, event=event: received.put((event, data)))
    deadline = time.monotonic() + TIMEOUT
    while subscription_count(server, channel_name) <= before:
        assert time.monotonic() < deadline, f"{channel_name} was not subscribed"
        time.sleep(0.02)
    return channel, received


def official(server, secret=None):
    return pusher.Pusher(app_id=server.app_id, key=server.key, secret=secret or server.secret,
                         host=server.host, port=server.port, ssl=False)


def raw_signed(client, method, path, params):
    """Sends a request signed by the official library but without its client-side checks, to
    see the server's own answer to bad input."""
    core = client._pusher_client
    return core.http.send_request(pusher.http.Request(core, method, path, params))


def test_ready_line_gives_a_free_port_and_sigterm_exits_zero(tmp_path):
    server = PusherLocal(tmp_path).start()
    try:
        assert server.port > 0
        assert server.process.poll() is None
    finally:
        assert server.stop() == 0


def test_public_channel_receives_events_from_the_official_library(pusher_server):
    client = connect_pysher(pusher_server)
    try:
        _, received = subscribe(pusher_server, client, "news", "update")
        official(pusher_server).trigger("news", "update", {"price": 42})
        event, data = received.get(timeout=TIMEOUT)
        assert event == "update"
        assert json.loads(data) == {"price": 42}
    finally:
        close(client)


def test_private_channel_signed_with_the_secret(pusher_server):
    client = connect_pysher(pusher_server)
    try:
        _, received = subscribe(pusher_server, client, "private-orders", "created")
        official(pusher_server).trigger(["private-orders"], "created", "plain text")
        assert received.get(timeout=TIMEOUT) == ("created", "plain text")
    finally:
        close(client)


def test_wrong_subscription_auth_gets_pusher_error_and_the_connection_stays(pusher_server):
    client = connect_pysher(pusher_server)
    errors = queue.Queue()
    client.connection.bind("pusher:error", lambda data: errors.put(data))
    try:
        client.subscribe("private-secret", auth=f"{pusher_server.key}:{'0' * 64}")
        error = errors.get(timeout=TIMEOUT)
        assert "Invalid signature" in error["message"]
        # Still connected: a public subscription works afterwards.
        _, received = subscribe(pusher_server, client, "still-here", "ping")
        official(pusher_server).trigger("still-here", "ping", "x")
        assert received.get(timeout=TIMEOUT) == ("ping", "x")
    finally:
        close(client)


def test_presence_members_added_and_removed_reach_other_clients(pusher_server):
    alice_data = {"user_id": "alice", "user_info": {"name": "Alice"}}
    with pysher_clients(pusher_server, alice_data, {"user_id": "bob", "user_info": {"name": "Bob"}}) as (alice, bob):
        _, alice_events = subscribe(pusher_server, alice, "presence-room", "pusher_internal:member_added", "pusher_internal:member_removed")
        subscribe(pusher_server, bob, "presence-room")
        event, data = alice_events.get(timeout=TIMEOUT)
        assert event == "pusher_internal:member_added"
        assert json.loads(data) == {"user_id": "bob", "user_info": {"name": "Bob"}}
        users = official(pusher_server).users_info("presence-room")
        assert sorted(user["id"] for user in users["users"]) == ["alice", "bob"]
        info = official(pusher_server).channels_info("presence-", ["user_count"])
        assert info["channels"]["presence-room"]["user_count"] == 2
        close(bob)
        event, data = alice_events.get(timeout=TIMEOUT)
        assert event == "pusher_internal:member_removed"
        assert json.loads(data) == {"user_id": "bob"}


def test_socket_id_exclusion(pusher_server):
    with pysher_clients(pusher_server, None, None) as (sender, other):
        _, sender_events = subscribe(pusher_server, sender, "prices", "tick")
        _, other_events = subscribe(pusher_server, other, "prices", "tick")
        official(pusher_server).trigger("prices", "tick", "1", socket_id=sender.connection.socket_id)
        assert other_events.get(timeout=TIMEOUT) == ("tick", "1")
        with pytest.raises(queue.Empty):
            sender_events.get(timeout=0.5)


def test_client_events_reach_others_but_not_the_sender(pusher_server):
    with pysher_clients(pusher_server, None, None) as (sender, other):
        sender_channel, sender_events = subscribe(pusher_server, sender, "private-chat", "client-typing")
        _, other_events = subscribe(pusher_server, other, "private-chat", "client-typing")
        sender_channel.trigger("client-typing", {"who": "sender"})
        event, data = other_events.get(timeout=TIMEOUT)
        assert event == "client-typing"
        assert json.loads(data) == {"who": "sender"}
        with pytest.raises(queue.Empty):
            sender_events.get(timeout=0.5)


def test_wrongly_signed_request_gets_401(pusher_server):
    with pytest.raises(pusher.errors.PusherBadAuth):
        official(pusher_server, secret="not-the-secret").trigger("news", "e", "d")


def test_limits_answer_400_and_413(pusher_server):
    client = official(pusher_server)
    path = f"/apps/{pusher_server.app_id}/events"
    with pytest.raises(pusher.errors.PusherBadRequest):
        raw_signed(client, "POST", path, {"name": "e", "channels": [f"c{i}" for i in range(101)], "data": "d"})
    with pytest.raises(pusher.errors.PusherBadRequest):
        raw_signed(client, "POST", path, {"name": "e", "channels": ["bad channel!"], "data": "d"})
    with pytest.raises(pusher.errors.PusherBadRequest):
        raw_signed(client, "POST", f"/apps/{pusher_server.app_id}/batch_events",
                   {"batch": [{"name": "e", "channel": "c", "data": "d"}] * 11})
    with pytest.raises(pusher.errors.PusherBadStatus, match="413"):
        client.trigger("news", "e", "x" * (10 * 1024 + 1))
    # The limits themselves are accepted.
    client.trigger([f"c{i}" for i in range(100)], "e", "x" * (10 * 1024))


def test_batch_trigger_and_channel_info(pusher_server):
    client = connect_pysher(pusher_server)
    try:
        _, received = subscribe(pusher_server, client, "batch", "one", "two")
        official(pusher_server).trigger_batch([
            {"channel": "batch", "name": "one", "data": "1"},
            {"channel": "batch", "name": "two", "data": "2"},
        ])
        assert received.get(timeout=TIMEOUT) == ("one", "1")
        assert received.get(timeout=TIMEOUT) == ("two", "2")
        info = official(pusher_server).channel_info("batch", ["subscription_count"])
        assert info == {"occupied": True, "subscription_count": 1}
    finally:
        close(client)


def test_control_disconnect_closes_pysher_with_the_code(pusher_server):
    client = connect_pysher(pusher_server)
    try:
        status, body = pusher_server.app_control("POST", "disconnect?code=4200")
        assert status == 200 and json.loads(body) == {"closed": 1}
        deadline = time.monotonic() + TIMEOUT
        while client.connection.state == "connected" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.connection.state != "connected"
    finally:
        close(client)


def test_several_apps_and_no_control_flag(tmp_path):
    server = PusherLocal(tmp_path, extra=["--app", "2:second-key:second-secret", "--no-control"]).start()
    try:
        other = types.SimpleNamespace(host=server.host, port=server.port, app_id="2", key="second-key",
                                      secret="second-secret")
        client = connect_pysher(other)
        close(client)
        status, _ = server.app_control("GET", "stats")
        assert status == 404
        official(other).trigger("any", "e", "d")
        with pytest.raises(pusher.errors.PusherBadAuth):
            official(other, secret=server.secret).trigger("any", "e", "d")
    finally:
        assert server.stop() == 0


def test_bad_flags_exit_64():
    import subprocess
    result = subprocess.run([binary("PUSHER_LOCAL_BIN", "pusher-local"), "--app", "missing-parts"], capture_output=True, text=True)
    assert result.returncode == 64
    assert "ID:KEY:SECRET" in result.stderr


def test_sigterm_with_a_connected_client_that_never_answers_exits_zero_quickly(tmp_path):
    import websocket
    server = PusherLocal(tmp_path).start()
    ws = websocket.create_connection(server.ws_url, timeout=10)
    try:
        assert json.loads(ws.recv())["event"] == "pusher:connection_established"
        started = time.monotonic()
        assert server.stop(timeout=8) == 0
        assert time.monotonic() - started < 5
    finally:
        ws.close(timeout=0.5)


def test_control_raw_frame_sends_the_bytes_unchanged(pusher_server):
    import websocket
    ws = websocket.create_connection(pusher_server.ws_url, timeout=10, skip_utf8_validation=True)
    try:
        ws.recv_data()  # connection_established
        import urllib.request
        request = urllib.request.Request(f"{pusher_server.http_url}/pusher-local/apps/{pusher_server.app_id}/raw",
                                         data=b"{\xff\xfe", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.loads(response.read()) == {"sent": 1}
        opcode, data = ws.recv_data()
        assert opcode == websocket.ABNF.OPCODE_TEXT
        assert data == b"{\xff\xfe"
    finally:
        ws.close(timeout=0.5)

"""pusher-local's fleet features against third-party code (docs/contract.md §6, §7.1, §7.2):
subscription counts heard by pysher, channel lists read by the official `pusher` library, and
batched, retried webhooks checked with the official library's `validate_webhook`."""
import http.server
import json
import queue
import subprocess
import threading
import time
import types

import pusher
import pytest

from bridge_testkit.harness import PusherLocal, binary, wait_until
from test_pusher_local_interop import TIMEOUT, close, connect_pysher, official, pysher_clients, subscribe, subscription_count


class WebhookReceiver:
    """An HTTP server on a free port that validates every POST with the official library and
    answers 500 to the first `fail_first` requests (then 200)."""

    def __init__(self, server_app, fail_first=0):
        self.validator = pusher.Pusher(app_id=server_app.app_id, key=server_app.key, secret=server_app.secret)
        self.fail_first = fail_first
        self.lock = threading.Lock()
        self.requests = []   # (status answered, [events]) in arrival order
        self.invalid = []    # bodies that failed validation
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
                data = receiver.validator.validate_webhook(
                    self.headers.get("X-Pusher-Key", ""), self.headers.get("X-Pusher-Signature", ""), body)
                with receiver.lock:
                    if data is None:
                        receiver.invalid.append(body)
                        status = 401
                    else:
                        failed = sum(1 for answered, _ in receiver.requests if answered == 500)
                        status = 500 if failed < receiver.fail_first else 200
                        receiver.requests.append((status, data["events"]))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks"

    def accepted_events(self):
        with self.lock:
            return [event for status, events in self.requests if status == 200 for event in events]

    def wait_for(self, predicate, what):
        deadline = time.monotonic() + TIMEOUT
        while not predicate(self.accepted_events()):
            assert time.monotonic() < deadline, f"timed out waiting for {what}; have {self.accepted_events()}"
            time.sleep(0.02)
        return self.accepted_events()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def app(tmp_path):
    """The credentials pusher-local is started with (the fixture's receiver needs them first), and
    the folder of its log."""
    return types.SimpleNamespace(app_id="7", key="fleet-key", secret="fleet-secret", workdir=tmp_path)


def start(app, *args):
    return PusherLocal(app.workdir, app_id=app.app_id, key=app.key, secret=app.secret, extra=list(args)).start()


def stats(server):
    status, body = server.app_control("GET", "stats")
    assert status == 200, body
    return json.loads(body)


def names(events, channel=None):
    return [event["name"] for event in events if channel is None or event["channel"] == channel]


def test_webhooks_validate_with_the_official_library_and_arrive_batched(app):
    receiver = WebhookReceiver(app)
    server = start(app, "--webhook", receiver.url, "--subscription-count")
    alice = bob = None
    try:
        alice = connect_pysher(server, {"user_id": "alice", "user_info": {"name": "Alice"}})
        bob = connect_pysher(server, {"user_id": "bob", "user_info": {"name": "Bob"}})
        subscribe(server, alice, "presence-room-1")
        bob_room, _ = subscribe(server, bob, "presence-room-1")
        bob_room.trigger("client-wave", {"hello": 1})
        # Five channels at once: ten events within a few milliseconds.
        for n in range(5):
            alice.subscribe(f"private-device-{n}")
        subscribe(server, bob, "cache-weather")
        events = receiver.wait_for(lambda events: names(events).count("subscription_count") >= 6, "subscription counts")
        close(bob)
        events = receiver.wait_for(lambda events: "member_removed" in names(events)
                                   and names(events, "cache-weather")[-1:] == ["channel_vacated"], "bob leaving")
        assert receiver.invalid == []
        assert names(events, "presence-room-1")[:3] == ["channel_occupied", "member_added", "member_added"]
        added = [event["user_id"] for event in events if event["name"] == "member_added"]
        assert added == ["alice", "bob"]
        wave = next(event for event in events if event["name"] == "client_event")
        assert wave["channel"] == "presence-room-1" and wave["event"] == "client-wave"
        assert wave["user_id"] == "bob" and json.loads(wave["data"]) == {"hello": 1}
        assert wave["socket_id"] == bob.connection.socket_id
        assert [event for event in events if event["channel"] == "private-device-3"] == [
            {"name": "channel_occupied", "channel": "private-device-3"},
            {"name": "subscription_count", "channel": "private-device-3", "subscription_count": 1},
        ]
        assert names(events, "cache-weather") == ["channel_occupied", "subscription_count", "cache_miss",
                                                   "subscription_count", "channel_vacated"]
        assert [event.get("subscription_count") for event in events if event["channel"] == "cache-weather"] == [
            None, 1, None, 0, None]
        # Presence channels announce members, not counts.
        assert "subscription_count" not in names(events, "presence-room-1")
        sizes = [len(batch) for status, batch in receiver.requests]
        assert max(sizes) > 1, sizes
        assert max(sizes) <= 20, sizes
        # pusher-local counts a post once its answer is back, after the receiver recorded it.
        counters = wait_until(lambda: c if (c := stats(server))["webhooks_posted"] == len(receiver.requests) else None,
                              5, 0.05, "pusher-local to count every post")
        assert counters["webhook_events_posted"] == len(events)
        assert counters["webhooks_failed"] == counters["webhooks_retried"] == counters["webhooks_given_up"] == 0
    finally:
        for client in (alice, bob):
            if client:
                close(client)
        server.stop()
        receiver.stop()


def test_failed_webhooks_are_retried_in_order_until_the_receiver_recovers(app):
    receiver = WebhookReceiver(app, fail_first=3)
    server = start(app, "--webhook", receiver.url, "--webhook-batch-ms", "20", "--webhook-batch-size", "2",
                   "--webhook-retry-initial-ms", "100", "--webhook-retry-cap-ms", "200")
    client = connect_pysher(server)
    try:
        for n in range(6):
            subscribe(server, client, f"private-device-{n}")
        events = receiver.wait_for(lambda events: len(events) >= 6, "six channel_occupied")
        time.sleep(0.3)  # nothing more, no duplicates
        events = receiver.accepted_events()
        assert events == [{"name": "channel_occupied", "channel": f"private-device-{n}"} for n in range(6)]
        failed = [batch for status, batch in receiver.requests if status == 500]
        assert len(failed) == 3
        # The same first request was repeated; nothing overtook it.
        assert failed[0] == failed[1] == failed[2] == receiver.requests[3][1]
        assert failed[0][0]["channel"] == "private-device-0"
        counters = stats(server)
        assert counters["webhooks_failed"] == 3
        assert counters["webhooks_retried"] == 3
        assert counters["webhooks_given_up"] == 0
        assert counters["webhook_events_posted"] == 6
    finally:
        close(client)
        server.stop()
        receiver.stop()


def test_a_request_failing_past_the_retry_limit_is_dropped_logged_and_counted(app):
    receiver = WebhookReceiver(app, fail_first=1000)
    server = start(app, "--webhook", receiver.url, "--webhook-batch-ms", "0",
                   "--webhook-retry-initial-ms", "200", "--webhook-retry-cap-ms", "200", "--webhook-retry-max", "0.5")
    client = connect_pysher(server)
    try:
        subscribe(server, client, "doomed")
        deadline = time.monotonic() + TIMEOUT
        while stats(server)["webhooks_given_up"] < 1:
            assert time.monotonic() < deadline, stats(server)
            time.sleep(0.05)
        counters = stats(server)
        # Attempts at 0, 0.2 and 0.4 s; the next would start at 0.6 s, past the 0.5 s limit.
        assert counters["webhooks_failed"] == 3
        assert counters["webhooks_retried"] == 2
        assert counters["webhook_events_given_up"] == 1
        assert any("Webhook request given up" in line for line in server.stderr_lines)
        receiver.fail_first = 0
        subscribe(server, client, "after-recovery")
        events = receiver.wait_for(lambda events: len(events) >= 1, "the next event")
        assert events == [{"name": "channel_occupied", "channel": "after-recovery"}]
    finally:
        close(client)
        server.stop()
        receiver.stop()


def test_pysher_subscribers_hear_the_subscription_count(app):
    server = start(app, "--subscription-count")
    clients = []
    try:
        watcher = connect_pysher(server)
        clients.append(watcher)
        counts = queue.Queue()
        channel = watcher.subscribe("private-device-0042")
        # pysher hands bound callbacks the raw event name and the data string.
        channel.bind("pusher_internal:subscription_count", lambda data: counts.put(json.loads(data)["subscription_count"]))
        deadline = time.monotonic() + TIMEOUT
        while subscription_count(server, "private-device-0042") < 1:
            assert time.monotonic() < deadline
            time.sleep(0.02)

        def expect(count):
            while True:
                value = counts.get(timeout=TIMEOUT)
                if value == count:
                    return
                # Only the value for the watcher's own subscribe may have been missed (pysher
                # creates the channel object after sending the subscribe frame).
                assert value == 1, f"expected {count}, got {value}"

        for n in range(2, 4):
            other = connect_pysher(server)
            clients.append(other)
            subscribe(server, other, "private-device-0042")
            expect(n)
        close(clients.pop())
        expect(2)
        clients[-1].unsubscribe("private-device-0042")
        expect(1)
        with pytest.raises(queue.Empty):
            counts.get(timeout=0.3)
    finally:
        for client in clients:
            close(client)
        server.stop()


def test_pysher_hears_no_counts_without_the_flag(pusher_server):
    with pysher_clients(pusher_server, None, None) as (watcher, other):
        _, counts = subscribe(pusher_server, watcher, "private-device-1", "pusher_internal:subscription_count")
        subscribe(pusher_server, other, "private-device-1")
        with pytest.raises(queue.Empty):
            counts.get(timeout=0.5)


def test_channel_lists_with_subscription_count_through_the_official_library(pusher_server):
    clients = [connect_pysher(pusher_server) for _ in range(2)]
    try:
        subscribe(pusher_server, clients[0], "private-device-0001")
        subscribe(pusher_server, clients[1], "private-device-0001")
        subscribe(pusher_server, clients[1], "private-device-0002")
        subscribe(pusher_server, clients[1], "private-other")
        info = official(pusher_server).channels_info("private-device-", ["subscription_count"])
        assert info == {"channels": {"private-device-0001": {"subscription_count": 2},
                                     "private-device-0002": {"subscription_count": 1}}}
        assert official(pusher_server).channels_info("private-device-") == {
            "channels": {"private-device-0001": {}, "private-device-0002": {}}}
        close(clients.pop())
        info = official(pusher_server).channels_info("private-device-", ["subscription_count"])
        assert info == {"channels": {"private-device-0001": {"subscription_count": 1}}}
    finally:
        for client in clients:
            close(client)


@pytest.mark.parametrize("args, message", [
    (["--webhook-retry-max", "soon"], "--webhook-retry-max must be a number of seconds"),
    (["--webhook-retry-max=-1"], "--webhook-retry-max must be a number of seconds"),
    (["--webhook-batch-size", "0"], "--webhook-batch-size must be 1...1000"),
    (["--webhook-batch-ms=-5"], "--webhook-batch-ms must be 0...60000"),
    (["--webhook-retry-initial-ms", "0"], "--webhook-retry-initial-ms must be at least 1"),
    (["--webhook-retry-initial-ms", "500", "--webhook-retry-cap-ms", "100"], "--webhook-retry-cap-ms must be at least"),
    (["--subscription-count=yes"], "subscription-count"),
])
def test_bad_flags_are_refused_with_a_clear_message(args, message):
    result = subprocess.run([binary("PUSHER_LOCAL_BIN", "pusher-local"), "--port", "0", *args],
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 64, (result.returncode, result.stderr)
    assert message in result.stderr, result.stderr
    assert "listening" not in result.stdout


def test_connections_endpoint_lists_each_pysher_connection_with_its_channels(pusher_server):
    """`GET /pusher-local/apps/ID/connections` (the cluster tests' proof of who holds a channel):
    pysher's own socket ids, their channels sorted, the presence user id, the peer address."""
    with pysher_clients(pusher_server, {"user_id": "ann"}, None) as (a, b):
        for channel in ("zeta", "private-room", "presence-team"):
            subscribe(pusher_server, a, channel)
        subscribe(pusher_server, b, "zeta")
        status, body = pusher_server.app_control("GET", "connections")
        assert status == 200, body
        records = {r["socket_id"]: r for r in json.loads(body)}
        assert set(records) == {a.connection.socket_id, b.connection.socket_id}
        assert records[a.connection.socket_id]["channels"] == ["presence-team", "private-room", "zeta"]
        assert records[a.connection.socket_id]["user_id"] == "ann"
        assert records[b.connection.socket_id]["channels"] == ["zeta"]
        assert "user_id" not in records[b.connection.socket_id]
        assert all(r["remote"].startswith("127.0.0.1:") for r in records.values())
    deadline = time.monotonic() + TIMEOUT
    while json.loads(pusher_server.app_control("GET", "connections")[1]):
        assert time.monotonic() < deadline, "closed connections are still listed"
        time.sleep(0.05)

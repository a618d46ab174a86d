"""Users end to end (docs/pusher-protocol.md §1 "User sign-in", contract §8.2): the bridge signs in
as a Pusher user on every connection, mirrors its watchlist to retained `<users topic>/<id>/online`,
forwards events sent to its own user to `<users topic>/<user>/events/<event>`, and turns MQTT
messages into `sendToUser` (`to_user`) and `terminate_connections` (`terminate_user`) calls.

Real processes: mosquitto, pusher-local (with `--watchlist-events`) and the daemon. Device clients
are raw WebSocket clients written here, speaking the protocol as pusher-js does (pusher:signin with
the official library's `authenticate_user`, then a plain subscribe to `#server-to-user-<id>`); the
backend is the official `pusher` library; MQTT is paho-mqtt.

Besides the brief's eight scenarios: events to the bridge's user under churn of one of two
connections, `user_auth_endpoint` (a failed sign-in counted and retried on the same connection),
no gap record for `#server-to-user-<id>`, and one watchlist view across a close with two connections.
Only pusher-local's fault switches are used (`disconnect?socket_id=S&code=4200`); waits are
conditions with deadlines."""

from __future__ import annotations

import json
import re
import threading
import subprocess
import time
from datetime import datetime, timezone

import pytest
import websocket

from bridge_testkit.clients import Closed, RawPusherClient
from bridge_testkit.harness import (MQTTCollector, PusherLocal, binary, bridge_config, free_port, publish,
                                    pusher_connections, retained, rule, wait_until)
from test_payload_rules import books_balance, metrics

BRIDGE_USER = "bridge-factory"
USERS_TOPIC = "dash/users"
DEAD_LETTERS = "pusher-mqtt-bridge/e2e/dead-letter"
GAPS = "pusher-mqtt-bridge/e2e/status/gaps"
SETTLE = 2.0  # UsersMirror.settleTime: an id not reported online is published "false" this long after sign-in
LATENCY = 1.0  # the brief: an online/offline change reaches MQTT within 1 s
TIMEOUT = 10

USER_RULES = (rule("notify", "mqtt", topic="notify/+/+", to_user="{1}", event="{2}", qos=1)
              + rule("revoke", "mqtt", topic="admin/terminate/+", terminate_user="{1}", qos=1))


# ---- raw device clients ---------------------------------------------------------------------------

class Device(RawPusherClient):
    """The shared hand-written protocol client (bridge_testkit.clients), answering the server's
    pings, with what a device does here."""

    def __init__(self, server: PusherLocal):
        super().__init__(server, timeout=TIMEOUT, answer_pings=True)

    def user_events(self, count: int, timeout=TIMEOUT) -> list[dict]:
        """The next `count` frames on a `#server-to-user-` channel, nothing skipped but pings."""
        got = []
        while len(got) < count:
            received = self.next_event(timeout)
            assert received.get("channel", "").startswith("#server-to-user-"), f"unexpected frame {received}"
            got.append(received)
        return got

    def sign_in(self, user_id: str, subscribe: bool = True):
        auth = self.server.http_client().authenticate_user(self.socket_id, {"id": user_id})
        self.send("pusher:signin", auth)
        self.wait_for("pusher:signin_success")
        if subscribe:
            channel = "#server-to-user-" + user_id
            self.send("pusher:subscribe", {"auth": "", "channel": channel})
            assert self.wait_for("pusher_internal:subscription_succeeded")["channel"] == channel
        return self

    def first_frame_after_ping(self) -> dict:
        """Pings and returns the next frame: a pong when nothing else was queued for this client."""
        self.send("pusher:ping", {})
        return self.next_event()

    def still_open(self) -> bool:
        frame = self.first_frame_after_ping()
        assert frame["event"] == "pusher:pong", f"unexpected frame before the pong: {frame}"
        return True

    def close_code(self, timeout=TIMEOUT):
        try:
            while True:
                self.next_event(timeout)
        except Closed as closed:
            return closed.code

    def close(self):
        try:
            self.ws.close(timeout=0.5)
        except Exception:  # noqa: BLE001 -- already closed by the server
            pass


class TimedCollector(MQTTCollector):
    """An MQTTCollector that also notes when (time.monotonic()) each message arrived."""

    def __init__(self, port: int, topics: list[str]):
        self.arrivals: list[tuple[float, str, bytes, bool]] = []
        super().__init__(port, topics)
        inner = self.client.on_message

        def on_message(client, userdata, msg):
            with self.lock:
                self.arrivals.append((time.monotonic(), msg.topic, msg.payload, bool(msg.retain)))
            inner(client, userdata, msg)

        self.client.on_message = on_message

    def timed(self, topic: str) -> list[tuple[float, bytes]]:
        with self.lock:
            return [(t, p) for t, tp, p, _ in self.arrivals if tp == topic]

    def arrival(self, topic: str, payload: bytes, after: float = 0.0) -> float | None:
        """When `payload` first arrived on `topic` at or after `after`; None before."""
        return next((t for t, p in self.timed(topic) if p == payload and t >= after), None)


# ---- fixtures and helpers ---------------------------------------------------------------------------

@pytest.fixture
def pusher(workdir):
    """pusher-local with watchlist events on (the default activity timeout: the raw devices stay quiet)."""
    p = PusherLocal(workdir, extra=["--watchlist-events"]).start()
    yield p
    p.stop()


@pytest.fixture
def devices():
    made: list[Device] = []

    def new(server):
        d = Device(server)
        made.append(d)
        return d

    yield new
    for d in made:
        d.close()


def users_config(pusher, broker, workdir, *, watchlist=None, connections: int = 1, metrics_port: int = 0,
                 users: bool = True, sign_in: bool = True, rules: str = USER_RULES) -> str:
    extra = f'user_id = "{BRIDGE_USER}"\nconnections = {connections}\n'
    if sign_in:
        extra = "sign_in = true\n" + extra
    if watchlist is not None:
        extra += f"watchlist = {json.dumps(watchlist)}\n"
    users_table = f'\n[bridge.users]\ntopic = "{USERS_TOPIC}"\n' if users else ""
    config = bridge_config(pusher, broker, workdir, users_table + rules, extra_pusher=extra)
    if metrics_port:
        config = config.replace('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"')
    return config


def start_users_bridge(pusher, broker, workdir, bridges, **options):
    """The bridge signed in as BRIDGE_USER: (bridge, metrics port, monotonic time its connections
    were seen signed in and subscribed to their user channel by pusher-local)."""
    port = free_port()
    bridge = bridges(users_config(pusher, broker, workdir, metrics_port=port, **options))
    wait_bridge_signed_in(pusher, options.get("connections", 1))
    return bridge, port, time.monotonic()


def bridge_sockets(pusher) -> list[str]:
    """Socket ids of the connections signed in as the bridge's user that hold its user channel."""
    return [c["socket_id"] for c in pusher_connections(pusher)
            if c.get("signed_in_as") == BRIDGE_USER and f"#server-to-user-{BRIDGE_USER}" in c["channels"]]


def wait_bridge_signed_in(pusher, count: int = 1, not_sockets=(), timeout: float = 15) -> list[str]:
    return wait_until(lambda: (lambda s: s if len(s) == count and not set(s) & set(not_sockets) else None)(bridge_sockets(pusher)),
                      timeout, 0.02, f"{count} bridge connection(s) signed in as {BRIDGE_USER} and subscribed")


def value(port: int, name: str, **labels) -> float:
    return sum(v for n, lb, v in metrics(port) if n == name and all(lb.get(k) == w for k, w in labels.items()))


def watchlist_online(port: int) -> float:
    return value(port, "pusher_mqtt_bridge_watchlist_online", bridge="e2e")


def online_topic(user: str) -> str:
    return f"{USERS_TOPIC}/{user}/online"


def event_topic(event: str) -> str:
    return f"{USERS_TOPIC}/{BRIDGE_USER}/events/{event}"


def stats(pusher) -> dict:
    status, body = pusher.app_control("GET", "stats")
    assert status == 200, body
    return json.loads(body)


# ---- 1. watchlist to retained online state ----------------------------------------------------------

def test_watchlist_online_state_is_mirrored_to_retained_topics(pusher, broker, workdir, bridges, devices):
    """device-0001 signs in before the bridge's settle time is over: its topic becomes retained
    "true" within 1 s (never "false" first); device-0002 never comes: "false" about 2 s after the
    bridge's sign-in, not before; device-0001 disconnects: "false" within 1 s. A late subscriber
    gets the retained values; the watchlist_online gauge follows."""
    collector = TimedCollector(broker.port, [f"{USERS_TOPIC}/#"])
    bridge, port, signed_in_at = start_users_bridge(pusher, broker, workdir, bridges,
                                                    watchlist=["device-0001", "device-0002"])
    device = devices(pusher)
    signing_at = time.monotonic()
    device.sign_in("device-0001", subscribe=False)
    online_at = wait_until(lambda: collector.arrival(online_topic("device-0001"), b"true"), 5, 0.005,
                           "device-0001 online at MQTT")
    online_latency = online_at - signing_at
    assert online_at - signed_in_at < SETTLE, "the device came online inside the settle time (test premise)"

    never_at = wait_until(lambda: collector.arrival(online_topic("device-0002"), b"false"), 5, 0.01,
                          "device-0002 offline at MQTT after the settle time")
    settle = never_at - signed_in_at
    # The bridge's settle clock starts at its signin_success, a little after pusher-local recorded the sign-in.
    assert SETTLE - 0.25 <= settle <= SETTLE + 1.0, f"device-0002 published false {settle:.3f}s after the sign-in"
    assert [p for _, p in collector.timed(online_topic("device-0001"))] == [b"true"], "no false before it came online"
    wait_until(lambda: watchlist_online(port) == 1, 5, 0.05, "watchlist_online = 1")

    late = retained(broker.port, f"{USERS_TOPIC}/#")
    assert late == {online_topic("device-0001"): b"true", online_topic("device-0002"): b"false"}

    leaving_at = time.monotonic()
    device.close()
    offline_at = wait_until(lambda: collector.arrival(online_topic("device-0001"), b"false", after=leaving_at), 5, 0.005,
                            "device-0001 offline at MQTT")
    offline_latency = offline_at - leaving_at
    print(f"\nwatchlist latencies: online {online_latency * 1000:.0f} ms, offline {offline_latency * 1000:.0f} ms, "
          f"never-online false after {settle * 1000:.0f} ms")
    assert online_latency < LATENCY, f"online took {online_latency:.3f}s"
    assert offline_latency < LATENCY, f"offline took {offline_latency:.3f}s"
    wait_until(lambda: watchlist_online(port) == 0, 5, 0.05, "watchlist_online = 0")

    late = retained(broker.port, f"{USERS_TOPIC}/#")
    assert late == {online_topic("device-0001"): b"false", online_topic("device-0002"): b"false"}
    # Each id's values alternate (no repeats); retention is what the late subscribers above saw.
    assert [p for _, p in collector.timed(online_topic("device-0001"))] == [b"true", b"false"]
    assert [p for _, p in collector.timed(online_topic("device-0002"))] == [b"false"]
    wait_until(lambda: books_balance(port), 5, 0.3, "received = outcomes + buffered")
    assert bridge.running()
    collector.close()


# ---- 2. events to the bridge's user ----------------------------------------------------------------

def test_send_to_user_of_the_bridge_reaches_mqtt(pusher, broker, workdir, bridges):
    collector = TimedCollector(broker.port, [f"{USERS_TOPIC}/#"])
    _, port, _ = start_users_bridge(pusher, broker, workdir, bridges)
    data = {"order": 17, "text": "caf\u00e9 / line 3"}
    pusher.http_client().send_to_user(BRIDGE_USER, "hello", data)
    wait_until(lambda: collector.payloads(event_topic("hello")), 5, 0.01, "the event at MQTT")
    [message] = [m for m in collector.snapshot() if m.topic == event_topic("hello")]
    assert json.loads(message.payload) == data
    assert not message.retain
    wait_until(lambda: books_balance(port), 5, 0.3, "received = outcomes + buffered")
    assert value(port, "pusher_mqtt_bridge_messages_total", rule="users", outcome="delivered") == 1
    collector.close()


# ---- 3. to_user ---------------------------------------------------------------------------------------

def test_notify_reaches_every_connection_of_that_user_and_no_other(pusher, broker, workdir, bridges, devices):
    _, port, _ = start_users_bridge(pusher, broker, workdir, bridges)
    u1a, u1b = devices(pusher).sign_in("u1"), devices(pusher).sign_in("u1")
    u2, anonymous = devices(pusher).sign_in("u2"), devices(pusher)
    payload = '{"level":3,"text":"over temperature"}'
    publish(broker.port, "notify/u1/alert", payload, qos=1)
    publish(broker.port, "notify/u1/marker", "end", qos=1)  # ordered after the alert on the same rule
    for client in (u1a, u1b):
        alert, marker = client.user_events(2)
        assert (alert["event"], alert["channel"], alert["data"]) == ("alert", "#server-to-user-u1", payload)
        assert (marker["event"], marker["data"]) == ("marker", "end"), "the alert once, then the marker"
    # u2 gets its own message first: nothing of u1's came before it.
    publish(broker.port, "notify/u2/ping", "for-u2", qos=1)
    [own] = u2.user_events(1)
    assert (own["event"], own["channel"], own["data"]) == ("ping", "#server-to-user-u2", "for-u2")
    assert anonymous.still_open()
    wait_until(lambda: value(port, "pusher_mqtt_bridge_messages_total", rule="notify", outcome="delivered") == 3,
               5, 0.05, "three notify deliveries")
    wait_until(lambda: books_balance(port), 5, 0.3, "received = outcomes + buffered")


# ---- 4. terminate_user ------------------------------------------------------------------------------

def test_terminate_closes_exactly_that_users_connections_with_4009(pusher, broker, workdir, bridges, devices):
    _, port, _ = start_users_bridge(pusher, broker, workdir, bridges)
    u1a, u1b = devices(pusher).sign_in("u1"), devices(pusher).sign_in("u1", subscribe=False)
    u2, anonymous = devices(pusher).sign_in("u2"), devices(pusher)
    publish(broker.port, "admin/terminate/u1", "ignored payload", qos=1)
    assert u1a.close_code() == 4009
    assert u1b.close_code() == 4009
    assert u2.still_open()
    assert anonymous.still_open()
    assert stats(pusher)["connections_terminated"] == 2
    # pusher-local forgets a connection once its close has finished, after the client saw the code.
    wait_until(lambda: sorted(c.get("signed_in_as", "") for c in pusher_connections(pusher)) == ["", BRIDGE_USER, "u2"],
               5, 0.05, "the terminated connections gone from pusher-local's list")
    wait_until(lambda: value(port, "pusher_mqtt_bridge_messages_total", rule="revoke", outcome="delivered") == 1,
               5, 0.05, "the revoke delivery counted")


# ---- 5. check -------------------------------------------------------------------------------------------

def check(workdir, name: str, config: str) -> tuple[subprocess.CompletedProcess, str]:
    path = workdir / name
    path.write_text(config)
    done = subprocess.run([binary("BRIDGE_BIN", "pusher-mqtt-bridge"), "check", "--config", str(path)],
                          capture_output=True, text=True, timeout=30)
    return done, str(path)


def line_of(config: str, prefix: str) -> int:
    return next(i for i, line in enumerate(config.splitlines(), 1) if line.startswith(prefix))


def test_check_refuses_a_watchlist_of_101_ids(pusher, broker, workdir):
    config = users_config(pusher, broker, workdir, watchlist=[f"device-{i:04d}" for i in range(101)])
    done, path = check(workdir, "watchlist-101.conf", config)
    assert done.returncode == 78, done.stdout[-2000:] + done.stderr[-2000:]
    line = line_of(config, "watchlist = ")
    assert done.stderr.splitlines() == [
        f"{path}:{line}: error: bridge.e2e.pusher.watchlist: holds 101 ids; Pusher allows at most 100 (it would keep the first 100)"]
    # 100 is fine.
    ok, _ = check(workdir, "watchlist-100.conf",
                  users_config(pusher, broker, workdir, watchlist=[f"device-{i:04d}" for i in range(100)]))
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_check_refuses_a_watchlist_without_sign_in(pusher, broker, workdir):
    config = users_config(pusher, broker, workdir, watchlist=["device-0001"], sign_in=False, users=False)
    done, path = check(workdir, "watchlist-no-signin.conf", config)
    assert done.returncode == 78, done.stdout[-2000:] + done.stderr[-2000:]
    line = line_of(config, "watchlist = ")
    errors = done.stderr.splitlines()
    assert errors == [f"{path}:{line}: error: bridge.e2e.pusher.watchlist: needs sign_in = true: "
                      "the watchlist travels in the bridge's sign-in"], errors


# ---- 6. sign-in across a 4200 close and a pusher-local restart ----------------------------------------

def test_sign_in_survives_a_4200_close_and_a_pusher_local_restart(pusher, broker, workdir, bridges, devices):
    collector = TimedCollector(broker.port, [f"{USERS_TOPIC}/#"])
    bridge, port, _ = start_users_bridge(pusher, broker, workdir, bridges, watchlist=["device-0001", "device-0002"])
    http = pusher.http_client()
    device1 = devices(pusher).sign_in("device-0001", subscribe=False)
    wait_until(lambda: collector.payloads(online_topic("device-0001")) == [b"true"], 5, 0.01, "device-0001 online")
    wait_until(lambda: collector.payloads(online_topic("device-0002")) == [b"false"], 5, 0.01, "device-0002 offline")

    # -- a 4200 close of the bridge's connection: it reconnects and signs in again.
    [old] = bridge_sockets(pusher)
    status, body = pusher.app_control("POST", f"disconnect?socket_id={old}&code=4200")
    assert status == 200 and json.loads(body) == {"closed": 1}, body
    [new] = wait_bridge_signed_in(pusher, not_sockets=[old])
    assert new != old
    wait_until(lambda: bridge.log().count("signed in to Pusher") == 2, 5, 0.05, "the second sign-in in the log")
    http.send_to_user(BRIDGE_USER, "after-4200", {"n": 1})
    wait_until(lambda: collector.payloads(event_topic("after-4200")) == [b'{"n":1}'] or
               [json.loads(p) for p in collector.payloads(event_topic("after-4200"))] == [{"n": 1}],
               5, 0.01, "an event to the bridge's user after the 4200 close")
    wait_until(lambda: watchlist_online(port) == 1, 5, 0.05, "watchlist_online back to 1 after the reconnect")
    # Changes after the reconnect are published at once.
    changed_at = time.monotonic()
    device2 = devices(pusher).sign_in("device-0002", subscribe=False)
    t = wait_until(lambda: collector.arrival(online_topic("device-0002"), b"true", after=changed_at), 5, 0.005,
                   "device-0002 online after the reconnect")
    assert t - changed_at < LATENCY
    assert collector.payloads(online_topic("device-0001")) == [b"true"], "device-0001 stayed online throughout"

    # -- pusher-local restarted on the same port: every device is gone with it; only device-0002 returns.
    pusher_port = pusher.port
    [before_restart] = bridge_sockets(pusher)
    assert pusher.stop() == 0
    device1.close()
    device2.close()
    restarted = PusherLocal(workdir, port=pusher_port, extra=["--watchlist-events"]).start()
    try:
        wait_bridge_signed_in(restarted, not_sockets=[before_restart], timeout=20)
        returned_at = time.monotonic()
        devices(restarted).sign_in("device-0002", subscribe=False)
        # device-0001 was online when the server went away and is not back: "false" once the new
        # sign-in has settled; device-0002 is online again (it never stopped being "true" on MQTT,
        # or it went false and true again: either way its last value is "true").
        wait_until(lambda: collector.payloads(online_topic("device-0001"))[-1:] == [b"false"], SETTLE + 3, 0.01,
                   "device-0001 offline after the restart")
        wait_until(lambda: watchlist_online(port) == 1, 5, 0.05, "watchlist_online = 1 after the restart")
        assert collector.payloads(online_topic("device-0002"))[-1] == b"true", collector.payloads(online_topic("device-0002"))
        assert retained(broker.port, f"{USERS_TOPIC}/+/online") == {
            online_topic("device-0001"): b"false", online_topic("device-0002"): b"true"}
        print(f"\nafter the restart: device-0001 false {collector.timed(online_topic('device-0001'))[-1][0] - returned_at:.3f}s "
              "after device-0002 signed in again")
        restarted.http_client().send_to_user(BRIDGE_USER, "after-restart", {"n": 2})
        wait_until(lambda: [json.loads(p) for p in collector.payloads(event_topic("after-restart"))] == [{"n": 2}],
                   5, 0.01, "an event to the bridge's user after the restart")
        assert value(port, "pusher_mqtt_bridge_errors_total", bridge="e2e", kind="pusher_sign_in") == 0
        assert bridge.running()
    finally:
        restarted.stop()
    collector.close()


# ---- 7. invalid rendered user ids --------------------------------------------------------------------

@pytest.mark.parametrize("topic, rule_name", [
    ("notify/caf\u00e9/alert", "notify"),   # not in A-Z a-z 0-9 _ - = @ , . ;
    ("notify/a b/alert", "notify"),          # MQTT topics may hold spaces; user ids may not
    (f"notify/{'u' * 201}/alert", "notify"),  # over 200 characters
    ("admin/terminate/caf\u00e9", "revoke"),
], ids=["accent", "space", "201-chars", "terminate-accent"])
def test_an_invalid_user_id_is_a_dead_letter_and_the_next_message_goes_through(
        pusher, broker, workdir, bridges, devices, topic, rule_name):
    bridge, port, _ = start_users_bridge(pusher, broker, workdir, bridges)
    letters = MQTTCollector(broker.port, [DEAD_LETTERS])
    u1 = devices(pusher).sign_in("u1")
    publish(broker.port, topic, "to nobody", qos=1)
    publish(broker.port, "notify/u1/alert", "good", qos=1)
    [event] = u1.user_events(1)
    assert (event["event"], event["data"]) == ("alert", "good")
    wait_until(lambda: letters.payloads(DEAD_LETTERS), 5, 0.02, "the dead letter")
    [letter] = [json.loads(p) for p in letters.payloads(DEAD_LETTERS)]
    assert letter["code"] == "invalid_user", letter
    assert letter["rule"] == rule_name, letter
    wait_until(lambda: value(port, "pusher_mqtt_bridge_messages_total", rule=rule_name, direction="mqtt_to_pusher",
                             outcome="dead_lettered") == 1, 5, 0.05, "dead_lettered counted")
    # (The dead letter's own publish is a Pusher -> MQTT arrival, delivered under the rule's name.)
    # "good" reaches u1 before pusher-local answers the bridge's request, which counts it: wait.
    wait_until(lambda: value(port, "pusher_mqtt_bridge_messages_total", rule="notify", direction="mqtt_to_pusher",
                             outcome="delivered") == 1, 5, 0.05, "the good message counted delivered")
    wait_until(lambda: books_balance(port), 5, 0.3, "received = outcomes + buffered")
    assert u1.still_open() and bridge.running()
    letters.close()


# ---- 8. two connections -------------------------------------------------------------------------------

def test_two_connections_each_sign_in_and_deliver_once(pusher, broker, workdir, bridges, devices):
    collector = TimedCollector(broker.port, [f"{USERS_TOPIC}/#"])
    _, port, _ = start_users_bridge(pusher, broker, workdir, bridges, connections=2)
    assert len(bridge_sockets(pusher)) == 2
    u1a, u1b = devices(pusher).sign_in("u1"), devices(pusher).sign_in("u1")
    publish(broker.port, "notify/u1/alert", "once", qos=1)
    publish(broker.port, "notify/u1/marker", "end", qos=1)
    for client in (u1a, u1b):
        alert, marker = client.user_events(2)
        assert (alert["event"], alert["data"], marker["event"]) == ("alert", "once", "marker")

    http = pusher.http_client()
    http.send_to_user(BRIDGE_USER, "hello", {"n": 1})
    http.send_to_user(BRIDGE_USER, "hello", {"n": 2})
    # Both connections hear both events: two arrivals each, one delivered and one duplicate.
    wait_until(lambda: value(port, "pusher_mqtt_bridge_messages_total", outcome="duplicate") == 2, 5, 0.05,
               "the second connection's copies counted duplicate")
    wait_until(lambda: value(port, "pusher_mqtt_bridge_messages_total", rule="users", outcome="delivered") == 2, 5, 0.05,
               "both events delivered")
    wait_until(lambda: len(collector.payloads(event_topic("hello"))) >= 2, 5, 0.01, "both events at MQTT")
    wait_until(lambda: books_balance(port), 5, 0.3, "received = outcomes + buffered")
    assert [json.loads(p) for p in collector.payloads(event_topic("hello"))] == [{"n": 1}, {"n": 2}]
    collector.close()


# ---- two connections under churn: redundancy must keep events to the bridge's user ----------------

CONNECTED = re.compile(r" pusher connected \[bridge=e2e pusher\.connection=(\d+) pusher\.socket_id=([0-9.]+)\]")


def socket_of(bridge, connection: int) -> str | None:
    """The socket id the bridge's log last named for `connection`."""
    found = [m.group(2) for m in CONNECTED.finditer(bridge.log()) if int(m.group(1)) == connection]
    return found[-1] if found else None


class UserStream:
    """The official library's send_to_user to the bridge's user, `{"seq": i}`, at `rate` per second."""

    def __init__(self, pusher, rate: float):
        self.http, self.rate = pusher.http_client(), rate
        self.sent = 0
        self.times: list[float] = []
        self.errors: list[str] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        start = time.monotonic()
        while not self.stopping.is_set():
            # The publisher's pace, not a wait for the bridge. One clock read: checking and then
            # reading again could give sleep() a negative length and end this thread.
            delay = start + self.sent / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                self.times.append(time.time())
                self.http.send_to_user(BRIDGE_USER, "tick", {"seq": self.sent})
            except Exception as e:  # noqa: BLE001 -- reported by stop()
                self.errors.append(repr(e))
                return
            self.sent += 1

    def stop(self) -> int:
        self.stopping.set()
        self.thread.join(30)
        assert not self.errors, self.errors[:3]
        return self.sent


def wall_clock(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def connection_0_timeline(bridge) -> list[str]:
    """When connection 0 was closed, signed in and subscribed to its user channel (log timestamps)."""
    marks = (("Pusher connection closed", "closed"), ("signed in to Pusher", "signed in"),
             ("subscribed [bridge=e2e pusher.channel=#server-to-user-", "subscribed"))
    out = []
    for line in bridge.log().splitlines():
        if "pusher.connection=0" in line:
            for needle, label in marks:
                if needle in line:
                    out.append(f"  {line[11:23]} {label}")
    return out


CLOSES = 5


def test_two_connections_lose_no_user_event_while_one_connection_is_closed(pusher, broker, workdir, bridges):
    """connections = 2 is redundancy: while one connection is closed (4200) and comes back, the
    other one still hears every event sent to the bridge's user, so each reaches MQTT exactly once.
    The first connection (the one whose copies are published) is closed CLOSES times."""
    collector = MQTTCollector(broker.port, [event_topic("tick")])
    bridge, port, _ = start_users_bridge(pusher, broker, workdir, bridges, connections=2)
    stream = UserStream(pusher, rate=250)
    wait_until(lambda: len(collector.payloads()) >= 50, 10, 0.02, "the stream at MQTT")
    for _ in range(CLOSES):
        victim = socket_of(bridge, 0)
        status, body = pusher.app_control("POST", f"disconnect?socket_id={victim}&code=4200")
        assert status == 200 and json.loads(body) == {"closed": 1}, body
        wait_bridge_signed_in(pusher, 2, not_sockets=[victim])
        wait_until(lambda: socket_of(bridge, 0) != victim, 5, 0.02, "connection 0 back")
        seen = len(collector.payloads())
        wait_until(lambda: len(collector.payloads()) >= seen + 50, 10, 0.02, "the stream after the reconnect")
    total = stream.stop()
    try:
        wait_until(lambda: total - 1 in [json.loads(p)["seq"] for p in collector.payloads()], 10, 0.05, "the last event")
    except AssertionError:
        pass  # lost as well: the comparison below says which
    wait_until(lambda: books_balance(port), 5, 0.3, "received = outcomes + buffered")
    got = [json.loads(p)["seq"] for p in collector.payloads()]
    missing = sorted(set(range(total)) - set(got))
    assert got == list(range(total)), (
        f"{len(got)} messages for {total} events; missing {missing[:20]}, "
        f"doubled {sorted(s for s in set(got) if got.count(s) > 1)[:20]}\n"
        + "\n".join(f"seq {m} sent at {wall_clock(stream.times[m])}" for m in missing[:10])
        + "\nconnection 0 in the bridge's log:\n" + "\n".join(connection_0_timeline(bridge)))
    collector.close()


# ---- user_auth_endpoint -------------------------------------------------------------------------------

class AuthEndpoint:
    """A user authentication endpoint as a backend runs one (the official library's
    authenticate_user on the form's socket_id); the first `failures` requests answer 500."""

    def __init__(self, pusher, user_data: dict, failures: int = 0):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import parse_qs

        self.requests: list[dict] = []
        self.times: list[float] = []
        api, outer = pusher.http_client(), self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())
                outer.requests.append(form)
                outer.times.append(time.monotonic())
                if len(outer.requests) <= failures:
                    self.send_response(500)
                    self.end_headers()
                    return
                body = json.dumps(api.authenticate_user(form["socket_id"][0], user_data)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/pusher/user-auth"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_user_auth_endpoint_chooses_the_user_and_a_failed_sign_in_is_counted_and_retried(
        pusher, broker, workdir, bridges, devices):
    """With user_auth_endpoint the endpoint's user_data is the bridge's user and watchlist. Its
    first answer is a 500: errors_total{kind="pusher_sign_in"} counts it and the bridge signs in
    again on the same connection about 1 s later, then events to that user and its watchlist reach MQTT."""
    endpoint = AuthEndpoint(pusher, {"id": "bridge-endpoint", "watchlist": ["device-0001"]}, failures=1)
    collector = MQTTCollector(broker.port, [f"{USERS_TOPIC}/#"])
    port = free_port()
    config = bridge_config(pusher, broker, workdir, f'\n[bridge.users]\ntopic = "{USERS_TOPIC}"\n' + USER_RULES,
                           extra_pusher=f'sign_in = true\nuser_auth_endpoint = "{endpoint.url}"\n')
    bridges(config.replace('metrics = ""', f'metrics = "127.0.0.1:{port}"'))
    try:
        wait_until(lambda: value(port, "pusher_mqtt_bridge_errors_total", bridge="e2e", kind="pusher_sign_in") >= 1
                   if endpoint.requests else False, 10, 0.05, "the failed sign-in counted")
        wait_until(lambda: any(c.get("signed_in_as") == "bridge-endpoint" and "#server-to-user-bridge-endpoint" in c["channels"]
                               for c in pusher_connections(pusher)), 5, 0.05, "the sign-in retried and accepted")
        assert len(endpoint.requests) == 2, endpoint.requests
        # Tried again on the same connection (the one socket id), after the first retry delay of 1 s.
        assert endpoint.requests[0]["socket_id"] == endpoint.requests[1]["socket_id"], endpoint.requests
        retry_after = endpoint.times[1] - endpoint.times[0]
        assert 0.9 <= retry_after <= 2.0, f"retried after {retry_after:.3f}s"
        devices(pusher).sign_in("device-0001", subscribe=False)
        wait_until(lambda: collector.payloads(online_topic("device-0001")) == [b"true"], 5, 0.01, "the endpoint's watchlist")
        pusher.http_client().send_to_user("bridge-endpoint", "hello", {"via": "endpoint"})
        wait_until(lambda: [json.loads(p) for p in collector.payloads(f"{USERS_TOPIC}/bridge-endpoint/events/hello")]
                   == [{"via": "endpoint"}], 5, 0.01, "the event to the endpoint's user")
    finally:
        endpoint.close()
        collector.close()


# ---- the user channel is the session's, not a channel the bridge holds ----------------------------

def test_a_reconnect_reports_no_gap_for_the_users_own_channel(pusher, broker, workdir, bridges):
    """`#server-to-user-<id>` belongs to the sign-in, not to the bridge's channels: a 4200 close
    and reconnect of the only connection publishes no gap record for it (gap records are for the
    channels rules hold, docs/pusher-merge.md) and pusher_gaps_total stays 0."""
    collector = MQTTCollector(broker.port, [f"{USERS_TOPIC}/#", GAPS])  # one subscriber: the outbox's order
    _, port, _ = start_users_bridge(pusher, broker, workdir, bridges)
    [old] = bridge_sockets(pusher)
    status, body = pusher.app_control("POST", f"disconnect?socket_id={old}&code=4200")
    assert status == 200 and json.loads(body) == {"closed": 1}, body
    wait_bridge_signed_in(pusher, not_sockets=[old])
    # An event after the reconnect, then an MQTT round trip: a gap record, published when the
    # channel is held again, would be ahead of it in the bridge's outbox.
    pusher.http_client().send_to_user(BRIDGE_USER, "after", {"n": 1})
    wait_until(lambda: collector.payloads(event_topic("after")), 5, 0.01, "the event after the reconnect")
    wait_until(lambda: books_balance(port), 5, 0.3, "received = outcomes + buffered")
    assert collector.payloads(GAPS) == [], f"gap records for the user's channel: {collector.payloads(GAPS)}"
    assert value(port, "pusher_mqtt_bridge_pusher_gaps_total", bridge="e2e") == 0
    collector.close()


# ---- two connections and the watchlist ------------------------------------------------------------

def test_two_connections_publish_one_watchlist_view_across_a_close(pusher, broker, workdir, bridges, devices):
    """connections = 2 with a watchlist: the online state is published once, not once per
    connection; closing the first connection (whose view is published) and its return change
    nothing on MQTT; a change afterwards is published once, at once."""
    collector = TimedCollector(broker.port, [f"{USERS_TOPIC}/#"])
    bridge, port, _ = start_users_bridge(pusher, broker, workdir, bridges, connections=2, watchlist=["device-0001"])
    device = devices(pusher).sign_in("device-0001", subscribe=False)
    wait_until(lambda: collector.payloads(online_topic("device-0001")) == [b"true"], 5, 0.01, "device-0001 online")
    victim = socket_of(bridge, 0)
    status, body = pusher.app_control("POST", f"disconnect?socket_id={victim}&code=4200")
    assert status == 200 and json.loads(body) == {"closed": 1}, body
    wait_bridge_signed_in(pusher, 2, not_sockets=[victim])
    wait_until(lambda: socket_of(bridge, 0) != victim, 5, 0.02, "connection 0 back")
    wait_until(lambda: watchlist_online(port) == 1, 5, 0.05, "watchlist_online = 1 after the reconnect")
    leaving_at = time.monotonic()
    device.close()
    t = wait_until(lambda: collector.arrival(online_topic("device-0001"), b"false", after=leaving_at), 5, 0.005,
                   "device-0001 offline")
    assert t - leaving_at < LATENCY
    wait_until(lambda: watchlist_online(port) == 0, 5, 0.05, "watchlist_online = 0")
    wait_until(lambda: books_balance(port), 5, 0.3, "received = outcomes + buffered")
    assert collector.payloads(online_topic("device-0001")) == [b"true", b"false"]
    assert value(port, "pusher_mqtt_bridge_messages_total", rule="users", outcome="delivered") == 2
    collector.close()

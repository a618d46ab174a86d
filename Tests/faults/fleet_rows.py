"""Fault-matrix rows for channel discovery (docs/contract.md §7.1), run by matrix.py as custom rows.

`discovery-api-failures`: the bridge holds 10 discovered channels (`private-device-000`…`009`,
each occupied by a pysher client) with tagged Pusher -> MQTT traffic flowing on them, when the
channel query (`GET /apps/ID/channels…`, through `ChannelQueryFaultProxy`) answers 503 for 20 s.
Event publishes (`batch_events`) are not touched: the test's sender goes straight to pusher-local,
and the proxy passes every request that is not a channel query. Five more channels are occupied
5 s into the outage. The expectation (matrix.rows(), written before running):

- the held channels stay subscribed all along (pusher-local's stats, read every 100 ms);
- no event on them is lost, duplicated or reordered (checker.py, as every other row);
- the failed polls are retried with the reconnect backoff (200 ms doubling to the 2 s cap,
  ±20 %): more channel queries during the outage than the 5 s interval alone would make (≥ 6),
  no two closer than 150 ms, the gaps growing up to the cap;
- the channels occupied during the outage are not joined before it ends (every poll failed) and
  are joined within 2 s (the backoff cap) + 5 s (the interval) + 3 s after it ends.
"""

from __future__ import annotations

import time
import traceback
import types
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent

import paho.mqtt.client as mqtt

from bridge_testkit.faults.checker import Expectation, counter_identity
from bridge_testkit.faults.proxy import HTTPFaultProxy
from bridge_testkit.faults.rig import close_in_reverse
from bridge_testkit.faults.traffic import PusherSender, Recorder, tag_of
from bridge_testkit.harness import Bridge, Mosquitto, PusherLocal, bridge_config, free_port, rule, wait_until

PREFIX = "private-device-"
HELD = [f"{PREFIX}{n:03d}" for n in range(10)]
LATE = [f"{PREFIX}{n:03d}" for n in range(10, 15)]
OUTAGE_S = 20.0
INTERVAL_S = 5.0
BACKOFF_CAP_S = 2.0

RULE = rule("devices", "pusher", channel_prefix=PREFIX, events=["tagged"], topic="faults/fleet/{suffix}/{event}", qos=1,
            discovery_interval=f"{INTERVAL_S:g}s")


class ChannelQueryFaultProxy(HTTPFaultProxy):
    """An HTTPFaultProxy whose `status`/`hang` modes apply to channel queries only (`/channels` in
    the path); every other request passes. Each channel query is recorded: (time, mode)."""

    def __init__(self, upstream_port: int, name: str = "channels-proxy"):
        self._wanted = "pass"
        self._head = b""
        self.channel_queries: list[tuple[float, str]] = []
        super().__init__(upstream_port, name=name)

    @staticmethod
    def _is_channel_query(head: bytes) -> bool:
        first = head.split(b"\r\n", 1)[0]
        return first.startswith(b"GET ") and b"/channels" in first

    @property
    def mode(self) -> str:
        # Read by HTTPFaultProxy._handle right after it read a request (no await in between, one
        # event loop thread): `_head` is that request's head.
        if self._wanted in ("status", "hang"):
            return self._wanted if self._is_channel_query(self._head) else "pass"
        return self._wanted

    @mode.setter
    def mode(self, value: str):
        self._wanted = value

    async def _read_message(self, reader):
        message = await HTTPFaultProxy._read_message(reader)
        if message is not None and not message[0].startswith(b"HTTP/"):
            self._head = message[0]
            if self._is_channel_query(message[0]):
                self.channel_queries.append((time.monotonic(), self._wanted))
        return message


class FleetReceiver:
    """paho-mqtt QoS 1 subscriber (persistent session) on faults/fleet/#: stream p2m/<channel>."""

    def __init__(self, port: int, client_id: str):
        self.received = Recorder()
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False,
                                  protocol=mqtt.MQTTv311)
        self.client.reconnect_delay_set(0.1, 1)
        self.client.on_connect = lambda c, *_: c.subscribe("faults/fleet/#", 1)
        self.client.on_message = lambda _c, _u, msg: self.received.add(f"p2m/{PREFIX}{msg.topic.split('/')[2]}",
                                                                       tag_of(msg.payload))
        self.client.connect("127.0.0.1", port, keepalive=5)
        self.client.loop_start()
        time.sleep(0.5)

    def close(self):
        self.client.loop_stop()
        self.client.disconnect()


def backoff_misses(times: list[float]) -> tuple[list[str], list[float]]:
    """What is wrong with the channel queries made during the outage (their times), and the gaps."""
    gaps = [round(b - a, 2) for a, b in zip(times, times[1:])]
    misses = []
    if len(times) < 6:
        misses.append(f"{len(times)} channel queries in {OUTAGE_S:g} s of 503: not retried with backoff")
    if any(g < 0.15 for g in gaps):
        misses.append(f"retries closer than 150 ms (a hot loop): gaps {gaps}")
    if any(g > BACKOFF_CAP_S * 1.2 + 0.5 for g in gaps):
        misses.append(f"a retry waited longer than the {BACKOFF_CAP_S:g} s backoff cap: gaps {gaps}")
    head = gaps[:3]
    if len(head) == 3 and not (head[0] < head[2]):
        misses.append(f"the first retries do not back off: gaps {gaps}")
    return misses, gaps


def settled_identity(metrics_port: int, settle: float = 10.0) -> dict:
    """docs/contract.md §7.6 once the traffic stopped: the scrape repeated until two agree."""
    deadline, previous = time.monotonic() + settle, None
    while True:
        time.sleep(1.2)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            text = ""
        current = counter_identity(text, "faults")
        key = {d: str(i) for d, i in current.items()}
        if (key == previous and all(i.holds for i in current.values())) or time.monotonic() > deadline:
            return current
        previous = key


def discovery_api_failures(matrix: types.ModuleType):
    """The row for matrix.rows(); `matrix` is the running matrix module (Row, Result, helpers)."""
    p2m = Expectation(0, max_recovery_s=2,
                      why="docs/contract.md §7.1 'failed poll': held channels are kept while the channel query fails, so "
                          "their events flow on: zero loss, order kept; the failed polls are retried with the reconnect "
                          "backoff (>= 6 queries in 20 s, gaps growing to the 2 s cap); channels occupied during the "
                          "outage are joined only after it, within 2 s + the 5 s interval + 3 s")
    m2p = Expectation(0, why="no MQTT -> Pusher traffic in this row (not judged)")
    return matrix.Row("discovery-api-failures",
                      f"channel query (GET /apps/ID/channels) answers 503 for {OUTAGE_S:g} s while 10 discovered channels carry "
                      "traffic; 5 more channels occupied 5 s into it",
                      p2m, m2p, matrix.not_injected, custom=lambda row, base: run(matrix, row, base))


def run(matrix: types.ModuleType, row, base: Path):
    from bridge_testkit.fleet import FleetClient, HoldMonitor

    started = time.monotonic()
    workdir = base / row.name
    workdir.mkdir(parents=True, exist_ok=True)
    processes, closers = [], []
    observations: list[str] = []
    failures: list[str] = []
    observed: dict = {}
    bridge = None
    try:
        broker = Mosquitto(workdir).start()
        processes.append(broker)
        pusher = PusherLocal(workdir, extra=["--activity-timeout", "2"]).start()
        processes.append(pusher)
        proxy = ChannelQueryFaultProxy(pusher.port)
        closers.append(proxy.close)
        metrics_port = free_port()
        config = bridge_config(pusher, broker, workdir, RULE, name="faults", extra_pusher=f"rest_port = {proxy.port}")
        config = config.replace('metrics = ""', f'metrics = "127.0.0.1:{metrics_port}"').replace('log_level = "debug"',
                                                                                                'log_level = "info"')
        bridge = Bridge(workdir, config, name="bridge")
        bridge.start()
        wait_until(lambda: not bridge.running() or pusher.control("GET", f"/pusher-local/apps/{pusher.app_id}/stats")[0] == 200,
                   10, 0.1, "pusher-local stats")
        time.sleep(1.0)
        if not bridge.running():
            raise AssertionError(f"the daemon refused the config or exited: {bridge.log()[-1500:]}")

        clients = [FleetClient("127.0.0.1", pusher.port, pusher.key, pusher.secret, HELD)]
        closers.append(lambda: [c.close() for c in clients])
        wait_until(lambda: clients[0].all_subscribed(), 10, 0.05, "pysher to occupy 10 channels")
        monitor = HoldMonitor(pusher)
        closers.append(monitor.close)
        wait_until(lambda: set(HELD) <= monitor.held(), INTERVAL_S + 5, 0.1, "the bridge to hold the 10 channels")

        receiver = FleetReceiver(broker.port, f"fleet-recv-{time.monotonic_ns()}")
        closers.append(receiver.close)
        sender = PusherSender("127.0.0.1", pusher.port, pusher.app_id, pusher.key, pusher.secret, HELD, rate=matrix.RATE)
        closers.append(lambda: sender.stop())
        sender.start()
        time.sleep(matrix.WARMUP_S)

        dropped_held: list[tuple[float, list[str]]] = []
        proxy.set_mode("status", 503)
        fault_start = time.monotonic()
        late_occupied = None
        while time.monotonic() - fault_start < OUTAGE_S:
            if late_occupied is None and time.monotonic() - fault_start >= 5.0:
                clients.append(FleetClient("127.0.0.1", pusher.port, pusher.key, pusher.secret, LATE))
                late_occupied = time.monotonic()
            not_held = sorted(set(HELD) - monitor.held())
            if not_held:
                dropped_held.append((round(time.monotonic() - fault_start, 1), not_held))
            time.sleep(0.1)
        late_held_during = sorted(set(LATE) & monitor.held())
        proxy.set_mode("pass")
        fault_end = time.monotonic()

        try:
            wait_until(lambda: set(LATE) <= monitor.held(), BACKOFF_CAP_S + INTERVAL_S + 3, 0.1, "the late channels to be joined")
            late_join = time.monotonic() - fault_end
        except AssertionError:
            late_join = None
        time.sleep(matrix.COOLDOWN_S)
        sender.stop()
        deadline = time.monotonic() + 15  # until everything arrived; what is missing after that is lost
        while time.monotonic() < deadline and receiver.received.count() < sender.sent.count():
            time.sleep(0.2)
        time.sleep(1.0)  # late duplicates

        during = [t for t, mode in proxy.channel_queries if fault_start <= t < fault_end and mode == "status"]
        retry_misses, gaps = backoff_misses(during)
        queries_before = [t for t, _ in proxy.channel_queries if t < fault_start]
        observations.append(f"channel queries: {len(queries_before)} before the outage, {len(during)} answered 503 during it "
                            f"(gaps s: {gaps}), {len(proxy.channel_queries) - len(queries_before) - len(during)} after")
        observations.append(f"held channels ever not held during the outage: {dropped_held[:5] or 'none'}")
        observations.append(f"late channels joined during the outage: {late_held_during or 'none'}; joined "
                            f"{'never' if late_join is None else f'{late_join:.1f} s'} after it ended")
        failures += retry_misses
        if dropped_held:
            failures.append(f"held channels were left during the outage: {dropped_held[:3]}")
        if late_held_during:
            failures.append(f"channels joined while every channel query failed: {late_held_during}")
        if late_join is None:
            failures.append(f"late channels not joined within {BACKOFF_CAP_S + INTERVAL_S + 3:g} s after the outage")
        if not bridge.running():
            failures.append("the bridge is not running at the end")

        totals, recovery, misses, _ = matrix.judge_direction(sender.sent.snapshot(), receiver.received.snapshot(), row.p2m,
                                                             [fault_end])
        observed = {"p2m": matrix.fmt_dir(totals, recovery), "sender_errors": {"p2m": sender.errors}}
        identity = settled_identity(metrics_port)
        observed["identity"] = {d: str(i) for d, i in identity.items()}
        failures += [f"counters do not balance for {d}: received {i}" for d, i in identity.items() if not i.holds]
        failures = [f"P->M {m}" for m in misses] + failures
    except Exception as e:  # a row that cannot run is a MISS with the reason, never a crash of the matrix
        failures.append(f"row error: {e!r}")
        observations.append(traceback.format_exc(limit=3))
    finally:
        if bridge is not None:
            bridge.stop(timeout=10)
        close_in_reverse(closers, processes)
    return matrix.Result(row.name, row.fault, matrix.describe(row.p2m), matrix.describe(row.m2p), observed,
                         "PASS" if not failures else "MISS", failures, observations, round(time.monotonic() - started, 1))

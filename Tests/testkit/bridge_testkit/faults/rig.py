"""One fault-matrix setup: mosquitto, pusher-local, fault proxies, the bridge daemon, and tagged
traffic both ways with its receivers -- all real processes on 127.0.0.1 (or in namespaces of our
own for the partition row), stopped by PID when the row ends."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import types
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent

from bridge_testkit.faults.checker import Expectation, classify, counter_identity, recovery_time, summarize
from bridge_testkit.faults.proxy import HTTPFaultProxy, TCPFaultProxy
from bridge_testkit.faults.traffic import MQTTReceiver, MQTTSender, PusherSender, PysherReceiver, tag_of
from bridge_testkit.harness import Bridge, Mosquitto, PusherLocal, bridge_config, free_port, rule, wait_until

# FAULTS_CHANNELS (default 2): how many channels each way (the rate is spread over them).
_COUNT = int(os.environ.get("FAULTS_CHANNELS", "2"))
_NAMES = ["a", "b"] if _COUNT == 2 else [f"c{n:02d}" for n in range(_COUNT)]
P2M_CHANNELS = [f"faults-{n}" for n in _NAMES]
M2P_TOPICS = [f"faults/m2p/{n}" for n in _NAMES]
M2P_CHANNELS = {f"faults-m2p-{n}": f"faults/m2p/{n}" for n in _NAMES}

def bridge_rules(p2m_channels: list[str]) -> str:
    """One Pusher -> MQTT rule per channel (`faults/p2m/<channel>`) and the MQTT -> Pusher rule
    (`faults/m2p/+` -> `faults-m2p-<level>`): the rows' traffic (also the cluster rows')."""
    return "".join(rule(f"p2m-{c}", "pusher", channel=c, events=["tagged"], topic="faults/p2m/{channel}", qos=1)
                   for c in p2m_channels) + rule("m2p", "mqtt", topic="faults/m2p/+", channel="faults-m2p-{1}",
                                                 event="tagged", qos=1)


RULES = bridge_rules(P2M_CHANNELS)

# A rule that only changes routing (SIGHUP rows): applying it keeps both connections.
EXTRA_RULE = """
[[bridge.rule]]
name = "extra-{n}"
from = "mqtt"
topic = "faults/extra/{n}"
channel = "faults-extra-{n}"
event = "tagged"
qos = 1
"""


class Traffic:
    """Tagged traffic both ways through a rig, and its receivers: Pusher -> MQTT on `p2m_channels`
    (the official library sending, a paho-mqtt QoS 1 subscriber with a persistent session counting),
    MQTT -> Pusher on M2P_TOPICS (counted at the Pusher HTTP API through the rig's `http_proxy`, or
    at a pysher subscriber without one). The rig provides `client_broker_port`, `client_pusher_port`,
    `pusher`, `http_proxy`, `rate`, `uid` and `closers`, and `mqtt_credentials` = (username, password)
    when its broker wants them (the MQTT clients connect without otherwise)."""

    p2m_channels: list[str] = P2M_CHANNELS

    def start_traffic(self):
        username, password = getattr(self, "mqtt_credentials", None) or (None, None)
        self.receiver = self.p2m_receiver(username, password)
        self.closers.append(self.receiver.close)
        self.pysher = PysherReceiver("127.0.0.1", self.client_pusher_port, self.pusher.key, M2P_CHANNELS)
        self.closers.append(self.pysher.close)
        self.m2p = MQTTSender(self.client_broker_port, M2P_TOPICS, client_id=f"send-{self.uid}", rate=self.rate,
                              username=username, password=password)
        self.closers.append(self.m2p.close)
        self.p2m = self.p2m_sender()
        self.traffic_started()
        self.m2p.start()
        self.p2m.start()

    def p2m_sender(self):
        """The Pusher -> MQTT load (`sent`, `errors`, `start()`, `stop()`): one PusherSender over `p2m_channels`."""
        return PusherSender("127.0.0.1", self.client_pusher_port, self.pusher.app_id, self.pusher.key,
                            self.pusher.secret, self.p2m_channels, rate=getattr(self, "p2m_rate", self.rate))

    def p2m_receiver(self, username: str | None, password: str | None):
        """The Pusher -> MQTT receiver (`received`, `close()`): one QoS 1 subscriber of `faults/p2m/#`."""
        return MQTTReceiver(self.client_broker_port, "faults/p2m/#", client_id=f"recv-{self.uid}", username=username,
                            password=password)

    def traffic_started(self):
        """Called once the senders exist, before they start (a rig's own samplers)."""

    def stop_traffic(self, drain_timeout: float = 30):
        self.p2m.stop()
        self.m2p.stop()
        sent_p2m, sent_m2p = self.p2m.sent.count(), self.m2p.sent.count()

        def all_in():
            return (len({(s, q) for s, v in self.receiver.received.snapshot().items() for q, _ in v}) >= sent_p2m
                    and len({(s, q) for s, v in self.m2p_received().items() for q, _ in v}) >= sent_m2p)

        # Until everything arrived, or nothing more arrived for 4 s (what is missing then is lost:
        # rows with an expected loss need not wait for the whole drain timeout).
        deadline = time.monotonic() + drain_timeout
        last_counts, last_change = None, time.monotonic()
        while time.monotonic() < deadline and not all_in():
            counts = (self.receiver.received.count(), sum(len(v) for v in self.m2p_received().values()))
            if counts != last_counts:
                last_counts, last_change = counts, time.monotonic()
            elif time.monotonic() - last_change >= 4.0:
                break
            time.sleep(0.2)
        time.sleep(1.0)  # late duplicates

    def m2p_received(self) -> dict[str, list[tuple[int, float]]]:
        """MQTT -> Pusher arrivals the row is judged on: what the HTTP API accepted, or the pysher
        receiver's when the bridge does not go through the HTTP proxy (partition rows)."""
        return self.pysher.received.snapshot() if self.http_proxy is None else self.api_received()

    def api_received(self) -> dict[str, list[tuple[int, float]]]:
        """MQTT -> Pusher as the Pusher HTTP API accepted it (recorded by the HTTP proxy)."""
        out: dict[str, list[tuple[int, float]]] = {}
        for channel, data, at in self.http_proxy.events():
            topic = M2P_CHANNELS.get(channel)
            seq = tag_of(data) if isinstance(data, str) else None
            if topic is not None and seq is not None:
                out.setdefault(f"m2p/{topic}", []).append((seq, at))
        return out


class Rig(Traffic):
    """Everything one row needs. `netns` = a netns.Partition for the partition row."""

    def __init__(self, workdir: Path, name: str, rate: float = 200, netns=None):
        self.workdir, self.name, self.rate, self.netns = workdir, name, rate, netns
        workdir.mkdir(parents=True, exist_ok=True)
        self.processes = []
        self.closers = []
        self.metrics_port = free_port()
        self.uid = f"{name}-{time.monotonic_ns()}"

    # ---- processes -------------------------------------------------------------------------
    def start(self):
        ns_prefix = self.netns.exec_prefix(self.netns.server_ns) if self.netns else []
        self.broker = Mosquitto(self.workdir)
        if self.netns:
            # Inside the server namespace: listen on every address of that namespace.
            self.broker.conf.write_text(self.broker.conf.read_text().replace(f"listener {self.broker.port} 127.0.0.1",
                                                                             f"listener {self.broker.port}"))
            self.broker.argv = ns_prefix + self.broker.argv
        self.processes.append(self.broker)
        if self.netns:
            start_without_port_check(self.broker)
            wait_until(lambda: self._ns_port_open(self.broker.port), 10, what="mosquitto in netns")
        else:
            self.broker.start()

        pl_port = free_port() if self.netns else 0
        self.pusher = PusherLocal(self.workdir, port=pl_port, extra=["--activity-timeout", "2"])
        if self.netns:
            self.pusher.argv = ns_prefix + [self.pusher.argv[0], "--host", "0.0.0.0", *self.pusher.argv[3:]]
        self.processes.append(self.pusher)
        self.pusher.start()

        if self.netns:
            from bridge_testkit.faults.netns import SERVER_ADDR
            srv = self.netns.server_ns
            # The test's own clients reach the servers through proxies that connect from inside
            # the server namespace; the bridge reaches them over the veth pair.
            self.mqtt_proxy = TCPFaultProxy(self.broker.port, name="mqtt-ns", upstream_netns=srv)
            self.ws_proxy = TCPFaultProxy(self.pusher.port, name="ws-ns", upstream_netns=srv)
            # The bridge calls the HTTP API directly over the veth pair: MQTT -> Pusher is judged
            # by the pysher receiver in this row.
            self.http_proxy = None
            self.closers += [self.mqtt_proxy.close, self.ws_proxy.close]
            self.client_broker_port = self.mqtt_proxy.port
            self.client_pusher_port = self.ws_proxy.port
            config = bridge_config(types.SimpleNamespace(key=self.pusher.key, app_id=self.pusher.app_id,
                                                         secret=self.pusher.secret, port=self.pusher.port),
                                   types.SimpleNamespace(port=self.broker.port), self.workdir, RULES,
                                   name="faults", daemon="", extra_pusher="")
            config = config.replace('host = "127.0.0.1"', f'host = "{SERVER_ADDR}"')
        else:
            self.mqtt_proxy = TCPFaultProxy(self.broker.port, name="mqtt")
            self.ws_proxy = TCPFaultProxy(self.pusher.port, name="ws")
            self.http_proxy = HTTPFaultProxy(self.pusher.port, name="http")
            self.closers += [self.mqtt_proxy.close, self.ws_proxy.close, self.http_proxy.close]
            self.client_broker_port = self.broker.port
            self.client_pusher_port = self.pusher.port
            config = bridge_config(types.SimpleNamespace(key=self.pusher.key, app_id=self.pusher.app_id,
                                                         secret=self.pusher.secret, port=self.ws_proxy.port),
                                   types.SimpleNamespace(port=self.mqtt_proxy.port), self.workdir, RULES,
                                   name="faults", extra_pusher=f"rest_port = {self.http_proxy.port}")
        # In the partition row the endpoint listens on the bridge namespace's own loopback
        # (``metrics_text`` reads it from inside; /readyz is not used there).
        config = config.replace('metrics = ""', f'metrics = "127.0.0.1:{self.metrics_port}"')
        config = config.replace('log_level = "debug"', 'log_level = "info"')
        self.config = config
        self.bridge = Bridge(self.workdir, config, name="bridge")
        if self.netns:
            self.bridge.argv = self.netns.exec_prefix(self.netns.bridge_ns) + self.bridge.argv
        self.processes.append(self.bridge)
        self.bridge.start()
        self.wait_subscribed()
        return self

    def _ns_port_open(self, port: int) -> bool:
        import subprocess
        r = subprocess.run(self.netns.exec_prefix(self.netns.server_ns) + ["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"],
                           capture_output=True, timeout=5)
        return r.returncode == 0

    def stats(self) -> dict:
        status, body = self.pusher_control("GET", f"/pusher-local/apps/{self.pusher.app_id}/stats")
        return json.loads(body) if status == 200 else {}

    def pusher_control(self, method: str, path: str) -> tuple[int, bytes]:
        req = urllib.request.Request(f"http://127.0.0.1:{self.client_pusher_port}{path}", method=method,
                                     data=b"" if method == "POST" else None)
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except OSError as e:
            return 0, str(e).encode()

    def subscribed(self) -> bool:
        subs = self.stats().get("subscriptions", {})
        # The pysher receiver also subscribes the m2p channels; the bridge is alone on the p2m ones.
        return all(subs.get(c) for c in P2M_CHANNELS)

    def wait_subscribed(self, timeout: float = 20):
        wait_until(self.subscribed, timeout, 0.05, "the bridge to subscribe its channels")

    def metrics_text(self) -> str:
        """One scrape of the daemon's /metrics ("" when it does not answer)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        if self.netns:
            import subprocess
            read = "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())"
            r = subprocess.run(self.netns.exec_prefix(self.netns.bridge_ns) + [sys.executable, "-c", read, url],
                               capture_output=True, text=True, timeout=15)
            return r.stdout if r.returncode == 0 else ""
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.read().decode()
        except OSError:
            return ""

    def counter_identity(self, settle: float = 10.0) -> dict:
        """docs/contract.md §7.6 after the traffic stopped: received = outcomes + buffered, per
        direction. buffered_messages is set each housekeeping second, so the scrape is repeated
        until two in a row agree (or `settle` s passed)."""
        deadline = time.monotonic() + settle
        previous = None
        while True:
            time.sleep(1.2)
            current = counter_identity(self.metrics_text(), "faults")
            key = {d: str(i) for d, i in current.items()}
            if (key == previous and all(i.holds for i in current.values())) or time.monotonic() > deadline:
                return current
            previous = key

    def readyz(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def restart_broker(self, sig: int, down: float = 1.0):
        self.broker.stop(sig)
        time.sleep(down)
        if self.netns:
            start_without_port_check(self.broker)
            wait_until(lambda: self._ns_port_open(self.broker.port), 10, what="mosquitto in netns")
        else:
            self.broker.start()

    def restart_bridge(self, down: float = 2.0):
        self.bridge.kill()
        time.sleep(down)
        self.bridge.start()

    def close(self):
        # The daemon first (while its servers are still there, so it stops quickly), then the
        # test's clients and proxies, then the servers.
        if hasattr(self, "bridge"):
            self.bridge.stop(signal.SIGTERM, timeout=10)
        close_in_reverse(self.closers, self.processes)


def close_in_reverse(closers: list, processes: list):
    """The test's clients and proxies, then the servers, each in the reverse of the order they
    were started; a failure to close one does not keep the others open."""
    for close in reversed(closers):
        try:
            close()
        except Exception:
            pass
    for p in reversed(processes):
        try:
            p.stop(signal.SIGTERM, timeout=10)
        except Exception:
            pass


def start_without_port_check(p):
    """Start a harness process without its 127.0.0.1 port check (it listens in another namespace)."""
    from bridge_testkit.harness import Process
    Process.start(p)


def judge_direction(sent: dict, received: dict, expectation: Expectation, fault_ends: list[float]):
    reports = [classify(stream, sent.get(stream, []), received.get(stream, [])) for stream in sorted(set(sent) | set(received))]
    totals = summarize(reports)
    all_sent = [x for v in sent.values() for x in v]
    all_received = [x for v in received.values() for x in v]
    recoveries = [recovery_time(all_sent, all_received, end) for end in fault_ends]
    worst = None if any(r is None for r in recoveries) else (max(recoveries) if recoveries else 0.0)
    return totals, worst, expectation.judge(totals, worst), reports


__all__ = ["Rig", "judge_direction", "EXTRA_RULE"]

"""A real Prometheus (Debian's `prometheus`) against a running daemon (`make test-prometheus`).

Real mosquitto, real pusher-local, the daemon with /metrics; a little traffic both ways, one forced
Pusher reconnect and one survived protocol error (so reconnects_total and errors_total have a
non-zero series even in a build that exports no zero series; the test prints which families were
missing until then); Prometheus scrapes /metrics every second and evaluates
contrib/prometheus/alerts.yml. Then:
  - every metric name that contrib/grafana/pusher-mqtt-bridge.json and the alert rules use is in the
    scrape, and in what Prometheus ingested;
  - every rule is healthy and every dashboard query is valid PromQL that Prometheus evaluates;
  - stopping the broker makes PusherMQTTBridgeNotReady go pending, then firing within its `for:`.

The shipped rules wait 2 minutes before firing (what an operator wants). So that this test takes
seconds, it loads a copy of alerts.yml that it generates with only the `for:` durations divided by
FOR_SCALE (2m -> 4s); expressions, labels and annotations are the shipped ones. The shipped
durations themselves are covered by `promtool test rules contrib/prometheus/alerts_test.yml`.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from bridge_testkit.clients import PysherListener
from bridge_testkit.harness import (REPO, Bridge, MQTTCollector, Mosquitto, Process, PusherLocal, bridge_tables,
                                    free_port, port_open, publish, rule, wait_until)

ALERTS = REPO / "contrib" / "prometheus" / "alerts.yml"
DASHBOARD = REPO / "contrib" / "grafana" / "pusher-mqtt-bridge.json"
FOR_SCALE = 30
SCRAPE_SECONDS = 1
METRIC_NAME = re.compile(r"\bpusher_mqtt_bridge_[a-z_]+\b")


def rule_exprs() -> list[str]:
    return re.findall(r"^\s+expr: (.*?)\n\s+(?:for|labels):", ALERTS.read_text(), re.M | re.S)


def dashboard_exprs() -> list[str]:
    return [t["expr"] for p in json.loads(DASHBOARD.read_text())["panels"] for t in p.get("targets", [])]


def used_metric_names() -> set[str]:
    """The metric names in the rules' and the panels' queries."""
    return {name for expr in rule_exprs() + dashboard_exprs() for name in METRIC_NAME.findall(expr)}


def scaled_rules(text: str) -> str:
    """alerts.yml with every `for: <n><unit>` divided by FOR_SCALE (expressions untouched)."""
    unit = {"s": 1, "m": 60, "h": 3600}

    def scale(m: re.Match) -> str:
        seconds = int(m.group(2)) * unit[m.group(3)]
        return f"{m.group(1)}{max(1, seconds // FOR_SCALE)}s"

    scaled, count = re.subn(r"^(\s+for: )(\d+)([smh])\s*$", scale, text, flags=re.M)
    assert count >= 4, "expected the shipped rules to have for: durations"
    return scaled


def shipped_for_seconds(alert: str) -> int:
    block = ALERTS.read_text().split(f"- alert: {alert}\n", 1)[1].split("- alert:", 1)[0]
    m = re.search(r"^\s+for: (\d+)([smh])\s*$", block, re.M)
    assert m, f"{alert} has no for:"
    return int(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2)]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def scraped_names(text: str) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def sample(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


class Prometheus(Process):
    """Debian's prometheus on a free loopback port, scraping one target every second."""

    def __init__(self, workdir: Path, target_port: int, rules: Path):
        self.port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(
            f"global:\n  scrape_interval: {SCRAPE_SECONDS}s\n  evaluation_interval: {SCRAPE_SECONDS}s\n"
            f"rule_files:\n  - {rules}\n"
            "scrape_configs:\n  - job_name: pusher-mqtt-bridge\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
        )
        argv = [shutil.which("prometheus") or "prometheus", f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}", f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn"]
        super().__init__("prometheus", argv, workdir)

    def start(self, stdout=None):
        super().start(stdout)
        # Prometheus listens before its storage is open and answers 503 until then; /-/ready is its
        # own word that the API serves.
        wait_until(lambda: self.ready() or not self.running(), 30, 0.1, "prometheus to be ready")
        if not self.running():
            raise RuntimeError("prometheus did not start:\n" + self.log())
        return self

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def api(self, path: str, **params: str) -> dict:
        query = ("?" + urllib.parse.urlencode(params)) if params else ""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/{path}{query}", timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def alerts(self, name: str) -> list[dict]:
        return [a for a in self.api("alerts")["alerts"] if a["labels"]["alertname"] == name]


def config(pusher: PusherLocal, broker: Mosquitto, workdir: Path, metrics_port: int) -> str:
    return f"""
[daemon]
log_level = "info"
metrics = "127.0.0.1:{metrics_port}"
webhooks = "127.0.0.1:{free_port()}"
state_dir = "{workdir / 'state'}"
shutdown_grace = "2s"

{bridge_tables("prom", pusher, broker, pusher_lines='sign_in = true', mqtt_lines='keepalive = "5s"')}
clean_session = false

# Users (docs/contract.md §8.2): watchlist_online and the sign-in errors are on the dashboard.
[bridge.users]
topic = "prom/users"

[bridge.reconnect]
initial_delay = "200ms"
max_delay = "1s"

[bridge.buffer]
persist = true

{rule("prices", "pusher", channel="market", events=["*"], topic="prom/prices/{event}", qos=1, payload="data")}
{rule("readings", "mqtt", topic="prom/sensors/+", channel="sensor-{1}", event="reading", qos=1, payload="data")}
# Discovery, throttle and webhooks (docs/contract.md §7.1–7.3): their families are on the dashboard.
{rule("devices", "pusher", channel_prefix="device-", topic="prom/devices/{suffix}/{event}", discovery_interval="5s",
      throttle="1s")}

[bridge.webhooks]
topic_prefix = "prom/webhooks"

# A one-member cluster (docs/contract.md §7.4): the cluster families are on the dashboard too.
{bridge_tables("promcluster", pusher, broker, mqtt_lines='keepalive = "5s"')}

{rule("levels", "pusher", channel="levels", topic="prom/levels/{event}")}
[bridge.cluster]
group = "prom"
instance = "solo"
"""


@pytest.fixture
def stack(tmp_path: Path):
    if not shutil.which("prometheus"):
        pytest.fail("Debian's prometheus is not installed: run `make test-prometheus` (scripts/setup-deb.sh prometheus)")
    started: list[Process] = []
    try:
        broker = Mosquitto(tmp_path)
        started.append(broker)
        broker.start()
        pusher = PusherLocal(tmp_path, extra=["--activity-timeout", "5"])
        started.append(pusher)
        pusher.start()
        metrics_port = free_port()
        bridge = Bridge(tmp_path, config(pusher, broker, tmp_path, metrics_port))
        started.append(bridge)
        bridge.start()
        rules = tmp_path / "alerts-scaled.yml"
        rules.write_text(scaled_rules(ALERTS.read_text()))
        prometheus = Prometheus(tmp_path, metrics_port, rules)
        yield broker, pusher, bridge, metrics_port, prometheus, started
    finally:
        for p in reversed(started):
            p.stop(signal.SIGTERM, 10)
        for p in started:
            if p.name in ("bridge", "prometheus"):
                sys.stderr.write(f"\n----- {p.name} log -----\n{p.log()[-1500:]}\n")


def test_dashboard_and_alert_metrics_exist_and_not_ready_fires(stack):
    broker, pusher, bridge, metrics_port, prometheus, started = stack
    up = 'pusher_mqtt_bridge_connection_up{bridge="prom",side="%s"} 1'
    wait_until(lambda: port_open(metrics_port) or not bridge.running(), 20, 0.1, "/metrics to listen")
    assert bridge.running(), bridge.log()
    wait_until(lambda: all(up % s in scrape(metrics_port) for s in ("pusher", "mqtt")), 20, 0.2, "both sides up")
    wait_until(lambda: pusher.control("GET", f"/pusher-local/apps/{pusher.app_id}/stats")[1].count(b'"market"') > 0,
               10, 0.2, "the bridge to subscribe to market")

    # Traffic both ways, each seen arriving at a third-party client.
    collector = MQTTCollector(broker.port, ["prom/prices/#"])
    listener = PysherListener(pusher, "sensor-kitchen", ["reading"])
    try:
        pusher.http_client().trigger("market", "new-price", {"p": 1})
        publish(broker.port, "prom/sensors/kitchen", b'{"t":21.5}')
        wait_until(lambda: collector.payloads("prom/prices/new-price"), 10, 0.1, "Pusher -> MQTT message")
        wait_until(lambda: listener.data(), 10, 0.1, "MQTT -> Pusher event")
    finally:
        collector.close()
        listener.close()
    assert json.loads(collector.payloads("prom/prices/new-price")[0]) == {"p": 1}
    assert json.loads(listener.data()[0]) == {"t": 21.5}

    # Counters that only move on trouble, driven so they exist whether or not zero series are
    # exported (docs/contract.md §7.6): reconnects_total by closing pusher-local's connections with
    # 4200 (reconnect at once), errors_total by a pusher:error frame.
    before = scrape(metrics_port)
    drives = {"pusher_mqtt_bridge_reconnects_total", "pusher_mqtt_bridge_errors_total"}
    absent_at_first = sorted(n for n in drives if n not in scraped_names(before))
    assert pusher.control("POST", f"/pusher-local/apps/{pusher.app_id}/disconnect?code=4200")[0] == 200
    wait_until(lambda: sample(scrape(metrics_port), "pusher_mqtt_bridge_reconnects_total", side="pusher") >= 1,
               15, 0.2, "a pusher reconnect to be counted")
    wait_until(lambda: up % "pusher" in scrape(metrics_port), 15, 0.2, "pusher side up again")
    frame = json.dumps({"event": "pusher:error", "data": {"code": 4301, "message": "test: a survived error"}})
    assert pusher.control("POST", f"/pusher-local/apps/{pusher.app_id}/raw", frame.encode())[0] == 200
    wait_until(lambda: "pusher_mqtt_bridge_errors_total{" in scrape(metrics_port), 10, 0.2, "an error to be counted")
    sys.stderr.write(f"\nfamilies absent from the first scrape until driven: {absent_at_first}\n")

    # A delivery is counted when the far side acknowledges it, which may be after the client saw it.
    def counted(text: str) -> bool:
        return (sample(text, "pusher_mqtt_bridge_messages_total", direction="pusher_to_mqtt", outcome="delivered") >= 1
                and sample(text, "pusher_mqtt_bridge_messages_total", direction="mqtt_to_pusher", outcome="delivered") >= 1
                and sample(text, "pusher_mqtt_bridge_delivery_seconds_count") >= 2)

    text = wait_until(lambda: (lambda t: t if counted(t) else None)(scrape(metrics_port)), 10, 0.2,
                      "a delivery each way in messages_total and delivery_seconds")
    names = scraped_names(text)
    used = used_metric_names()
    assert used, "no metric names found in the dashboard and rules"
    missing = sorted(used - names)
    assert not missing, f"used by contrib/ but not in the daemon's /metrics: {missing}"

    # Prometheus: scrapes, ingests those names, loads every rule healthy, evaluates every panel.
    started.append(prometheus)  # stopped by the fixture even if it does not come up
    prometheus.start()
    wait_until(lambda: any(t["health"] == "up" for t in prometheus.api("targets")["activeTargets"]), 20, 0.5,
               "prometheus to scrape the daemon")
    wait_until(lambda: used <= set(prometheus.api("label/__name__/values")), 20, 0.5, "prometheus to ingest the names")
    groups = prometheus.api("rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) == ALERTS.read_text().count("- alert:")
    wait_until(lambda: all(r.get("lastEvaluation", "").startswith("2") and r["health"] == "ok"
                           for g in prometheus.api("rules")["groups"] for r in g["rules"]),
               20, 0.5, "every rule evaluated and healthy")
    assert not prometheus.alerts("PusherMQTTBridgeNotReady"), "not ready while both sides are up"
    exprs = dashboard_exprs()
    assert exprs and len(rule_exprs()) == len(rules)
    for expr in exprs:
        query = expr.replace("$bridge", ".+").replace("$__rate_interval", "30s")
        result = prometheus.api("query", query=query)
        assert result["resultType"] in ("vector", "matrix", "scalar"), (expr, result)

    # Stop the broker: not ready goes pending, then firing after its (scaled) for:.
    for_seconds = max(1, shipped_for_seconds("PusherMQTTBridgeNotReady") // FOR_SCALE)
    broker.stop()
    stopped = time.monotonic()
    wait_until(lambda: f'side="mqtt"}} 0' in scrape(metrics_port), 15, 0.2, "mqtt side down in /metrics")
    # Both bridges use the broker; the assertions follow bridge "prom".
    def prom_alerts(state: str) -> list:
        return [a for a in prometheus.alerts("PusherMQTTBridgeNotReady")
                if a["state"] == state and a["labels"].get("bridge") == "prom"]

    pending = wait_until(lambda: prom_alerts("pending"), 10, 0.1, "not-ready pending")
    pending_after = time.monotonic() - stopped
    firing = wait_until(lambda: prom_alerts("firing"), for_seconds + 4 * SCRAPE_SECONDS + 5, 0.1, "not-ready firing")
    firing_after = time.monotonic() - stopped
    sys.stderr.write(f"\nNotReady: pending after {pending_after:.1f}s, firing after {firing_after:.1f}s "
                     f"(for: {for_seconds}s, shipped {shipped_for_seconds('PusherMQTTBridgeNotReady')}s / {FOR_SCALE})\n")
    assert pending[0]["labels"]["bridge"] == "prom"
    assert firing[0]["labels"] == {"alertname": "PusherMQTTBridgeNotReady", "bridge": "prom",
                                   "instance": f"127.0.0.1:{metrics_port}", "job": "pusher-mqtt-bridge",
                                   "severity": "warning"}
    assert firing[0]["annotations"]["runbook"]
    assert firing_after >= for_seconds - SCRAPE_SECONDS, "fired before its for: elapsed"

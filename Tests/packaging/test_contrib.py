"""contrib/ without a daemon: the Grafana dashboard is valid and complete, the alert rules are well formed.

The real proof that every metric name exists is test_prometheus.py (against a running daemon's
/metrics); this file checks the names against the ones the daemon registers in
Sources/BridgeDaemon/Operations/BridgeMetrics.swift, in well under a second.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "contrib" / "grafana" / "pusher-mqtt-bridge.json"
ALERTS = REPO / "contrib" / "prometheus" / "alerts.yml"
# BridgeMetrics.swift makes the registry's metrics; MessageCounterFamily.swift keeps messages_total itself.
METRICS_SOURCES = [REPO / "Sources" / "BridgeDaemon" / "Operations" / name
                   for name in ("BridgeMetrics.swift", "MessageCounterFamily.swift")]
METRIC_NAME = re.compile(r"\bpusher_mqtt_bridge_[a-z_]+\b")


def registered_names() -> set[str]:
    """Names the daemon creates, with the series a histogram exposes."""
    names = {n for source in METRICS_SOURCES for n in re.findall(r'"(pusher_mqtt_bridge_[a-z_]+)"', source.read_text())}
    for histogram in [n for n in names if n.endswith("_seconds")]:
        names |= {histogram + "_bucket", histogram + "_sum", histogram + "_count"}
    return names


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def test_dashboard_is_json_with_a_bridge_variable():
    d = dashboard()
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert "bridge" in variables
    assert "label_values(pusher_mqtt_bridge_connection_up, bridge)" in json.dumps(variables["bridge"]["query"])
    assert variables["bridge"]["multi"] and variables["bridge"]["includeAll"]
    assert d["uid"] and d["title"]


def test_every_panel_query_is_filtered_by_bridge_and_uses_registered_metrics():
    known = registered_names()
    panels = [p for p in dashboard()["panels"] if p["type"] != "row"]
    assert len(panels) >= 8
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for p in panels:
        assert p["targets"], p["title"]
        for t in p["targets"]:
            used = set(METRIC_NAME.findall(t["expr"]))
            assert used, (p["title"], t["expr"])
            assert used <= known, (p["title"], used - known)
            assert '$bridge' in t["expr"], (p["title"], t["expr"])


def test_dashboard_covers_what_an_operator_watches():
    exprs = " ".join(t["expr"] for p in dashboard()["panels"] for t in p.get("targets", []))
    for needed in ("pusher_mqtt_bridge_messages_total", "pusher_mqtt_bridge_delivery_seconds_bucket",
                   "pusher_mqtt_bridge_buffered_messages", "pusher_mqtt_bridge_connection_up",
                   "pusher_mqtt_bridge_reconnects_total", 'outcome="dead_lettered"', 'kind="spool"',
                   "histogram_quantile(0.99", "pusher_mqtt_bridge_dead_letters_stored",
                   "pusher_mqtt_bridge_dead_letters_evicted_total", "pusher_mqtt_bridge_dead_letters_redriven_total"):
        assert needed in exprs, needed


def test_alert_rules_use_registered_metrics_and_carry_a_runbook():
    text = ALERTS.read_text()
    assert set(METRIC_NAME.findall(text)) <= registered_names()
    blocks = text.split("- alert: ")[1:]
    assert len(blocks) >= 6
    for block in blocks:
        name = block.split("\n", 1)[0]
        assert re.search(r"^\s+runbook: \S", block, re.M), f"{name} has no runbook line"
        assert re.search(r"^\s+severity: (warning|critical)$", block, re.M), f"{name} has no severity"


def test_every_alert_has_firing_and_quiet_unit_tests():
    tests = (REPO / "contrib" / "prometheus" / "alerts_test.yml").read_text()
    for name in re.findall(r"^\s+- alert: (\S+)$", ALERTS.read_text(), re.M):
        cases = re.findall(rf"- alertname: {name}\n\s+eval_time: \S+[^\n]*\n\s+exp_alerts:(.*?)(?=\n\s+- alertname:|\n\s+- interval:|\Z)",
                           tests, re.S)
        assert any(c.strip().startswith("[]") for c in cases), f"{name}: no not-firing case"
        assert any("exp_labels" in c for c in cases), f"{name}: no firing case"

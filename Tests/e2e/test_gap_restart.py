"""Gap records across a restart (docs/pusher-merge.md, "Gap records"; docs/contract.md §8.1): the
state directory remembers when each channel was last held, and the first subscription after a
restart reports the gap since then on `<status_topic>/gaps`. Subscribed with paho; the channel
held by the daemon against pusher-local."""

from __future__ import annotations

import json
import signal
import time
from datetime import datetime

from bridge_testkit.clients import wait_bridge_subscribed
from bridge_testkit.harness import MQTTCollector, bridge_config, rule, wait_until

RULES = rule("prices", "pusher", channel="market-data", events=["new-price"], topic="dash/prices", qos=1, payload="data")
GAPS = "pusher-mqtt-bridge/e2e/status/gaps"


def epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_first_start_reports_no_gap_and_a_restart_reports_its_gap(pusher, broker, workdir, bridges):
    """Expected: no gap record at the first start (the channel was never held). After SIGTERM, 2 s
    down, and a start: one record for market-data, `from` within 1 s after the stop began (the file
    is written at stop), `to` after the restart, `seconds` = to − from (± 5 ms) and at least the 2 s
    down."""
    gaps = MQTTCollector(broker.port, [GAPS])
    config = bridge_config(pusher, broker, workdir, RULES)
    first = bridges(config, name="first")
    wait_bridge_subscribed(pusher, "market-data")
    time.sleep(1.0)  # let a record arrive if one (wrongly) would
    assert gaps.payloads(GAPS) == []
    stopped_at = time.time()
    assert first.stop(signal.SIGTERM) == 0
    time.sleep(2.0)
    restarted_at = time.time()
    bridges(config, name="second")
    wait_until(lambda: len(gaps.payloads(GAPS)) >= 1, 15, what="the restart's gap record")
    time.sleep(0.5)
    records = [json.loads(p) for p in gaps.payloads(GAPS)]
    assert len(records) == 1, records
    gap = records[0]
    assert gap["channel"] == "market-data"
    assert stopped_at - 0.05 <= epoch(gap["from"]) <= stopped_at + 1.0, (gap, stopped_at)
    assert epoch(gap["to"]) >= restarted_at, (gap, restarted_at)
    assert abs(gap["seconds"] - (epoch(gap["to"]) - epoch(gap["from"]))) <= 0.005
    assert gap["seconds"] >= 2.0
    gaps.close()


def test_a_killed_daemon_reports_the_gap_from_its_last_write(pusher, broker, workdir, bridges):
    """Expected: SIGKILL leaves the file of at most 5 s before; the next start reports one gap whose
    `from` is within the 5.5 s before the kill and whose length covers the time down."""
    gaps = MQTTCollector(broker.port, [GAPS])
    config = bridge_config(pusher, broker, workdir, RULES)
    first = bridges(config, name="first")
    wait_bridge_subscribed(pusher, "market-data")
    state = workdir / "state" / "e2e" / "pusher_last_held"
    wait_until(lambda: state.exists() and "market-data" in state.read_text(), 10, what="the last-held file")
    time.sleep(1.0)
    killed_at = time.time()
    first.kill()
    time.sleep(1.0)
    bridges(config, name="second")
    wait_until(lambda: len(gaps.payloads(GAPS)) >= 1, 15, what="the gap record after SIGKILL")
    gap = json.loads(gaps.payloads(GAPS)[0])
    assert gap["channel"] == "market-data"
    assert killed_at - 5.5 <= epoch(gap["from"]) <= killed_at, (gap, killed_at)
    assert epoch(gap["to"]) - killed_at >= 1.0
    gaps.close()


def test_a_damaged_last_held_file_is_counted_not_fatal(pusher, broker, workdir, bridges):
    """Expected: a file with one good and two bad lines: the daemon starts, logs that 2 lines were
    not understood, and reports the good channel's gap (at least the 30 s the file says)."""
    gaps = MQTTCollector(broker.port, [GAPS])
    state = workdir / "state" / "e2e"
    state.mkdir(parents=True)
    (state / "pusher_last_held").write_text(f"{int((time.time() - 30) * 1000)} market-data\nnonsense\n12 old\n")
    bridge = bridges(bridge_config(pusher, broker, workdir, RULES))
    wait_until(lambda: len(gaps.payloads(GAPS)) >= 1, 15, what="the gap record from the file")
    gap = json.loads(gaps.payloads(GAPS)[0])
    assert gap["channel"] == "market-data" and gap["seconds"] >= 30
    warnings = [line for line in bridge.log().splitlines() if "last-held file not understood" in line]
    assert len(warnings) == 1 and "lines=2" in warnings[0].replace('"', ""), warnings
    gaps.close()

"""A reload that changes `[bridge.pusher]` (not `connections` or `api_lanes`) keeps the bridge
running and replaces its Pusher connections in place, one at a time (docs/contract.md §8.1,
"staggered reconnects"): the MQTT connection stays; with two connections nothing is lost, with one
the replacement is a gap, reported."""

from __future__ import annotations

import json
import re
import signal
import threading
import time

from bridge_testkit.clients import wait_bridge_subscribed
from bridge_testkit.harness import MQTTCollector, readyz, wait_until
from test_payload_rules import books_balance
from test_redundant_connections import (GAPS_TOPIC, Stream, bridge_connections, channel_rules, duplicates,
                                        every_event_once_in_order, gaps_total, holding_all, sample, sequences, start_bridge)

REPLACED = " pusher connection replaced "


def reload_with_activity_timeout(bridge, seconds: int):
    """Rewrites `[bridge.pusher] activity_timeout` in the bridge's file and sends SIGHUP."""
    text = re.sub(r'activity_timeout = "\d+s"\n', "", bridge.config_path.read_text())
    bridge.write_config(text.replace("[bridge.pusher]\n", f'[bridge.pusher]\nactivity_timeout = "{seconds}s"\n', 1))
    bridge.send_signal(signal.SIGHUP)


class ReadyPoller:
    """/readyz every 50 ms on its own thread: the statuses seen."""

    def __init__(self, port: int):
        self.port, self.codes, self.stopping = port, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping.wait(0.05):
            self.codes.append(readyz(self.port)[0])

    def stop(self) -> list[int]:
        self.stopping.set()
        self.thread.join(5)
        return self.codes


def test_a_pusher_change_replaces_two_connections_one_at_a_time_and_loses_nothing(pusher, broker, workdir, bridges):
    """connections = 2, six channels, the official library triggering on all six at 20 calls/s
    (120 events/s). Four reloads, each changing `[bridge.pusher] activity_timeout` (40 s, 30 s, …).
    Expected: each reload logs "pusher connection replaced" twice and leaves both connections on
    new socket ids, each holding every channel; the MQTT connection is never lost (one "mqtt
    connected" line, `reconnects_total{side="mqtt"}` 0); paho receives every event exactly once on
    each channel, in order; no gap record, pusher_gaps_total 0; the counters balance; /readyz
    answers 200 at every poll (every 50 ms) through the reloads."""
    channels = [f"rl-{i}" for i in range(6)]
    bridge, port = start_bridge(pusher, broker, workdir, bridges, channel_rules(channels), 2)
    collector = MQTTCollector(broker.port, ["out/#"])
    gaps = MQTTCollector(broker.port, [GAPS_TOPIC])
    for k in (0, 1):
        wait_until(lambda k=k: holding_all(bridge, k, channels), 15, 0.1, f"connection {k} to hold every channel")
    wait_until(lambda: readyz(port)[0] == 200, 10, 0.1, "ready")

    stream = Stream(pusher, channels, rate=20).start()
    poller = ReadyPoller(port)
    for i in range(4):
        before = {k: socket for k, (socket, _) in bridge_connections(bridge).items()}
        replaced = bridge.log().count(REPLACED)
        reload_with_activity_timeout(bridge, 40 if i % 2 == 0 else 30)
        wait_until(lambda: bridge.log().count(REPLACED) >= replaced + 2, 60, 0.1, f"reload {i + 1}: both connections replaced")
        now = bridge_connections(bridge)
        assert sorted(now) == [0, 1], now
        for k in (0, 1):
            assert now[k][0] != before[k], f"reload {i + 1}: connection {k} still on {before[k]}"
            assert set(channels) <= now[k][1], f"reload {i + 1}: connection {k} holds {now[k][1]}"
        time.sleep(1)
    total = stream.stop()
    codes = poller.stop()

    every_event_once_in_order(collector, port, channels, total)
    assert duplicates(port) > 0, "the second connection's copies are counted as duplicates"
    assert gaps.payloads() == [], f"no gap while one connection held every channel: {gaps.payloads()}"
    assert gaps_total(port) == 0
    assert bridge.log().count(" mqtt connected ") == 1, "the MQTT connection was kept"
    assert sample(port, "pusher_mqtt_bridge_reconnects_total", bridge="e2e", side="mqtt") == 0
    assert codes and set(codes) == {200}, f"/readyz during the reloads: {sorted(set(codes))} in {len(codes)} polls"
    collector.close()
    gaps.close()


def test_with_one_connection_a_pusher_change_keeps_mqtt_and_reports_the_gap(pusher, broker, workdir, bridges):
    """connections = 1, three channels, 20 calls/s on all three. One reload changing
    `activity_timeout`. Expected: "pusher connection replaced" once, on a new socket id holding
    every channel; the MQTT connection kept (one "mqtt connected" line); one gap record per channel
    (the old connection ends before the new one holds the channel), and the events missing at MQTT,
    if any, were published inside it; everything else arrives once, in order."""
    channels = ["one-a", "one-b", "one-c"]
    bridge, port = start_bridge(pusher, broker, workdir, bridges, channel_rules(channels), 1)
    collector = MQTTCollector(broker.port, ["out/#"])
    gaps = MQTTCollector(broker.port, [GAPS_TOPIC])
    for c in channels:
        wait_bridge_subscribed(pusher, c)
    stream = Stream(pusher, channels, rate=20).start()
    time.sleep(1)
    reload_with_activity_timeout(bridge, 40)
    wait_until(lambda: REPLACED in bridge.log(), 30, 0.1, "the connection replaced")
    wait_until(lambda: len(gaps.payloads()) >= len(channels), 15, 0.1, "a gap record per channel")
    time.sleep(1)
    total = stream.stop()
    wait_until(lambda: all(sequences(collector, c)[-1:] == [total - 1] for c in channels), 30, 0.1, "the last event")
    wait_until(lambda: books_balance(port), 5, 0.3, "received_total = outcomes + buffered")
    records = {json.loads(p)["channel"]: json.loads(p) for p in gaps.payloads()}
    assert sorted(records) == channels, records
    for c in channels:
        got = sequences(collector, c)
        assert got == sorted(set(got)), f"{c}: in order, none doubled"
        missing = sorted(set(range(total)) - set(got))
        assert len(missing) <= 20 * records[c]["seconds"] + 2, (c, missing, records[c])
    assert bridge.log().count(" mqtt connected ") == 1, "the MQTT connection was kept"
    assert bridge.running()
    collector.close()
    gaps.close()

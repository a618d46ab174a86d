"""Fault-matrix rows for redundant Pusher connections and gap records (`[bridge.pusher]
connections = 2`, docs/pusher-merge.md, docs/contract.md §8.1), run by matrix.py on its usual rig
(one mosquitto, one pusher-local, the proxies, tagged traffic both ways at FAULTS_RATE on the rig's
two Pusher -> MQTT channels).

Rows (expectations in `rows()`, written before running):
- `redundant-close-one`: every 2 s for 2 minutes pusher-local closes ONE of the bridge's two
  connections with 4200, alternating: 0 lost, 0 duplicates, no gap record.
- `redundant-blackhole-one`: five times, one of the two connections is black-holed in the
  WebSocket proxy (its packets dropped both ways) until the bridge's pong timeout closes it:
  0 lost, 0 duplicates, no gap record.
- `redundant-pusher-reload`: 10 SIGHUPs changing `[bridge.pusher] activity_timeout`, each
  replacing both connections one at a time, then one with a wrong key (given up after 30 s, the
  other connection on the old settings), then the right key: 0 lost, 0 duplicates, no gap record.
- `redundant-close-both`: pusher-local closes every connection with 4200, five times: what is lost
  is reported, one gap record per channel and close, each lost event sent inside its channel's
  gap (± 100 ms), and each gap no wider than the events delivered around it (± 100 ms).
- `redundant-pusher-restart`: pusher-local stopped and started again on its port, twice: every
  connection lost at once; one gap record per channel and restart, exact as in close-both.
- `redundant-bridge-sigkill`: the daemon is SIGKILLed and restarted after 2 s: one restart gap
  per channel, every lost event inside it.

The gap records are read by a paho-mqtt subscriber on `<status_topic>/gaps`; their `from`/`to`
(wall clock) are compared with the senders' monotonic send times through one offset measured when
the row starts.
"""

from __future__ import annotations

import json
import signal
import time
import types
from datetime import datetime

from bridge_testkit.faults.checker import Expectation
from bridge_testkit.harness import MQTTCollector

GAPS_TOPIC = "pusher-mqtt-bridge/faults/status/gaps"
TOLERANCE_S = 0.1


def two_connections(config: str) -> str:
    """The rig's config with `connections = 2` in `[bridge.pusher]`."""
    assert "[bridge.pusher]\n" in config
    return config.replace("[bridge.pusher]\n", "[bridge.pusher]\nconnections = 2\n", 1)


def bridge_sockets(rig) -> list[str]:
    """The socket ids of the bridge's connections that hold the rig's Pusher -> MQTT channels, in
    order of socket id (pusher-local's own records)."""
    status, body = rig.pusher_control("GET", f"/pusher-local/apps/{rig.pusher.app_id}/connections")
    if status != 200:
        return []
    listing = json.loads(body)
    connections = listing["connections"] if isinstance(listing, dict) else listing
    channels = set(rig.p2m_channels)
    return sorted(c["socket_id"] for c in connections if channels <= set(c.get("channels", [])))


def watch_gaps(rig):
    """Starts collecting gap records (closed with the rig) and the wall-clock offset of the
    monotonic clock."""
    rig.gaps = MQTTCollector(rig.client_broker_port, [GAPS_TOPIC])
    rig.closers.append(rig.gaps.close)
    rig.wall_offset = time.time() - time.monotonic()


def gap_records(rig) -> list[dict]:
    return [json.loads(p) for p in rig.gaps.payloads(GAPS_TOPIC)]


def epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def close_one_alternating(minutes: float = 2.0, every: float = 2.0):
    def inject(rig) -> list[float]:
        watch_gaps(rig)
        ends = []
        deadline = time.monotonic() + minutes * 60
        turn = 0
        longest_wait = 0.0
        while time.monotonic() < deadline:
            started = time.monotonic()
            # Never close the only connection holding the channels (that would be a gap, another
            # row): wait for the last one closed to be back and subscribed.
            sockets = bridge_sockets(rig)
            while len(sockets) < 2 and time.monotonic() - started < 15:
                time.sleep(0.05)
                sockets = bridge_sockets(rig)
            longest_wait = max(longest_wait, time.monotonic() - started)
            if len(sockets) < 2:
                rig.failures.append(f"a closed connection was not back and subscribed within 15 s (close {turn})")
                return ends
            victim = sockets[turn % 2]
            status, body = rig.pusher_control(
                "POST", f"/pusher-local/apps/{rig.pusher.app_id}/disconnect?socket_id={victim}&code=4200")
            if status != 200:
                rig.failures.append(f"close of {victim}: HTTP {status} {body[:80]!r}")
                return ends
            ends.append(time.monotonic())
            turn += 1
            time.sleep(max(0.0, every - (time.monotonic() - started)))
        rig.observations.append(f"{turn} single-connection closes; longest wait for both connections to hold the "
                                f"channels before a close: {longest_wait:.2f} s")
        return ends
    return inject


def blackhole_one(times: int = 5):
    def inject(rig) -> list[float]:
        watch_gaps(rig)
        ends = []
        for i in range(times):
            before = set(bridge_sockets(rig))
            if not rig.ws_proxy.blackhole_oldest():
                rig.failures.append(f"no connection to black-hole at round {i + 1}")
                return ends
            # Until the bridge's pong timeout replaced it (activity_timeout 2 s + pong_timeout 1 s).
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                now = set(bridge_sockets(rig))
                if len(now) == 2 and now != before:
                    break
                time.sleep(0.1)
            else:
                rig.failures.append(f"the black-holed connection was not replaced within 15 s (round {i + 1})")
            ends.append(time.monotonic())
            time.sleep(2.0)
        return ends
    return inject


def close_both(times: int = 5):
    def inject(rig) -> list[float]:
        watch_gaps(rig)
        ends = []
        for _ in range(times):
            status, _ = rig.pusher_control("POST", f"/pusher-local/apps/{rig.pusher.app_id}/disconnect?code=4200")
            assert status == 200
            ends.append(time.monotonic())
            time.sleep(3.0)
        return ends
    return inject


def pusher_local_restart(times: int = 2, down: float = 1.0):
    """pusher-local stopped (SIGTERM: every connection ends) and started again on the same port,
    `times` times: every connection of the bridge is lost at once."""
    def inject(rig) -> list[float]:
        from bridge_testkit.harness import PusherLocal
        watch_gaps(rig)
        ends = []
        for _ in range(times):
            port = rig.pusher.port
            rig.pusher.stop(signal.SIGTERM)
            time.sleep(down)
            restarted = PusherLocal(rig.workdir, port=port, extra=["--activity-timeout", "2"])
            rig.processes.append(restarted)
            restarted.start()
            rig.pusher = restarted
            rig.wait_subscribed(20)
            ends.append(time.monotonic())
            time.sleep(3.0)
        return ends
    return inject


def sigkill_restart(down: float = 2.0):
    def inject(rig) -> list[float]:
        watch_gaps(rig)
        # The last-held file is written every 5 s: let it hold the channels first.
        time.sleep(5.5)
        rig.bridge.kill()
        time.sleep(down)
        rig.bridge.start()
        return [time.monotonic()]
    return inject


def pusher_reloads(times: int = 10, every: float = 3.0):
    """`times` SIGHUPs each changing `[bridge.pusher] activity_timeout` (40 s / 30 s), so each
    replaces both connections one at a time; then one with a wrong `key` (pusher-local refuses it
    with 4001: the replacement stops after 30 s, the other connection keeps the old settings), then
    the right key again."""
    import re

    def reload_with(rig, activity: int, key: str | None = None):
        text = re.sub(r'activity_timeout = "\d+s"\n', "", rig.bridge.config_path.read_text())
        text = text.replace("[bridge.pusher]\n", f'[bridge.pusher]\nactivity_timeout = "{activity}s"\n', 1)
        if key is not None:
            text = re.sub(r'(\[bridge\.pusher\][^\[]*?)\nkey = "[^"]*"', lambda m: f'{m.group(1)}\nkey = "{key}"', text, count=1)
        rig.bridge.write_config(text)
        rig.bridge.send_signal(signal.SIGHUP)

    def replaced(rig) -> int:
        return rig.bridge.log().count(" pusher connection replaced ")

    def inject(rig) -> list[float]:
        watch_gaps(rig)
        ends, took = [], []
        for i in range(times):
            before, at = replaced(rig), time.monotonic()
            reload_with(rig, 40 if i % 2 == 0 else 30)
            deadline = at + 20
            while replaced(rig) < before + 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            if replaced(rig) < before + 2:
                rig.failures.append(f"reload {i + 1}: both connections not replaced within 20 s")
                return ends
            took.append(round(time.monotonic() - at, 2))
            ends.append(time.monotonic())
            time.sleep(max(0.0, every - (time.monotonic() - at)))
        rig.observations.append(f"{times} reloads, each replacing both connections; seconds until both replaced: {took}")
        # A wrong key: the first replacement never comes up; after 30 s the other keeps the old settings.
        before, at = rig.bridge.log().count("pusher connection not up with the new settings"), time.monotonic()
        reload_with(rig, 30, key="wrong-key")
        deadline = at + 45
        while rig.bridge.log().count("pusher connection not up with the new settings") == before and time.monotonic() < deadline:
            time.sleep(0.2)
        gave_up = time.monotonic() - at
        if rig.bridge.log().count("pusher connection not up with the new settings") == before:
            rig.failures.append("a reload with a wrong key was not given up within 45 s")
        ready = rig.readyz()
        rig.observations.append(f"wrong key: gave up after {gave_up:.1f} s; /readyz {ready} meanwhile (one connection keeps the "
                                f"old settings)")
        if ready != 200:
            rig.failures.append(f"/readyz {ready} with one connection on the old settings")
        ends.append(time.monotonic())
        before = replaced(rig)
        reload_with(rig, 40, key=rig.pusher.key)
        deadline = time.monotonic() + 20
        while replaced(rig) < before + 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        if replaced(rig) < before + 2:
            rig.failures.append("the right key again: both connections not replaced within 20 s")
        ends.append(time.monotonic())
        return ends
    return inject


def no_gap(rig, p2m_reports) -> None:
    records = gap_records(rig)
    rig.observations.append(f"gap records: {len(records)}")
    if records:
        rig.failures.append(f"{len(records)} gap records where none was expected: {records[:2]}")


def gaps_cover_the_loss(expected_per_channel: int | None, exact: bool = True):
    """Each lost event was sent inside a gap of its channel (± TOLERANCE_S), and, when `exact`,
    each gap lies between the last event delivered before it and the first delivered after it
    (± TOLERANCE_S). A restart gap is not exact: its `from` is the last-held file's last write,
    up to 5 s before the daemon died (over-reported by design, docs/pusher-merge.md)."""
    def check(rig, p2m_reports) -> None:
        records = gap_records(rig)
        by_channel: dict[str, list[tuple[float, float]]] = {}
        for g in records:
            by_channel.setdefault(g["channel"], []).append((epoch(g["from"]) - rig.wall_offset, epoch(g["to"]) - rig.wall_offset))
        counts = {c: len(v) for c, v in sorted(by_channel.items())}
        rig.observations.append(f"gap records per channel: {counts}; seconds: {[g['seconds'] for g in records][:10]}")
        if expected_per_channel is not None:
            for channel in rig.p2m_channels:
                if counts.get(channel, 0) != expected_per_channel:
                    rig.failures.append(f"{channel}: {counts.get(channel, 0)} gap records, expected {expected_per_channel}")
        sent = rig.p2m.sent.snapshot()
        received = rig.receiver.received.snapshot()
        outside = 0
        too_wide = 0
        for report in p2m_reports:
            channel = report.stream.split("/", 1)[1]
            windows = by_channel.get(channel, [])
            times = dict(sent.get(report.stream, []))
            for seq in report.lost_seqs:
                at = times.get(seq)
                if at is None or not any(lo - TOLERANCE_S <= at <= hi + TOLERANCE_S for lo, hi in windows):
                    outside += 1
            delivered = sorted(times[q] for q, _ in received.get(report.stream, []) if q in times)
            for lo, hi in windows if exact else []:
                before = [t for t in delivered if t < lo]
                after = [t for t in delivered if t > hi]
                inside = [t for t in delivered if lo + TOLERANCE_S < t < hi - TOLERANCE_S]
                if inside:
                    too_wide += 1
                if before and after and (hi - lo) > (after[0] - before[-1]) + 2 * TOLERANCE_S:
                    too_wide += 1
        rig.observations.append(f"lost events outside every gap of their channel: {outside}; gaps wider than the loss: {too_wide}")
        if outside:
            rig.failures.append(f"{outside} lost Pusher -> MQTT events were not inside a reported gap")
        if too_wide:
            rig.failures.append(f"{too_wide} gaps contain delivered events or are wider than the loss window")
    return check


def rows(matrix: types.ModuleType) -> list:
    r = matrix.RATE
    zero = "0 lost, 0 duplicates, order kept, no gap record"
    m2p = Expectation(0, max_recovery_s=2, why="the HTTP API is not affected: 0 lost, order kept")
    return [
        matrix.Row("redundant-close-one", "connections = 2: ONE connection closed with 4200 every 2 s for 2 min, alternating",
                   Expectation(0, max_duplicates=0, why=f"docs/contract.md §8.1: the other connection holds every channel: {zero}"),
                   m2p, close_one_alternating(), config=two_connections, check=no_gap),
        matrix.Row("redundant-blackhole-one", "connections = 2: one connection black-holed (proxy) until the pong timeout "
                                              "replaces it, x5",
                   Expectation(0, max_duplicates=0, why=f"docs/contract.md §8.1: a silent connection is found by the pong "
                                                        f"timeout while the other delivers: {zero}"),
                   m2p, blackhole_one(), config=two_connections, check=no_gap),
        matrix.Row("redundant-pusher-reload", "connections = 2: 10 SIGHUPs changing [bridge.pusher] (activity_timeout), then a "
                                              "wrong key (refused), then the right key",
                   Expectation(0, max_duplicates=0, why="docs/contract.md §8.1 staggered reconnects: each reload replaces one "
                                                        "connection at a time while the other holds every channel: "
                                                        f"{zero}; the wrong key is given up after 30 s with the other "
                                                        "connection on the old settings, /readyz 200"),
                   m2p, pusher_reloads(), config=two_connections, check=no_gap),
        matrix.Row("redundant-close-both", "connections = 2: pusher-local closes every connection with 4200 x5",
                   Expectation(int(r * 1.0 * 5), max_duplicates=0, max_recovery_s=2,
                               why="Pusher has no replay: <= rate x 1 s per close; one gap record per channel and close, "
                                   f"every lost event inside its channel's gap (+-{TOLERANCE_S:g} s), no gap wider than "
                                   "the loss"),
                   m2p, close_both(), config=two_connections, check=gaps_cover_the_loss(5)),
        matrix.Row("redundant-pusher-restart", "connections = 2: pusher-local stopped and started again on its port (1 s down) x2",
                   Expectation(int(r * 4.0 * 2), max_duplicates=0, max_recovery_s=5,
                               why="every connection lost at once: the events published until a connection is back "
                                   "and subscribed are lost (<= rate x 4 s per restart: 1 s down + reconnect backoff + "
                                   "subscribe), one gap record per channel and restart, every lost event inside its "
                                   f"channel's gap (+-{TOLERANCE_S:g} s), no gap wider than the loss"),
                   Expectation(0, max_recovery_s=5,
                               why="the HTTP API is away for the restart: the bridge keeps the batches and retries "
                                   "(docs/contract.md §5.6): 0 lost, in order"),
                   pusher_local_restart(), config=two_connections, check=gaps_cover_the_loss(2)),
        matrix.Row("redundant-bridge-sigkill", "connections = 2: the daemon SIGKILLed, restarted after 2 s",
                   Expectation(int(r * 5), max_recovery_s=6,
                               why="Pusher has no replay: <= rate x (2 s down + start + subscribe) lost, as with one "
                                   "connection; the restart gap reported once per channel from the last-held file (<= 5 s "
                                   "before the kill), every lost event inside it"),
                   Expectation(int(r * 0.1), max_recovery_s=6,
                               why="docs/contract.md §5.6, as the bridge-sigkill row: only what libmosquitto acknowledged "
                                   "but the bridge had not spooled (<= rate x 100 ms)"),
                   sigkill_restart(), config=two_connections, check=gaps_cover_the_loss(1, exact=False)),
    ]

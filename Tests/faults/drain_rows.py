"""Fault-matrix row for the paced drain (docs/contract.md §8.3, `drain_rate`), run by matrix.py on
the common rig.

Row (expectation in `rows()`, written before running):
- `drain-paced`: `[bridge.pusher] drain_rate = "400/s"`; the HTTP API answers 503 for 20 s while
  MQTT -> Pusher traffic runs at the rig's rate (200/s: a backlog of about 4,000). Once the API
  answers again the backlog -- the messages sent before the fault ended -- reaches the API at
  400/s ± 5 % (measured between its 10th and 90th percentile of arrival), nothing lost, in order;
  the live messages behind it are not paced, so the whole stream has caught up about 4,000 / 400 +
  the retry delay after the fault. Pusher -> MQTT is not affected.
- `drain-unpaced`: the same without `drain_rate`, the baseline: nothing lost; the rate its backlog
  reaches the API at is reported (not judged), to compare with the paced one measured beside it.
- `drain-long` (issue 30's proof; `make faults-drain-long`, about 50 minutes, not in `make faults`):
  MQTT -> Pusher at 1,000 msg/s (Pusher -> MQTT at 50/s beside it), `drain_rate = "500/s"`, the HTTP
  API answers 503 for 10 minutes: a backlog of about 600,000. The backlog reaches the API at
  500/s ± 5 %, nothing lost, in order; the live messages queued behind it (about 1,000/s x 20 min)
  leave unpaced as fast as the lanes send; once everything sent has arrived, the live latency (HTTP
  API arrival - MQTT publish) of the next 60 s is back to normal: p50 <= 2 x the p50 of the 30 s
  before the outage + 10 ms, p99 <= 2 x its p99 + 50 ms. The buffer holds it all (max_messages
  3,000,000, max_bytes 2 GiB).
"""

from __future__ import annotations

import os
import time
import types
from statistics import quantiles

from bridge_testkit.faults.checker import Expectation

DRAIN = 400.0
OUTAGE_S = 20.0


def with_drain_rate(config: str) -> str:
    assert "[bridge.pusher]\n" in config
    return config.replace("[bridge.pusher]\n", f'[bridge.pusher]\ndrain_rate = "{DRAIN:g}/s"\n', 1)


def api_outage(rig) -> list[float]:
    rig.http_proxy.set_mode("status", 503)
    time.sleep(OUTAGE_S)
    rig.http_proxy.set_mode("pass")
    rig.drain_fault_end = time.monotonic()
    rig.observations.append(f"HTTP proxy: {rig.http_proxy.requests}")
    return [rig.drain_fault_end]


def backlog_rate(rig) -> tuple[int, float] | None:
    """(backlog size, its rate at the API between its 10th and 90th percentile of arrival)."""
    end = rig.drain_fault_end
    sent = {(stream, seq): t for stream, items in rig.m2p.sent.snapshot().items() for seq, t in items}
    accepted = sorted(t for stream, items in rig.api_received().items() for seq, t in items
                      if sent.get((stream, seq), end) < end and t >= end)
    if len(accepted) < 100:
        rig.failures.append(f"a backlog of {len(accepted)} messages reached the API after the fault: too few to measure")
        return None
    lo, hi = accepted[len(accepted) // 10], accepted[len(accepted) * 9 // 10]
    rate = (len(accepted) * 8 // 10) / max(hi - lo, 1e-6)
    rig.observations.append(f"backlog {len(accepted)} messages; reached the API at {rate:.1f}/s between its 10th and 90th "
                            f"percentile; the last {accepted[-1] - end:.2f} s after the fault")
    return len(accepted), rate


def backlog_at_the_drain_rate(rig, p2m_reports) -> None:
    measured = backlog_rate(rig)
    if measured is None:
        return
    _, rate = measured
    if not DRAIN * 0.95 <= rate <= DRAIN * 1.05:
        rig.failures.append(f"the backlog left at {rate:.1f}/s, not {DRAIN:g}/s ± 5 %")


LONG_RATE, LONG_P2M_RATE, LONG_DRAIN = 1000.0, 50.0, 500.0
# DRAIN_LONG_OUTAGE_S shortens the outage for a try of the row itself (the proof is the 600 s).
LONG_OUTAGE_S = float(os.environ.get("DRAIN_LONG_OUTAGE_S", "600"))
LONG_BASELINE_S, LONG_LIVE_S = 30.0, 60.0


def long_config(config: str) -> str:
    old = 'max_messages = 100000\nmax_bytes = "64MiB"\n'
    assert old in config
    config = config.replace(old, 'max_messages = 3000000\nmax_bytes = "2GiB"\n')
    return config.replace("[bridge.pusher]\n", f'[bridge.pusher]\ndrain_rate = "{LONG_DRAIN:g}/s"\n', 1)


def long_outage(rig) -> list[float]:
    """Traffic for LONG_BASELINE_S, the outage, then traffic until everything sent has reached the
    API (checked by counts: what was sent by one poll has arrived by a later one), then LONG_LIVE_S
    more, the window whose latency is judged."""
    time.sleep(LONG_BASELINE_S)
    rig.drain_outage_start = time.monotonic()
    rig.http_proxy.set_mode("status", 503)
    time.sleep(LONG_OUTAGE_S)
    rig.http_proxy.set_mode("pass")
    rig.drain_fault_end = time.monotonic()
    backlog = LONG_OUTAGE_S * LONG_RATE
    deadline = rig.drain_fault_end + backlog / LONG_DRAIN * 3 + 600
    sent_then = rig.m2p.sent.count()
    while time.monotonic() < deadline:
        time.sleep(5)
        arrived = len(rig.http_proxy.accepted_events)
        if arrived >= sent_then:
            break
        sent_then = rig.m2p.sent.count()
    rig.drain_caught_up = time.monotonic()
    rig.observations.append(f"caught up {rig.drain_caught_up - rig.drain_fault_end:.1f} s after the outage "
                            f"(everything sent by then had reached the API); HTTP proxy: {rig.http_proxy.requests}")
    time.sleep(LONG_LIVE_S)
    return [rig.drain_fault_end]


def latencies(rig, since: float, until: float) -> list[float]:
    """API arrival - MQTT publish, in ms, of the messages published in [since, until), first arrivals."""
    sent = {(stream, seq): t for stream, items in rig.m2p.sent.snapshot().items() for seq, t in items if since <= t < until}
    first: dict = {}
    for stream, items in rig.api_received().items():
        for seq, at in items:
            key = (stream, seq)
            if key in sent and key not in first:
                first[key] = at
    return sorted((first[k] - sent[k]) * 1000 for k in first)


def p50_p99(values: list[float]) -> tuple[float, float]:
    cuts = quantiles(values, n=100, method="inclusive")
    return cuts[49], cuts[98]


def long_drain_checks(rig, p2m_reports) -> None:
    measured = backlog_rate(rig)
    if measured is not None:
        size, rate = measured
        if not LONG_DRAIN * 0.95 <= rate <= LONG_DRAIN * 1.05:
            rig.failures.append(f"the backlog left at {rate:.1f}/s, not {LONG_DRAIN:g}/s ± 5 %")
    before = latencies(rig, rig.drain_outage_start - LONG_BASELINE_S + 3, rig.drain_outage_start)
    after = latencies(rig, rig.drain_caught_up + 5, float("inf"))
    if len(before) < 100 or len(after) < 100:
        rig.failures.append(f"too few messages to judge the latency: {len(before)} before, {len(after)} after")
        return
    (b50, b99), (a50, a99) = p50_p99(before), p50_p99(after)
    rig.observations.append(f"live latency, API arrival - publish: before the outage p50 {b50:.1f} ms / p99 {b99:.1f} ms "
                            f"({len(before)} messages); after the catch-up p50 {a50:.1f} ms / p99 {a99:.1f} ms ({len(after)})")
    if a50 > 2 * b50 + 10 or a99 > 2 * b99 + 50:
        rig.failures.append(f"live latency not back to normal after the catch-up: p50 {a50:.1f} ms / p99 {a99:.1f} ms "
                            f"against {b50:.1f} / {b99:.1f} ms before the outage")


def rows(matrix: types.ModuleType) -> list:
    recovery = OUTAGE_S * matrix.RATE / DRAIN + 4
    return [
        matrix.Row("drain-paced", f'[bridge.pusher] drain_rate = "{DRAIN:g}/s": the HTTP API answers 503 for {OUTAGE_S:g} s '
                                  "with MQTT -> Pusher at rate",
                   Expectation(0, max_recovery_s=2, why="the WebSocket side is not affected: 0 lost, order kept"),
                   Expectation(0, max_recovery_s=recovery,
                               why=f"docs/contract.md §8.3: the backlog (rate x {OUTAGE_S:g} s) leaves at {DRAIN:g}/s ± 5 %, "
                                   f"nothing lost, in order; live messages after it are not paced: caught up within "
                                   f"backlog / drain_rate + the retry delay (<= {recovery:.0f} s)"),
                   api_outage, config=with_drain_rate, check=backlog_at_the_drain_rate),
        matrix.Row("drain-unpaced", f"the baseline of drain-paced: the same {OUTAGE_S:g} s of 503 without drain_rate",
                   Expectation(0, max_recovery_s=2, why="the WebSocket side is not affected: 0 lost, order kept"),
                   Expectation(0, max_recovery_s=6,
                               why="docs/contract.md §5.6: retried with backoff, 0 lost, in order; the backlog leaves as "
                                   "fast as the lanes send (its rate reported, not judged)"),
                   api_outage, check=lambda rig, _reports: backlog_rate(rig)),
        matrix.Row("drain-long", f'[bridge.pusher] drain_rate = "{LONG_DRAIN:g}/s": the HTTP API answers 503 for '
                                 f"{LONG_OUTAGE_S / 60:g} minutes with MQTT -> Pusher at {LONG_RATE:g}/s",
                   Expectation(0, max_recovery_s=2, why="the WebSocket side is not affected: 0 lost, order kept"),
                   Expectation(0, max_recovery_s=LONG_OUTAGE_S * LONG_RATE / LONG_DRAIN / 0.95 + 40,
                               why=f"docs/contract.md §8.3: the backlog ({LONG_OUTAGE_S * LONG_RATE:,.0f}) leaves at "
                                   f"{LONG_DRAIN:g}/s ± 5 %, nothing lost, in order; the first live message arrives "
                                   "right after it; once all has arrived, the live latency is back to normal"),
                   long_outage, config=long_config, check=long_drain_checks, rate=LONG_RATE, p2m_rate=LONG_P2M_RATE,
                   long=True),
    ]

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
"""

from __future__ import annotations

import time
import types

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
    ]

"""Fault-matrix rows for webhooks in (docs/contract.md §7.2). Custom rows: each runs its own
processes (`run_webhook_outage`, Tests/testkit/bridge_testkit/webhooks.py, which Tests/e2e/test_webhooks.py
runs too), not the Rig's traffic."""

from __future__ import annotations

import time
import traceback
from pathlib import Path

from bridge_testkit.faults.rig import judge_direction

REQUESTS = 300


def webhook_outage_row(row, base: Path):
    """"Webhooks during a broker outage": mosquitto stopped, REQUESTS signed webhook requests (one
    numbered client event each, every third sent twice as Pusher's retry), broker back. Twice:
    with persist = true every request is answered 200 (spooled) and every event reaches MQTT once,
    in order; with persist = false each is answered 503 while the broker is away, and Pusher's retry
    after it is back gets 200 and is published. Judged: both streams against row.p2m, the answers,
    webhooks_total and the counter identity (docs/contract.md §7.6)."""
    from matrix import Result, describe, fmt_dir

    from bridge_testkit.webhooks import run_webhook_outage

    started = time.monotonic()
    observations: list[str] = []
    observed: dict = {}
    misses: list[str] = []
    try:
        persisted = run_webhook_outage(base / row.name / "persist", requests=REQUESTS, persist=True)
        memory = run_webhook_outage(base / row.name / "memory", requests=REQUESTS, persist=False)
        retries = (REQUESTS + 2) // 3
        sent = {"persist": persisted["sent"]["webhooks"], "memory": memory["sent"]["webhooks"]}
        received = {"persist": persisted["received"]["webhooks"], "memory": memory["received"]["webhooks"]}
        ends = [persisted["broker_back"], memory["broker_back"]]
        totals, recovery, judged, _ = judge_direction(sent, received, row.p2m, ends)
        misses += [f"P->M {m}" for m in judged] + persisted["failures"] + memory["failures"]
        if persisted["statuses"].get("outage") != {200: REQUESTS + retries}:
            misses.append(f"persist = true answered {persisted['statuses'].get('outage')} during the outage, not all 200")
        if persisted["webhooks_total"] != {"accepted": REQUESTS, "duplicate": retries, "unavailable": 0}:
            misses.append(f"persist = true webhooks_total {persisted['webhooks_total']}")
        if memory["statuses"].get("outage") != {503: REQUESTS + retries}:
            misses.append(f"persist = false answered {memory['statuses'].get('outage')} during the outage, not all 503")
        if memory["statuses"].get("retry") != {200: REQUESTS}:
            misses.append(f"persist = false answered {memory['statuses'].get('retry')} to the retries, not all 200")
        observations += [f"persist: {o}" for o in persisted["observations"]] + [f"memory: {o}" for o in memory["observations"]]
        identity = [run.get("identity", {}).get("pusher_to_mqtt", "-") for run in (persisted, memory)]
        observed = {"p2m": fmt_dir(totals, recovery),
                    "identity": {"pusher_to_mqtt": f"persist {identity[0]}, memory {identity[1]}"}}
    except Exception as e:
        misses.append(f"row error: {e!r}")
        observations.append(traceback.format_exc(limit=3))
    return Result(row.name, row.fault, describe(row.p2m), describe(row.m2p), observed,
                  "PASS" if not misses else "MISS", misses, observations, round(time.monotonic() - started, 1))

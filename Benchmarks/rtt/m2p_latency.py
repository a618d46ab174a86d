"""Only the MQTT -> Pusher fixed-rate latency cells of `make bench` (Benchmarks/bridge/bench.py):
the broker ceiling (c_pub -> mosquitto -> c_sub) and the bridge M->P path at the same rates,
interleaved, RUNS times each; prints p50/p99 per run, the medians and the added p99
(bridge p99 - ceiling p99), the figure issue 16 sets a target for (<= 1 ms at 1k/s, <= 2 ms at 5k/s).

    .venv/bin/python Benchmarks/rtt/m2p_latency.py --bin-dir .build/release --tools-dir .build/bench-tools \
        [--runs 3] [--rates 1000,5000] [--latency-seconds 3] [--json OUT] [--bridges before=BIN,after=BIN]

With --bridges, each run measures every named daemon binary in turn, right after the same run's
ceiling (interleaved, so that the machine's drifts hit all of them alike).

It reuses bench.py's `Bench` (same processes, payloads, receivers and percentiles), so its numbers
are the latency table's cells of BENCHMARKS.md measured alone.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import statistics
import sys
from pathlib import Path

from bridge_testkit import bench


def main() -> int:
    parser = argparse.ArgumentParser(description="MQTT->Pusher latency cells of make bench, alone")
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--tools-dir", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rates", default="1000,5000")
    parser.add_argument("--latency-seconds", type=float, default=3.0)
    parser.add_argument("--latency-qos", type=int, default=1)
    parser.add_argument("--json", help="write every run and the medians here")
    parser.add_argument("--bridges", default="", help="NAME=pusher-mqtt-bridge binary,…: compare daemons (default: --bin-dir's)")
    args = parser.parse_args()
    args.quick, args.pusher_receiver = False, "swift"
    rates = [int(r) for r in args.rates.split(",") if r]
    bridges = dict(item.split("=", 1) for item in args.bridges.split(",") if item) or \
        {"bridge": str(Path(args.bin_dir).resolve() / "pusher-mqtt-bridge")}

    atexit.register(bench.stop_all)
    signal.signal(signal.SIGTERM, bench.on_signal)
    signal.signal(signal.SIGINT, bench.on_signal)
    b = bench.Bench(args)
    rows = []
    try:
        for rate in rates:
            for run in range(1, args.runs + 1):
                rows.append(b.measure("latency", "c", "ceiling", args.latency_qos, 100, rate, run))
                for label, binary in bridges.items():
                    os.environ["BRIDGE_BIN"] = str(Path(binary).resolve())
                    row = b.measure("latency", "bridge", "m2p", args.latency_qos, 100, rate, run)
                    row["bridge_binary"] = label
                    rows.append(row)
    finally:
        bench.stop_all()

    def med(rate, direction, field, label=None):
        values = [r["latency"][field] for r in rows
                  if r["offered_rate"] == rate and r["direction"] == direction and "error" not in r and r.get("latency")
                  and (label is None or r.get("bridge_binary") == label)]
        return statistics.median(values) if values else None

    summary = []
    print("\n| rate/s | daemon | ceiling p50 / p99 | bridge M→P p50 / p99 | added p99 |\n|---|---|---|---|---|")
    for rate in rates:
        for label in bridges:
            c50, c99 = med(rate, "ceiling", "p50_ms"), med(rate, "ceiling", "p99_ms")
            b50, b99 = med(rate, "m2p", "p50_ms", label), med(rate, "m2p", "p99_ms", label)
            added = b99 - c99 if b99 is not None and c99 is not None else None
            summary.append({"rate": rate, "daemon": label, "ceiling_p50_ms": c50, "ceiling_p99_ms": c99,
                            "bridge_p50_ms": b50, "bridge_p99_ms": b99, "added_p99_ms": added})
            fmt = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731
            print(f"| {rate:,} | {label} | {fmt(c50)} / {fmt(c99)} | {fmt(b50)} / {fmt(b99)} | {fmt(added)} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "runs": rows}, indent=1) + "\n")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
